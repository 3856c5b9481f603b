"""roundtabled benchmarks on the real ``opencode serve`` and the scripted LLM.

Usage (from the repository root)::

    .venv/bin/python -m bench.run all          # every figure (what `make bench` runs)
    .venv/bin/python -m bench.run debate       # figures 1-3 (overhead, handoff, bytes)
    .venv/bin/python -m bench.run ingest       # figure 4 (event ingestion)
    .venv/bin/python -m bench.run memory       # figure 5 (RSS at 100 roundtables)
    .venv/bin/python -m bench.run recovery     # figure 6 (start-up recovery)
    .venv/bin/python -m bench.run deliberation # figures 7a-7e (stopping, budget, opening, context)
    .venv/bin/python -m bench.run debate --opencode 2    # figures 1-3 on OpenCode 2.x (overhead_v2)
    .venv/bin/python -m bench.run ingest --opencode 2    # figure 4 on OpenCode 2.x (ingest_v2)
    .venv/bin/python -m bench.run memory --opencode 2    # figure 5 on OpenCode 2.x
    .venv/bin/python -m bench.run recovery --opencode 2  # figure 6 on OpenCode 2.x (recovery_v2)

Prints one JSON document to stdout and writes it to ``bench/results/latest.json`` (``--out``).
Each figure says its target and whether it was met (``met``). Times in seconds (``_s``) or
milliseconds (``_ms``), sizes in bytes or MB (``_mb``, MiB).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import platform
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from roundtabled import __version__
from roundtabled.opencode.binary import OPENCODE2_VERSION, OPENCODE_VERSION

from . import (
    debate,
    deliberation,
    ingest,
    ingest_v2,
    memory,
    overhead_v2,
    recovery,
    recovery_v2,
)
from .env import Env

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "debate-events.sse"
FIXTURE_V2 = HERE / "fixtures" / "debate-events-v2.sse"
RESULTS = HERE / "results" / "latest.json"
FIGURES = ("debate", "ingest", "memory", "recovery", "deliberation")
ON_2X = ("debate", "ingest", "memory", "recovery")
"""The figures measured on OpenCode 2.x too (``--opencode 2``; `all` is 1.x's)."""


@contextlib.asynccontextmanager
async def daemon_env(root: Path) -> AsyncIterator[Env]:
    """An :class:`Env` under ``root`` with its server (the roundtable plugin installed) and the
    daemon running and the plugin reported to it; closed on the way out, also on an error."""
    env = Env(root)
    try:
        await env.start(plugin=True)
        await env.launch_daemon()
        await env.plugin_reported()
        yield env
    finally:
        await env.close()


async def fig_debate(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    if args.opencode == 2:
        return await overhead_v2.run(
            tmp / "debate-v2",
            pairs=args.pairs,
            concurrent=args.concurrent,
            concurrent_rounds=args.concurrent_rounds,
        )
    async with daemon_env(tmp / "debate") as env:
        out = await debate.run(
            env,
            pairs=args.pairs,
            concurrent=args.concurrent,
            concurrent_rounds=args.concurrent_rounds,
        )
    events: bytes = out.pop("_events")
    if args.record_fixture or not FIXTURE.exists():
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        FIXTURE.write_bytes(events)
    return out


async def fig_ingest(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    if args.opencode == 2:
        if args.record_fixture or not FIXTURE_V2.exists():
            FIXTURE_V2.parent.mkdir(parents=True, exist_ok=True)
            FIXTURE_V2.write_bytes(await ingest_v2.record(tmp / "record-v2"))
        return await ingest_v2.run(FIXTURE_V2, events=args.events)
    if not FIXTURE.exists():
        raise SystemExit(f"{FIXTURE} is missing: run `python -m bench.run debate` first")
    return await ingest.run(FIXTURE, events=args.events)


async def fig_memory(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    return await memory.run(tmp / "memory", tables=args.tables, major=args.opencode)


async def fig_recovery(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    if args.opencode == 2:
        return await recovery_v2.run(
            tmp / "recovery-v2", sessions=args.sessions, roundtables=args.roundtables
        )
    return await recovery.run(
        tmp / "recovery", sessions=args.sessions, roundtables=args.roundtables
    )


async def fig_deliberation(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    async with daemon_env(tmp / "deliberation") as env:
        return await deliberation.run(env)


RUNNERS = {
    "debate": fig_debate,
    "ingest": fig_ingest,
    "memory": fig_memory,
    "recovery": fig_recovery,
    "deliberation": fig_deliberation,
}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    names = FIGURES if args.figure == "all" else (args.figure,)
    report: dict[str, Any] = {
        "roundtabled": __version__,
        "opencode": OPENCODE_VERSION if args.opencode == 1 else OPENCODE2_VERSION,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "command": "python -m bench.run " + " ".join(sys.argv[1:]),
        "figures": {},
    }
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rt-bench-") as d:
        for name in names:
            t = time.perf_counter()
            print(f"bench: {name} …", file=sys.stderr, flush=True)
            result = await RUNNERS[name](args, Path(d))
            result["elapsed_s"] = round(time.perf_counter() - t, 1)
            report["figures"][name] = result
            print(f"bench: {name} done in {result['elapsed_s']} s", file=sys.stderr, flush=True)
    report["elapsed_s"] = round(time.perf_counter() - t0, 1)
    report["loadavg_end"] = os.getloadavg()
    return report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    p.add_argument("figure", choices=["all", *FIGURES])
    p.add_argument("--out", type=Path, default=RESULTS, help="JSON output file")
    p.add_argument(
        "--opencode",
        type=int,
        choices=[1, 2],
        default=1,
        help="the OpenCode major to measure on (2: `debate` (figures 1-3), `recovery`; default 1)",
    )
    p.add_argument("--pairs", type=int, default=9, help="figure 1: interleaved pairs (≥ 5)")
    p.add_argument("--concurrent", type=int, default=20, help="figure 2: concurrent roundtables")
    p.add_argument("--concurrent-rounds", type=int, default=3, help="figure 2: rounds of each")
    p.add_argument("--record-fixture", action="store_true", help="figure 4: re-record")
    p.add_argument("--events", type=int, default=1_000_000, help="figure 4: events replayed")
    p.add_argument("--tables", type=int, default=100, help="figure 5: concurrent roundtables")
    p.add_argument("--sessions", type=int, default=1000, help="figure 6: sessions on the server")
    p.add_argument("--roundtables", type=int, default=50, help="figure 6: of which roundtables")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.opencode == 2 and args.figure not in ON_2X:
        print(
            f"Error: --opencode: 2 measures {', '.join(ON_2X)}, not {args.figure!r} "
            "(bench/README.md says why)",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    report = asyncio.run(main_async(args))
    data = orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    sys.stdout.write(data.decode() + "\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data + b"\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
