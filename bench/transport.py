"""Transport comparison: our SSE decoder (:class:`roundtabled.opencode.stream.EventStream`) against
aiohttp-sse-client (``EventSource`` on a ``ClientSession(read_bufsize=32 MiB)``), same run.

Usage (from the repository root; needs ``pip install aiohttp-sse-client``, not a dependency)::

    .venv/bin/python -m bench.transport [--events N]

Two measurements, each for both readers, printed as one JSON document:

- ``ingest``: figure 4 (:func:`bench.ingest.run`, the recorded debate stream replayed into
  ``Engine.on_event``), once per reader: events/s and RSS growth.
- ``trickle``: one 8 MiB ``message.part.updated`` event sent in 64 KiB pieces every 20 ms
  (about 2.6 s), with a 1.0 s liveness timeout. Ours re-arms the timeout on every received chunk
  (bytes); a line reader can only re-arm it per complete line, so ``longest_silence_s`` is what its
  timer sees; ``aiohttp-sse-client+bytes`` re-arms it from the library's private response byte
  count instead. ``survived``: the event was dispatched without the liveness timeout firing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from roundtabled.offline.opencode_server import free_port
from roundtabled.opencode.events import parse_event
from roundtabled.opencode.stream import EventStream

from . import ingest
from .stats import rnd

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "debate-events.sse"
READ_BUFSIZE = 32 * 1024 * 1024
HUGE = 8 * 1024 * 1024
LIVENESS_S = 1.0

TRICKLE_SERVER = r"""
import asyncio, sys
from aiohttp import web
huge = b'data: {"payload":{"type":"message.part.updated","properties":{"part":{"text":"'
huge += b"x" * int(sys.argv[2]) + b'"}}}}\n\n'
async def handler(request):
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(b'data: {"payload":{"type":"server.connected","properties":{}}}\n\n')
    for i in range(0, len(huge), 65536):
        await resp.write(huge[i : i + 65536])
        await asyncio.sleep(0.02)
    await resp.write(b'data: {"payload":{"type":"server.heartbeat","properties":{}}}\n\n')
    await asyncio.sleep(3600)
    return resp
app = web.Application()
app.router.add_get("/global/event", handler)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""


async def library_reader(url: str, on_event: Callable[[Any], None], done: asyncio.Event) -> None:
    """aiohttp-sse-client feeding :func:`parse_event`; sets ``done`` when the stream ends."""
    from aiohttp_sse_client.client import EventSource

    async with (
        aiohttp.ClientSession(read_bufsize=READ_BUFSIZE) as http,
        EventSource(
            url + "/global/event",
            session=http,
            on_error=done.set,
            timeout=aiohttp.ClientTimeout(total=None),
        ) as source,
    ):
        async for msg in source:
            ev = parse_event(msg.data)
            if ev is not None:
                on_event(ev)


async def _watch_bytes(source: Any, deadline: asyncio.Timeout, progress: list[float]) -> None:
    """Re-arm ``deadline`` whenever the library's response has received more bytes; reads its
    private ``_response`` (the library exposes no byte count): the only way to measure bytes."""
    loop = asyncio.get_running_loop()
    seen = -1
    while True:
        total = source._response.content.total_bytes
        if total != seen:
            seen = total
            progress.append(time.monotonic())
            deadline.reschedule(loop.time() + LIVENESS_S)
        await asyncio.sleep(0.01)


async def trickle(kind: str) -> dict[str, Any]:
    """One slowly arriving 8 MiB event through ``kind`` ("roundtabled" or "aiohttp-sse-client")."""
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", TRICKLE_SERVER, str(port), str(HUGE)
    )
    url = f"http://127.0.0.1:{port}"
    types: list[str] = []
    progress: list[float] = []  # monotonic times at which the reader could re-arm its timer
    reason = ""
    try:
        await ingest.wait_listening(port)
        t0 = time.monotonic()
        progress.append(t0)
        if kind == "roundtabled":
            lost = asyncio.Event()

            def on_disconnect(why: str) -> None:
                nonlocal reason
                reason = why
                lost.set()

            stream = EventStream(
                url,
                lambda ev: types.append(ev.type),
                on_disconnect=on_disconnect,
                heartbeat_timeout=LIVENESS_S,
            )
            task = asyncio.create_task(stream.run())
            while "server.heartbeat" not in types and not lost.is_set():
                last = stream.last_rx_at
                if last is not None and last != progress[-1]:
                    progress.append(last)
                await asyncio.sleep(0.005)
                if time.monotonic() - t0 > 30:
                    break
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        else:
            from aiohttp_sse_client.client import EventSource

            async with (
                aiohttp.ClientSession(read_bufsize=READ_BUFSIZE) as http,
                EventSource(
                    url + "/global/event", session=http, timeout=aiohttp.ClientTimeout(total=None)
                ) as source,
            ):
                it = source.__aiter__()
                by_bytes = kind.endswith("+bytes")
                while "server.heartbeat" not in types:
                    try:
                        async with asyncio.timeout(LIVENESS_S) as deadline:  # per whole event
                            watch = (
                                asyncio.create_task(_watch_bytes(source, deadline, progress))
                                if by_bytes
                                else None
                            )
                            try:
                                msg = await it.__anext__()
                            finally:
                                if watch is not None:
                                    watch.cancel()
                    except TimeoutError:
                        reason = f"no {'byte' if by_bytes else 'complete line'} for {LIVENESS_S} s"
                        break
                    progress.append(time.monotonic())
                    ev = parse_event(msg.data)
                    if ev is not None:
                        types.append(ev.type)
        progress.append(time.monotonic())
    finally:
        server.terminate()
        await server.wait()
    gaps = [b - a for a, b in itertools.pairwise(progress)]
    return {
        "reader": kind,
        "huge_dispatched": "message.part.updated" in types,
        "survived": "message.part.updated" in types and not reason,
        "disconnect_reason": reason or None,
        "longest_silence_s": rnd(max(gaps, default=0.0), 2),
    }


async def main(events: int) -> dict[str, Any]:
    ours = await ingest.run(FIXTURE, events=events)
    library = await ingest.run(FIXTURE, events=events, reader=library_reader)
    keys = ("events", "events_per_s", "events_per_cpu_s", "rss_growth_after_warmup_mb", "met")
    return {
        "ingest": {
            "roundtabled": {k: ours[k] for k in keys},
            "aiohttp-sse-client": {k: library[k] for k in keys},
        },
        "trickle": [
            await trickle(kind)
            for kind in ("roundtabled", "aiohttp-sse-client", "aiohttp-sse-client+bytes")
        ],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.transport")
    parser.add_argument("--events", type=int, default=500_000, help="events per ingest run")
    args = parser.parse_args()
    print(orjson.dumps(asyncio.run(main(args.events)), option=orjson.OPT_INDENT_2).decode())
