"""Figure 5: RSS of the daemon with N concurrent roundtables in flight.

The daemon runs as its own process (``python -m roundtabled serve``) so its RSS is its own. The
scripted model is slowed for the first seat (``pm``: first byte after ``slow_s`` seconds) so that
every roundtable is in flight at the same time; the other turns answer instantly. RSS is read from
``/proc/<pid>/status`` every 0.25 s.

Reported: RSS after warm-up with no roundtable (``baseline``), the peak while all N are active, and
the increment per roundtable ``(peak - baseline) / N`` (MB).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import default_text

from .env import TOPIC, Env, rss_mb
from .stats import rnd


async def run(root: Path, *, tables: int, slow_s: float = 12.0, major: int = 1) -> dict[str, Any]:
    """Figure 5 at ``tables`` roundtables on an OpenCode ``major`` server (2: the 2.x shell;
    each roundtable under the one parent session, as on 1.x)."""
    env = Env(root, major=major)
    try:
        await env.start()
        pid = await env.spawn_daemon()
        parent = await env.new_parent()
        # Warm-up: a few roundtables so lazy imports, caches and pools exist before the baseline.
        # 2.x runs a roundtable only under a parent session (the 2.x shell's refusal)
        under = {"parentSessionID": parent} if major == 2 else {}
        for _ in range(3):
            s2 = await env.start_rt(agents=["pm", "dev"], rounds=1, prompt=TOPIC, **under)
            await env.result(s2)
        await asyncio.sleep(1.0)
        baseline = rss_mb(pid)
        await env.llm.script(
            *(
                Text(text=default_text("pm", "mem", i), first_byte_delay=slow_s)
                for i in range(tables)
            ),
            agent="pm",
        )
        peak = baseline
        active_peak = 0
        samples: list[tuple[float, int, float]] = []
        stop = asyncio.Event()
        t0 = time.perf_counter()

        async def sampler() -> None:
            nonlocal peak, active_peak
            while not stop.is_set():
                _, health = await env.api("GET", "/v1/health")
                active = int(health.get("active", 0)) if isinstance(health, dict) else 0
                m = rss_mb(pid)
                samples.append((time.perf_counter() - t0, active, m))
                if active >= active_peak:
                    active_peak = active
                if m > peak:
                    peak = m
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.25)

        stask = asyncio.create_task(sampler())
        sem = asyncio.Semaphore(20)

        async def one(i: int) -> str:
            async with sem:
                return await env.start_rt(
                    agents=["pm", "dev"], rounds=1, prompt=f"{TOPIC} (#{i})", parentSessionID=parent
                )

        started = await asyncio.gather(*(one(i) for i in range(tables)))
        start_s = time.perf_counter() - t0
        await asyncio.gather(*(env.result(s, timeout=600) for s in started))
        stop.set()
        await stask
        after = rss_mb(pid)
        at_full = [m for _, a, m in samples if a >= tables]
        rss_full = max(at_full) if at_full else peak
        return {
            "opencode": env.srv.version,
            "roundtables": tables,
            "slow_first_turn_s": slow_s,
            "start_all_s": rnd(start_s, 2),
            "max_active_seen": active_peak,
            "rss_baseline_mb": rnd(baseline, 1),
            "rss_all_active_mb": rnd(rss_full, 1),
            "rss_peak_mb": rnd(peak, 1),
            "rss_after_mb": rnd(after, 1),
            "per_roundtable_mb": rnd((rss_full - baseline) / tables, 3),
            "target_mb": 150,
            "met": peak <= 150 and active_peak >= tables,
        }
    finally:
        await env.close()
