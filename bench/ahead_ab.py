"""Figure 1 with and without the handoff's decision taken ahead of the idle, alternating runs.

Usage (from the repository root)::

    .venv/bin/python -m bench.ahead_ab [--runs 4] [--pairs 7]

Each run is one child process of ``python -m bench.ahead_ab --arm on|off`` (its own server, scripted
model and in-process daemon, as ``bench.run debate``): ``off`` replaces
:meth:`roundtabled.engine.handoff.Handoff.decide_ahead` with a no-op (instrumentation of this
benchmark only), so the idle decides every handoff as before. Prints one JSON document: per run
the arm, figure 1's median ratio, both medians (s) and the daemon − floor difference of each
cause (ms, ``breakdown_ms`` of ``bench/debate.py``). Figures in ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


async def one_arm(arm: str, pairs: int) -> dict[str, Any]:
    """Figure 1 of ``pairs`` pairs with the decision ahead ``on`` or ``off``."""
    from roundtabled.engine import handoff

    if arm == "off":

        def no_ahead(self: handoff.Handoff, table: Any, event: Any) -> None:
            return None

        handoff.Handoff.decide_ahead = no_ahead  # type: ignore[method-assign]
    from bench import debate
    from bench.run import daemon_env

    with tempfile.TemporaryDirectory() as tmp:
        async with daemon_env(Path(tmp) / "debate") as env:
            out = await debate.run(env, pairs=pairs, concurrent=2, concurrent_rounds=1)
    ov = out["overhead"]
    d, f = ov["breakdown_ms"]["daemon"], ov["breakdown_ms"]["floor"]
    return {
        "arm": arm,
        "median_ratio": ov["median_ratio"],
        "daemon_median_s": ov["daemon_median_s"],
        "floor_median_s": ov["floor_median_s"],
        "daemon_minus_floor_ms": {k: round(d[k] - f[k], 1) for k in d},
        "ahead_decisions": out["handoff"]["one"].get("ahead_decisions"),
    }


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.ahead_ab")
    p.add_argument("--arm", choices=["on", "off"], help="run one arm in this process")
    p.add_argument("--runs", type=int, default=4, help="runs, alternating off / on")
    p.add_argument("--pairs", type=int, default=7, help="figure 1 pairs per run")
    a = p.parse_args()
    if a.arm:
        print(json.dumps(asyncio.run(one_arm(a.arm, a.pairs))))
        return
    runs = []
    for i in range(a.runs):
        arm = "off" if i % 2 == 0 else "on"
        cmd = [sys.executable, "-m", "bench.ahead_ab", "--arm", arm, "--pairs", str(a.pairs)]
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    print(json.dumps({"runs": runs}, indent=1))


if __name__ == "__main__":
    main()
