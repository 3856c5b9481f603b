"""The others' handoffs while one seat streams an 8 MB reply (moved here from the regression
``tests/regressions/test_huge_events_under_load.py``, which keeps the behaviour: the huge event
is dispatched, the stream is never reconnected, events are not seconds late).

Usage (from the repository root)::

    .venv/bin/python -m bench.huge_events [--others N] [--out FILE]

On the real, pinned ``opencode serve`` with the scripted model in its own process: pm's reply is
``Text("x" * 8 MiB, chunk_size=4096, first_byte_delay=1.0)`` (pm, dev × 1 round) while
``--others`` roundtables pm, dev × 4 rounds run with instant replies. Reported (ms, p50 / p99 /
max over the others' handoffs): ``daemon`` = the smaller of a handoff's wall-clock share outside
the server (``Table.handoff_ms − Table.handoff_server_ms``) and the event loop's CPU time in that
share (``Table.handoff_cpu_ms``); ``wall`` and ``raw`` for comparison; the garbage collections
seen. Target: daemon-side p99 ≤ 20 ms (``met``). On a loaded machine the wall-clock share grows
with the time the operating system gives the other processes; the CPU-bounded figure does not.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.env import Env, emit_json
from roundtabled.offline.scripted_actions import Text

HUGE = 8 * 1024 * 1024
TARGET_P99_MS = 20.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 2) if values else 0.0,
        "p99": round(pct(values, 0.99), 2),
        "max": round(max(values, default=0.0), 2),
    }


async def main(others: int) -> dict[str, Any]:
    """One run of the case; the figures as a JSON-ready dict."""
    collections: list[float] = []
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            collections.append((time.perf_counter() - started[0]) * 1000)

    with tempfile.TemporaryDirectory(prefix="rt-huge-") as tmp:
        env = Env(Path(tmp) / "huge")
        await env.start()
        await env.launch_daemon()
        assert env.daemon is not None
        gc.callbacks.append(on_gc)
        try:
            await env.llm.script(
                Text(text="x" * HUGE, chunk_size=4096, first_byte_delay=1.0), agent="pm"
            )
            s1 = await env.new_parent()
            huge = await env.start_rt(agents=["pm", "dev"], prompt="Say a lot", parentSessionID=s1)
            quick = await asyncio.gather(
                *(
                    env.start_rt(
                        agents=["pm", "dev"], prompt=f"Quick {i}", rounds=4, parentSessionID=s1
                    )
                    for i in range(others)
                )
            )
            for s2 in [huge, *quick]:
                await env.result(s2, timeout=300)
            engine = env.daemon.engine
            own: list[float] = []
            wall: list[float] = []
            raw: list[float] = []
            for s2 in quick:
                table = engine.tables.get(s2) or engine.recent[s2]
                raw += table.handoff_ms
                walls = [
                    h - s for h, s in zip(table.handoff_ms, table.handoff_server_ms, strict=True)
                ]
                wall += walls
                own += [min(w, c) for w, c in zip(walls, table.handoff_cpu_ms, strict=True)]
        finally:
            gc.callbacks.remove(on_gc)
            await env.close()
    daemon = summary(own)
    return {
        "handoffs": len(own),
        "daemon_ms": daemon,
        "wall_ms": summary(wall),
        "raw_ms": summary(raw),
        "gc": {"count": len(collections), "longest_ms": round(max(collections, default=0.0), 2)},
        "target_p99_ms": TARGET_P99_MS,
        "met": daemon["p99"] <= TARGET_P99_MS,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.huge_events")
    parser.add_argument("--others", type=int, default=10, help="roundtables beside the huge one")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    emit_json(asyncio.run(main(args.others)), args.out)
