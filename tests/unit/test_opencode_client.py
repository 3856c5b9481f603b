"""roundtabled.opencode: body reading (uncompressed, in slices) and HttpClock readings."""

from __future__ import annotations

import asyncio
import gzip
import time

import orjson
from aiohttp import web

from roundtabled.opencode import READ_SLICE, HttpClock, OpenCodeClient


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


async def test_large_bodies_are_asked_uncompressed_and_read_in_slices() -> None:
    """An 8 MB message list arrives whole; reading it never holds the loop for the whole body
    (regression "huge events under load"), and a compressed answer (a proxy) still decodes."""
    text = "x" * (8 << 20)
    body = orjson.dumps([{"info": {"id": "msg_1"}, "parts": [{"type": "text", "text": text}]}])
    seen: list[str] = []

    async def messages(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Accept-Encoding", ""))
        if request.query.get("gzip"):
            return web.Response(
                body=gzip.compress(body),
                headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
            )
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/session/{sid}/message", messages)
    runner, url = await serve(app)
    ticks = 0
    stop = False

    async def ticker() -> None:
        nonlocal ticks
        while not stop:
            ticks += 1
            await asyncio.sleep(0)

    try:
        async with OpenCodeClient(url) as client:
            for params in (None, {"gzip": "1"}):
                data, _ = await client._request("GET", "/session/s/message", params=params)
                assert data[0]["parts"][0]["text"] == text
            task = asyncio.create_task(ticker())
            await asyncio.sleep(0)
            before = ticks
            data, _ = await client._request("GET", "/session/s/message", params={"gzip": "1"})
            stop = True
            await task
            assert data[0]["parts"][0]["text"] == text
            # The loop ran other tasks between the slices of the inflated 8 MB body.
            assert ticks - before >= len(body) // READ_SLICE // 2
    finally:
        await runner.cleanup()
    assert seen and all(enc == "identity" for enc in seen)


def test_http_clock_readings_count_requests_in_flight_once() -> None:
    clock = HttpClock()
    assert clock.reading() == (0.0, 0.0)
    clock.enter()
    clock.enter()  # overlapping requests count once
    time.sleep(0.02)
    busy_mid, _ = clock.reading()
    assert busy_mid >= 0.02
    clock.leave()
    clock.leave()
    busy, _ = clock.reading()
    assert busy >= busy_mid
    time.sleep(0.02)
    assert clock.reading()[0] == busy  # no request in flight: no growth
