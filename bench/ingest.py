"""Figure 4: event ingestion through the daemon's stream-and-dispatch path.

The recorded SSE bytes of a real debate (``bench/fixtures/debate-events.sse``, recorded by figure
1 from ``/global/event``) are served in a loop, at full speed, by a local SSE server in a child
process. This process runs the daemon's :class:`roundtabled.opencode.stream.EventStream` (the live
connection path: aiohttp read, :class:`SSEDecoder`, :func:`parse_event`) dispatching into
:meth:`roundtabled.engine.registry.Engine.on_event` with the fixture's roundtables registered as
live tables (so idle/status/message events really poke workers). The client is pinned to one CPU
(``sched_setaffinity``), the server to the other when there are two.

Reported: events/s over the whole replay, and RSS (MB) sampled every ``sample_every`` events —
flat means the last sample is within a few MB of the one after warm-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from roundtabled.core.state import RoundtableState, Signer
from roundtabled.engine.registry import Engine
from roundtabled.engine.settings import Settings
from roundtabled.engine.table import Table
from roundtabled.offline.opencode_server import free_port
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.opencode.events import SESSION_CREATED, parse_event
from roundtabled.opencode.stream import EventStream, SSEDecoder

from .env import rss_mb
from .stats import rnd

SERVER = r"""
import asyncio, sys
from aiohttp import web
data = open(sys.argv[1], "rb").read()
first = b'data: {"payload":{"type":"server.connected","properties":{}}}\n\n'
body = data
repeat = int(sys.argv[3])
async def handler(request):
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(first + b"\n\n")
    block = body * 16
    for _ in range(repeat // 16 + 1):
        await resp.write(block)
    await resp.write_eof()
    return resp
app = web.Application()
app.router.add_get("/global/event", handler)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[2]), print=None)
"""


def fixture_info(data: bytes) -> tuple[int, list[str]]:
    """(events per loop of the fixture body, S2 session ids found in it)."""
    decoder = SSEDecoder()
    payloads = decoder.feed(data)
    sessions: list[str] = []
    for p in payloads:
        ev = parse_event(p)
        if ev is not None and ev.type == SESSION_CREATED and ev.parent_id and ev.session_id:
            sessions.append(ev.session_id)
    return len(payloads), sessions


async def wait_listening(port: int, timeout: float = 20.0) -> None:
    """Return once ``127.0.0.1:port`` accepts a connection (or ``timeout`` seconds passed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        except OSError:
            await asyncio.sleep(0.05)


async def run(
    fixture: Path,
    *,
    events: int,
    sample_every: int = 100_000,
    reader: Callable[[str, Callable[[Any], None], asyncio.Event], Coroutine[Any, Any, None]]
    | None = None,
) -> dict[str, Any]:
    """Replay ``fixture`` ``events`` times over; ``reader`` (default: :class:`EventStream`)
    connects to the base URL, calls the callback per parsed event and sets the event at the end
    of the stream (``bench/transport.py`` passes aiohttp-sse-client here)."""
    data = fixture.read_bytes()
    per_loop, sessions = fixture_info(data)
    repeat = events // per_loop + 1
    port = free_port()
    cpus = sorted(os.sched_getaffinity(0))
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVER, str(fixture), str(port), str(repeat)
    )
    if len(cpus) > 1:
        os.sched_setaffinity(server.pid, {cpus[1]})
    os.sched_setaffinity(0, {cpus[0]})
    client = OpenCodeClient(f"http://127.0.0.1:{port}")
    engine = Engine(client, Signer(b"x" * 32), Settings())
    for sid in sessions:
        st = RoundtableState(sessionID=sid, title="t", agents=["pm"], total_rounds=1, prompt="p")
        engine.tables[sid] = Table(state=st)
    samples: list[tuple[int, float]] = []
    done = asyncio.Event()
    target = per_loop * repeat
    stream: EventStream

    count = 0

    def on_event(ev: Any) -> None:
        nonlocal count
        engine.on_event(ev)
        count += 1
        if count % sample_every == 0:
            samples.append((count, rss_mb()))

    stream = EventStream(
        f"http://127.0.0.1:{port}",
        on_event,
        on_disconnect=lambda reason: done.set(),
        heartbeat_timeout=60,
    )
    try:
        await wait_listening(port)
        rss0 = rss_mb()
        t0 = time.perf_counter()
        c0 = time.process_time()
        if reader is None:
            task = asyncio.create_task(stream.run())
        else:
            task = asyncio.create_task(reader(f"http://127.0.0.1:{port}", on_event, done))
        await asyncio.wait_for(done.wait(), 600)
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        os.sched_setaffinity(0, set(cpus))
        server.terminate()
        await server.wait()
        await client.close()
    n = stream.events if reader is None else count
    rate = n / elapsed
    warm = [m for k, m in samples if k >= 2 * sample_every] or [m for _, m in samples]
    peak = max([rss0, *(m for _, m in samples)])
    growth = (warm[-1] - warm[0]) if warm else 0.0
    return {
        "fixture": str(fixture.name),
        "fixture_bytes": len(data),
        "fixture_events": per_loop,
        "roundtables_in_fixture": len(sessions),
        "events": n,
        "expected_events": target + 1,
        "bytes": stream.bytes if reader is None else None,
        "replay_s": rnd(elapsed, 2),
        "events_per_s": round(rate),
        "client_cpu_s": rnd(cpu, 2),
        "events_per_cpu_s": round(n / cpu) if cpu else None,
        "rss_start_mb": rnd(rss0, 1),
        "rss_samples_mb": [[k, rnd(m, 1)] for k, m in samples],
        "rss_growth_after_warmup_mb": rnd(growth, 1),
        "rss_peak_mb": rnd(peak, 1),
        "target_events_per_s": 20_000,
        "met": rate >= 20_000 and growth <= 5.0 and n >= events,
    }
