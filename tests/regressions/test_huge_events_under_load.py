"""Regression "huge events under load": an 8 MB event neither kills the stream nor stalls the
other roundtables.

Field failure: a seat streamed a very long reply; the server's final ``message.part.updated`` line
for it was ~8 MB. The daemon's stream reader (line-size limit, liveness measured per event)
declared the stream dead in the middle of that line and reconnected; the parse blocked the loop,
so every other roundtable's handoff stalled and events arrived seconds late.

Proves, on the real ``opencode serve`` with the scripted model: while pm streams 8 MB in 4 KB
deltas (ending in one ~8 MB ``message.part.updated`` line), 10 other roundtables run zero-latency
turns; the huge event is parsed and dispatched; the stream is never reconnected; every event
reaches the daemon less than 1 s after it reached an independent listener of the same server; and
the others' handoffs (next prompt sent after the wake, minus the time spent awaiting the server —
``Table.handoff_ms − Table.handoff_server_ms``) have p99 ≤ 20 ms.

The daemon-side time of a handoff is counted as the smaller of its wall-clock share and the event
loop's CPU time in that share (``Table.handoff_cpu_ms``). The stalls this regression is about
(the JSON parse, gzip and garbage collections on the loop) are the daemon's own CPU work and grow
both; a moment in which the operating system runs the server or the scripted model instead of the
daemon (CI's 2 cores, three busy processes) grows the wall-clock share only: CI failed once on a
32 ms wall-clock share that was such a moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import re
import time
from typing import Any, cast

import aiohttp

from roundtabled.core.events import Event
from roundtabled.offline.opencode_server import agent_prompts_of
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import ScriptedLLM
from tests.e2e.conftest import roundtable_config

from .conftest import ExternalLLM, external_llm

HUGE = 8 * 1024 * 1024
_ID = re.compile(rb'"id"\s*:\s*"(evt_[^"]+)"')


def frame_id(block: bytes) -> bytes | None:
    """The ``evt_…`` id of an SSE block (searched near both ends: no 8 MB JSON parse here)."""
    for part in (block[:4096], block[-4096:]):
        m = _ID.search(part)
        if m:
            return m.group(1)
    return None


async def listen(url: str, seen: dict[bytes, float], ready: asyncio.Event) -> None:
    """Record ``{event id: monotonic arrival}`` from ``/global/event``."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(url + "/global/event", timeout=aiohttp.ClientTimeout(total=None)) as resp,
    ):
        buf = bytearray()  # linear: the listener shares the daemon's event loop
        scanned = 0
        async for chunk in resp.content.iter_any():
            buf += chunk
            while True:
                end = buf.find(b"\n\n", max(0, scanned - 1))
                if end < 0:
                    scanned = len(buf)
                    break
                eid = frame_id(bytes(buf[: min(end, 4096)]) + bytes(buf[max(0, end - 4096) : end]))
                del buf[: end + 2]
                scanned = 0
                if eid is not None:
                    seen.setdefault(eid, time.monotonic())
                ready.set()


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def test_8_mb_event_while_10_roundtables_run(rt_factory: Any) -> None:
    """Exact failing input: pm's reply is ``Text("x" * 8 MiB, chunk_size=4096,
    first_byte_delay=1.0)`` (agents pm, dev × 1 round) while 10 roundtables pm, dev × 4 rounds
    run with default (zero-latency) replies. The scripted model runs in its own process: its
    8 MB stream must not share the daemon's event loop."""
    async with external_llm() as llm:
        cfg = roundtable_config(cast(ScriptedLLM, llm))
        rt = await rt_factory(cfg)
        await llm.agent_prompts(agent_prompts_of(cfg))
        await run_case(rt, llm)


async def run_case(rt: Any, llm: ExternalLLM) -> None:
    """The body of the case (see the test's docstring)."""
    stream = rt.daemon.stream
    daemon_seen: dict[bytes, float] = {}
    huge_dispatched: list[int] = []
    original = stream._on_event

    def record(ev: Event) -> None:
        if ev.id is not None:
            daemon_seen.setdefault(ev.id.encode(), time.monotonic())
        if ev.type == "message.part.updated":
            text = (ev.properties.get("part") or {}).get("text")
            if isinstance(text, str) and len(text) >= HUGE:
                huge_dispatched.append(len(text))
            elif not ev.properties and ev.session_id is not None:
                # The daemon's stream does not JSON-parse huge message.part.* payloads (their
                # body is never used: replies are read over REST); it dispatches type + session.
                huge_dispatched.append(stream.bytes)
        original(ev)

    stream._on_event = record
    # Diagnostics only: a full collection inside a handoff is daemon-side time (regression "full
    # collection never walks the start-up heap"); the failure message names the longest one.
    collections: list[float] = []
    gc_started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
        else:
            collections.append((time.perf_counter() - gc_started[0]) * 1000)

    gc.callbacks.append(on_gc)
    connects = stream.connects
    ours: dict[bytes, float] = {}
    ready = asyncio.Event()
    listener = asyncio.create_task(listen(rt.server.url, ours, ready))
    await asyncio.wait_for(ready.wait(), 10)
    await llm.script(Text(text="x" * HUGE, chunk_size=4096, first_byte_delay=1.0), agent="pm")
    try:
        s1 = await rt.new_parent()
        huge_s2 = await rt.start(agents=["pm", "dev"], prompt="Say a lot", parentSessionID=s1)
        others = await asyncio.gather(
            *(
                rt.start(agents=["pm", "dev"], prompt=f"Quick {i}", rounds=4, parentSessionID=s1)
                for i in range(10)
            )
        )
        for s2 in [huge_s2, *others]:
            await rt.result(s2, timeout=180)
        await asyncio.sleep(1.0)
    finally:
        gc.callbacks.remove(on_gc)
        stream._on_event = original
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
            await listener
    assert huge_dispatched, "the ~8 MB message.part.updated was never dispatched"
    assert stream.connects == connects, "the stream was reconnected (declared dead mid-event?)"
    lags = [daemon_seen[i] - t for i, t in ours.items() if i in daemon_seen]
    assert len(lags) > 100, len(lags)
    assert max(lags) < 1.0, f"event lag up to {max(lags):.3f} s"
    engine = rt.daemon.engine
    own: list[float] = []
    wall: list[float] = []
    raw: list[float] = []
    for s2 in others:
        table = engine.tables.get(s2) or engine.recent[s2]
        raw += table.handoff_ms
        walls = [h - s for h, s in zip(table.handoff_ms, table.handoff_server_ms, strict=True)]
        wall += walls
        own += [min(w, c) for w, c in zip(walls, table.handoff_cpu_ms, strict=True)]
    # 8 prompts per roundtable; a handoff counts only when the pass that a wake started sends
    # the next prompt (under load a pass may find the turn still winding down: 61 of 80 seen).
    assert len(own) >= 10 * 4, len(own)
    assert p99(own) <= 20.0, (
        f"daemon-side handoff p99 {p99(own):.1f} ms > 20 ms (wall-clock share p99 "
        f"{p99(wall):.1f} ms, raw p99 {p99(raw):.1f} ms) "
        f"with an 8 MB event in flight; {len(collections)} garbage collections, the longest "
        f"{max(collections, default=0.0):.1f} ms"
    )
