"""What a start sends before turn 1 (figure 1's ``lead``, bench/README.md "Plugin mode").

Usage (from the repository root)::

    .venv/bin/python -m bench.lead [--runs N] [--out FILE]

On the real, pinned ``opencode serve`` with the plugin and the scripted model answering at once:
``--runs`` one-round debates of figure 1's seats in one directory, started as figure 1 starts
them (the control API, ``parentSessionID`` and ``directory`` given). Each of the daemon's
server calls before the first model request is timed by wrapping the client's methods in this
process (instrumentation of the benchmark only). Prints one JSON document (times in ms from the
start request): per call, the median start and end over the runs after the first (the first
start in a directory reads the directory: ``first_run`` has its own), the start request's
answer and the first model request.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import debate
from bench.env import TOPIC, Env, emit_json
from roundtabled.opencode.client import OpenCodeClient

CALLS = (
    "get_session",
    "agents",
    "config",
    "providers",
    "create_session",
    "post_no_reply",
    "prompt_async",
    "toast",
)
"""The client methods a start may call before turn 1's model request."""


def instrument(log: list[tuple[str, float, float]]) -> None:
    """Wrap each of :data:`CALLS` to append ``(name, start, end)`` (``time.monotonic()`` s)."""
    for name in CALLS:
        real: Callable[..., Awaitable[Any]] = getattr(OpenCodeClient, name)

        def wrapped(
            self: OpenCodeClient, *a: Any, _real: Any = real, _name: str = name, **k: Any
        ) -> Awaitable[Any]:
            async def run() -> Any:
                t = time.monotonic()
                try:
                    return await _real(self, *a, **k)
                finally:
                    log.append((_name, t, time.monotonic()))

            return run()

        setattr(OpenCodeClient, name, wrapped)


async def measure(runs: int) -> dict[str, Any]:
    log: list[tuple[str, float, float]] = []
    instrument(log)
    env = Env(Path(tempfile.mkdtemp(prefix="rt-bench-lead-")))
    rows: list[dict[str, Any]] = []
    try:
        await env.start(plugin=True)
        await env.launch_daemon()
        await env.plugin_reported()
        parent = await env.new_parent()
        for _ in range(runs):
            log.clear()
            await env.llm.reset()
            t0 = time.monotonic()
            s2 = await env.start_rt(
                agents=debate.AGENTS, rounds=1, prompt=TOPIC, parentSessionID=parent
            )
            answered = time.monotonic()
            await env.result(s2)
            first = (await env.llm.requests_for(s2))[0].t_mono
            calls: dict[str, tuple[float, float]] = {}
            for name, a, b in log:
                if a < first and name not in calls:
                    calls[name] = ((a - t0) * 1000, (b - t0) * 1000)
            rows.append(
                {
                    "calls": calls,
                    "answered_ms": (answered - t0) * 1000,
                    "first_request_ms": (first - t0) * 1000,
                }
            )
            await debate.settle(env, s2)
    finally:
        await env.close()

    def med(values: list[float]) -> float:
        return round(statistics.median(values), 2)

    later = rows[1:]
    names = [n for n in CALLS if any(n in r["calls"] for r in later)]
    return {
        "runs": runs,
        "first_run": rows[0],
        "median_after_first": {
            "calls": {
                n: {
                    "start_ms": med([r["calls"][n][0] for r in later if n in r["calls"]]),
                    "end_ms": med([r["calls"][n][1] for r in later if n in r["calls"]]),
                    "runs_with_it": sum(1 for r in later if n in r["calls"]),
                }
                for n in names
            },
            "answered_ms": med([r["answered_ms"] for r in later]),
            "first_request_ms": med([r["first_request_ms"] for r in later]),
        },
    }


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.lead")
    p.add_argument("--runs", type=int, default=11)
    p.add_argument("--out")
    a = p.parse_args()
    if a.runs < 2:
        p.error("--runs must be at least 2 (the first start in a directory reads it)")
    emit_json(asyncio.run(measure(a.runs)), a.out)


if __name__ == "__main__":
    main()
