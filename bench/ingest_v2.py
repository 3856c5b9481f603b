"""Figure 4 on OpenCode 2.x: event ingestion through the 2.x stream-and-dispatch path.

The 2.x counterpart of :mod:`bench.ingest`: the recorded ``GET /api/event`` bytes of one real
debate on the pinned 2.x server (``bench/fixtures/debate-events-v2.sse``, recorded by
:func:`record`: the debate of figure 1 on 2.x, through the daemon) are served in a loop, at full
speed, by a local SSE server in a child process. This process runs the daemon's 2.x stream
(:func:`roundtabled.opencode.v2.v2_event_stream`: :class:`~roundtabled.opencode.stream.
EventStream` with the 2.x envelope parser) dispatching into :meth:`roundtabled.engine.v2run.
V2Runner.on_event` with the fixture's roundtables registered as live ones (so an execution's end
really wakes its roundtable and a metadata update reaches the port). The client is pinned to one
CPU, the server to the other when there are two.

Reported as figure 4 on 1.x: events/s over the whole replay, events per CPU-second, and RSS (MB)
sampled every ``sample_every`` events.

Usage (from the repository root)::

    .venv/bin/python -m bench.run ingest --opencode 2 [--record-fixture]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from roundtabled.core.server_records import SessionRef
from roundtabled.core.state import RoundtableState, Signer
from roundtabled.engine.settings import Settings
from roundtabled.engine.v2run import Run, V2Runner
from roundtabled.offline.opencode_server import free_port
from roundtabled.opencode import v2
from roundtabled.opencode.port import V2Port
from roundtabled.opencode.stream import SSEDecoder

from .env import rss_mb
from .ingest import wait_listening
from .overhead_v2 import CallCount, V2Bench
from .stats import rnd

PROJECT = b"/project"
"""The project directory the recorded fixture names (the recording machine's path replaced)."""

SERVER = r"""
import sys
from aiohttp import web
body = open(sys.argv[1], "rb").read()
first = b'data: {"type":"server.connected","data":{}}\n\n'
repeat = int(sys.argv[3])
async def handler(request):
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(first)
    block = body * 16
    for _ in range(repeat // 16 + 1):
        await resp.write(block)
    await resp.write_eof()
    return resp
app = web.Application()
app.router.add_get("/api/event", handler)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[2]), print=None)
"""


async def record(root: Path) -> bytes:
    """The raw ``GET /api/event`` bytes of one debate of figure 1 on 2.x (3 seats × 5 rounds
    and the observer, through the daemon), from the stream's first byte to the debate's end."""
    calls = CallCount()
    bench = V2Bench(root, calls)
    recorded = bytearray()
    try:
        await bench.start()
        auth = aiohttp.BasicAuth("opencode", str(bench.srv.password))
        async with aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None), auth=auth
        ) as http:
            connected = asyncio.Event()

            async def tap() -> None:
                async with http.get(bench.srv.url + "/api/event") as resp:
                    while chunk := await resp.content.readany():
                        recorded.extend(chunk)
                        connected.set()

            task = asyncio.create_task(tap())
            try:
                await asyncio.wait_for(connected.wait(), 30)
                parent = await bench.oc.create_session(
                    directory=str(bench.srv.project_dir), title="S1"
                )
                await bench.debate(parent.id)
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                    await task
    finally:
        calls.close()
        await bench.close()
    # whole frames only, the server's own connected frame dropped (the replay sends its own);
    # the project's path on this machine replaced by a neutral one of its own
    frames = bytes(recorded).replace(str(bench.srv.project_dir).encode(), PROJECT).split(b"\n\n")
    return b"".join(f + b"\n\n" for f in frames[:-1] if b"server.connected" not in f)


def fixture_info(data: bytes) -> tuple[int, list[str]]:
    """(events per loop of the fixture body, the S2 sessions in it: children created)."""
    payloads = SSEDecoder().feed(data)
    sessions: list[str] = []
    for p in payloads:
        ev = v2.parse_v2_event(p)
        created = ev is not None and ev.type == "session.created" and ev.session_id
        if created and ev is not None and ev.session_id and ev.properties.get("parentID"):
            sessions.append(ev.session_id)
    return len(payloads), sessions


async def run(fixture: Path, *, events: int, sample_every: int = 100_000) -> dict[str, Any]:
    """Replay ``fixture`` until ``events`` events were dispatched."""
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
    url = f"http://127.0.0.1:{port}"
    runner = V2Runner(V2Port(v2.V2Client(url, password="x")), Signer(b"x" * 32), Settings())
    for sid in sessions:
        st = RoundtableState(sessionID=sid, title="t", agents=["pm"], total_rounds=1, prompt="p")
        runner.tables[sid] = Run(st, SessionRef(sid, None))
    samples: list[tuple[int, float]] = []
    done = asyncio.Event()
    count = 0

    def on_event(ev: Any) -> None:
        nonlocal count
        runner.on_event(ev)
        count += 1
        if count % sample_every == 0:
            samples.append((count, rss_mb()))

    stream = v2.v2_event_stream(
        url, on_event, password="x", on_disconnect=lambda reason: done.set()
    )
    try:
        await wait_listening(port)
        rss0 = rss_mb()
        t0 = time.perf_counter()
        c0 = time.process_time()
        task = asyncio.create_task(stream.run())
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
        await runner.port.close()
    n = stream.events
    rate = n / elapsed
    warm = [m for k, m in samples if k >= 2 * sample_every] or [m for _, m in samples]
    growth = (warm[-1] - warm[0]) if warm else 0.0
    return {
        "fixture": fixture.name,
        "fixture_bytes": len(data),
        "fixture_events": per_loop,
        "roundtables_in_fixture": len(sessions),
        "events": n,
        "expected_events": per_loop * 16 * (repeat // 16 + 1) + 1,  # whole blocks, connected
        "bytes": stream.bytes,
        "replay_s": rnd(elapsed, 2),
        "events_per_s": round(rate),
        "client_cpu_s": rnd(cpu, 2),
        "events_per_cpu_s": round(n / cpu) if cpu else None,
        "rss_start_mb": rnd(rss0, 1),
        "rss_samples_mb": [[k, rnd(m, 1)] for k, m in samples],
        "rss_growth_after_warmup_mb": rnd(growth, 1),
        "rss_peak_mb": rnd(max([rss0, *(m for _, m in samples)]), 1),
        "target_events_per_s": 20_000,
        "met": rate >= 20_000 and growth <= 5.0 and n >= events,
    }
