"""roundtabled.opencode.client: body reading (uncompressed, in slices) and HttpClock readings."""

from __future__ import annotations

import asyncio
import gzip
import time

import orjson
from aiohttp import web

from roundtabled.errors import TransportError
from roundtabled.opencode.client import READ_SLICE, OpenCodeClient, busy_database
from roundtabled.opencode.http_clock import HttpClock


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
    t0 = time.perf_counter()
    clock.enter()
    clock.enter()  # overlapping requests count once
    time.sleep(0.02)
    busy_mid, _ = clock.reading()
    # At most the wall time since the first enter: counted twice it would be about double.
    assert 0.02 <= busy_mid <= time.perf_counter() - t0
    clock.leave()
    t1 = time.perf_counter()
    assert clock.reading()[0] <= t1 - t0  # one of two still in flight: still counted once
    clock.leave()
    busy, _ = clock.reading()
    assert busy_mid <= busy <= time.perf_counter() - t0
    time.sleep(0.02)
    assert clock.reading()[0] == busy  # no request in flight: no growth


# -- a busy database (OpenCode on SQLite with the write lock held by another process) ----------

BUSY = orjson.dumps(
    {
        "name": "UnknownError",
        "data": {"message": "Unexpected server error. Check server logs for details.", "ref": "e"},
    }
)


def busy_client(url: str, window: float = 5.0) -> OpenCodeClient:
    return OpenCodeClient(url, busy_window=window, busy_wait=0.01)


async def test_a_patch_is_retried_while_the_database_is_busy_beyond_three_attempts() -> None:
    """Exact input: the server answers 500 ``UnknownError`` to the first 4 PATCHes of a part
    (more than the 3 attempts of other transient failures), then 200."""
    calls: list[int] = []

    async def patch(request: web.Request) -> web.Response:
        calls.append(1)
        if len(calls) <= 4:
            return web.Response(status=500, body=BUSY, content_type="application/json")
        return web.json_response(await request.json())

    app = web.Application()
    app.router.add_patch("/session/{s}/message/{m}/part/{p}", patch)
    runner, url = await serve(app)
    try:
        async with busy_client(url) as client:
            part = {"id": "prt_1", "type": "text", "text": "state"}
            assert await client.update_part("ses_1", "msg_1", part) == part
            assert client.busy_retries == 4
    finally:
        await runner.cleanup()
    assert len(calls) == 5


async def test_other_500s_get_three_attempts_and_the_busy_window_ends() -> None:
    """A 500 naming none of the busy markers: 3 attempts; a database busy for longer than the
    window: the last error is raised (no endless retry)."""
    bodies = {"other": b'{"name":"Boom"}', "busy": BUSY}
    calls: dict[str, int] = {"other": 0, "busy": 0}

    async def patch(request: web.Request) -> web.Response:
        kind = request.match_info["s"]
        calls[kind] += 1
        return web.Response(status=500, body=bodies[kind], content_type="application/json")

    app = web.Application()
    app.router.add_patch("/session/{s}", patch)
    runner, url = await serve(app)
    try:
        async with busy_client(url, window=0.2) as client:
            for kind in ("other", "busy"):
                try:
                    await client.update_session(kind, title="t")
                except TransportError as exc:
                    assert exc.status == 500
                    assert busy_database(exc) == (kind == "busy")
                else:
                    raise AssertionError("no error raised")
    finally:
        await runner.cleanup()
    assert calls["other"] == 3
    assert calls["busy"] > 3


async def test_no_reply_is_resent_only_when_the_message_is_not_stored() -> None:
    """Exact input: ``noReply`` POST answered 500 ``UnknownError`` twice; after the first the
    message does not exist (resent), after the second it exists with its part (the write went
    through although the answer was an error): returned as it is, never posted a third time."""
    posts: list[str] = []
    stored: dict[str, dict[str, object]] = {}

    async def post(request: web.Request) -> web.Response:
        body = await request.json()
        posts.append(body["messageID"])
        if len(posts) == 2:
            stored[body["messageID"]] = {"info": {"id": body["messageID"]}, "parts": body["parts"]}
        return web.Response(status=500, body=BUSY, content_type="application/json")

    async def get(request: web.Request) -> web.Response:
        msg = stored.get(request.match_info["m"])
        if msg is None:
            return web.json_response({"name": "NotFoundError"}, status=404)
        return web.json_response(msg)

    app = web.Application()
    app.router.add_post("/session/{s}/message", post)
    app.router.add_get("/session/{s}/message/{m}", get)
    runner, url = await serve(app)
    parts = [{"type": "text", "text": "state block"}]
    try:
        async with busy_client(url) as client:
            msg = await client.post_no_reply("ses_1", parts, message_id="msg_1")
    finally:
        await runner.cleanup()
    assert posts == ["msg_1", "msg_1"]
    assert msg["parts"] == parts


async def test_prompt_async_is_never_retried_on_a_busy_database() -> None:
    """A prompt is the machine's to repeat: one 500 is raised at once, one request sent."""
    posts: list[int] = []

    async def prompt(request: web.Request) -> web.Response:
        posts.append(1)
        return web.Response(status=500, body=BUSY, content_type="application/json")

    app = web.Application()
    app.router.add_post("/session/{s}/prompt_async", prompt)
    runner, url = await serve(app)
    try:
        async with busy_client(url) as client:
            try:
                await client.prompt_async("ses_1", {"parts": []})
            except TransportError as exc:
                assert busy_database(exc)
            else:
                raise AssertionError("no error raised")
    finally:
        await runner.cleanup()
    assert posts == [1]
