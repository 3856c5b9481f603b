"""Regression "one hung seat among parallel tables": a seat whose model never answers delays
only its own roundtable.

Field failure: in one of five parallel roundtables dev's provider accepted the connection and
never sent headers. The other roundtables slowed down (shared worker / connection pool) and a
roundtable started meanwhile did not start at all.

Proves, on the real ``opencode serve`` with the scripted model (turn timeout 5 s, every normal
reply 1.5 s to its first byte): the 4 healthy roundtables each finish within 1.2 × the time the
same roundtable takes alone; the hung one skips dev in both rounds (cut off at the limit) and
concludes reporting both failures; a sixth roundtable started while dev hangs runs normally and
also finishes within 1.2 × the solo time.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Hang, Text
from roundtabled.offline.scripted_llm import default_text
from tests.e2e.edge_helpers import memory_state
from tests.fakes.daemon_proc import assert_each_turn_once

AGENTS = ["pm", "dev", "rv"]
ROUNDS = 2
DELAY = 1.5  # s to the first byte of every normal reply (model time dominates the daemon's)


async def timed(rt: Any, label: str, s1: str) -> tuple[str, float]:
    """Start one roundtable and wait for its result; returns (S2, seconds start→result)."""
    t0 = time.monotonic()
    s2 = await rt.start(
        agents=AGENTS,
        prompt=f"{label}: pick a queue",
        rounds=ROUNDS,
        parentSessionID=s1,
        turnTimeout=5,
    )
    await rt.result(s2, timeout=120)
    return s2, time.monotonic() - t0


@pytest.mark.timing
@pytest.mark.slow
async def test_one_hung_seat_delays_only_its_own_roundtable(rt_factory: Any) -> None:
    """Exact failing input: 5 parallel roundtables pm, dev, rv × 2 rounds, ``turnTimeout`` 5;
    in one of them dev's model never sends headers (``Hang``, both rounds); a sixth roundtable is
    started 2 s later."""
    rt = await rt_factory()
    for agent in [*AGENTS, OBSERVER_AGENT]:
        replies = [default_text(agent, "hung-seat", i) for i in range(40)]  # never a loop
        rt.llm.script(*[Text(text=t, first_byte_delay=DELAY) for t in replies], agent=agent)
    s1 = await rt.new_parent()
    solo_s2, solo = await timed(rt, "solo", s1)
    # The hung table: dev's requests in its session hang (session-scoped scripts win).
    hung_s2 = await rt.start(
        agents=AGENTS,
        prompt="hung: pick a queue",
        rounds=ROUNDS,
        parentSessionID=s1,
        turnTimeout=5,
    )
    rt.llm.script(Hang(max_seconds=120), Hang(max_seconds=120), session=hung_s2, agent="dev")
    healthy = [asyncio.create_task(timed(rt, f"healthy {i}", s1)) for i in range(4)]
    await asyncio.sleep(2.0)
    await rt.llm.wait_for_requests(1, within=30, session=hung_s2, agent="dev")
    sixth = asyncio.create_task(timed(rt, "sixth", s1))
    results = await asyncio.gather(*healthy, sixth)
    hung_result = await rt.result(hung_s2, timeout=120)
    limit = 1.2 * solo
    for s2, took in results:
        assert took <= limit, f"{s2} took {took:.2f} s, solo {solo:.2f} s (limit {limit:.2f})"
        assert_each_turn_once(
            await rt.messages(s2), s2, rt.daemon.signer, rt.llm, AGENTS, ROUNDS, label=s2
        )
    hung = memory_state(rt, hung_s2)
    assert [(e.agent, e.round, e.has_error) for e in hung.seat_turns()] == [
        (a, r, a == "dev") for r in range(1, ROUNDS + 1) for a in AGENTS
    ]
    assert all(e.cut_off for e in hung.seat_turns() if e.agent == "dev")
    dev_reqs = rt.llm.requests_for(session=hung_s2, agent="dev")
    assert len(dev_reqs) == ROUNDS and all(r.disconnected for r in dev_reqs)
    assert len(hung.errors) == 2, hung.errors
    assert hung_result["endReason"] == "completed"
    for r in (1, 2):
        assert f"dev (round {r})" in hung_result["text"] or f"── dev · round {r} · CUT OFF" in (
            rt.llm.requests_for(session=hung_s2, agent=OBSERVER_AGENT)[0].last_user_text
        )
    assert solo_s2 not in {s for s, _ in results}
