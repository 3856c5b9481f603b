"""Regression "several done signals per turn": duplicated idle/status events around a turn
timeout never record a turn twice, never prompt a seat twice, never deliver twice.

Field failure: a turn hit the time limit; the abort made the server send ``session.idle`` twice,
and a flaky relay duplicated every idle/status event. Each copy was taken as "the turn is done":
dev's timed-out turn was recorded twice, rv was prompted twice for round 1, and the end of the
debate produced two delimiters and two results in S1.

Proves, on the real ``opencode serve`` with the scripted model behind a proxy that duplicates
every ``session.idle`` and ``session.status`` event after a random 0–50 ms delay: dev's round-1
turn is recorded once, as timed out, its partial text kept and marked cut off; rv is prompted
exactly once for round 1; 6 seat + 1 observer model requests; one delimiter in S2; one result in
S1.
"""

from __future__ import annotations

from typing import Any

from roundtabled.core.state import DELIMITER_TEXT, OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from tests.e2e.edge_helpers import memory_state
from tests.fakes.daemon_proc import assert_each_turn_once, text_of

from .conftest import proxied_rt

AGENTS = ["pm", "dev", "rv"]
ROUNDS = 2
TOKENS = "".join(f"t{i:02d} " for i in range(30))  # 30 tokens of 4 characters


async def test_duplicated_done_signals_record_a_timed_out_turn_once(rt_factory: Any) -> None:
    """Exact failing input: ``turnTimeout`` 2 s; 3 seats × 2 rounds; in round 1 dev streams one
    token per second for 30 s (``Text(TOKENS, chunk_size=4, chunk_delay=1.0)``); the proxy
    forwards every ``session.idle`` / ``session.status`` event twice, 0–50 ms apart."""
    rt, proxy = await proxied_rt(rt_factory)
    await rt.warm_up()  # every turn has 2 s: the server's first turn must not be pm's
    proxy.jitter_duplicates = 0.05
    rt.llm.script(Text(text=TOKENS, chunk_size=4, chunk_delay=1.0), agent="dev")
    rt.llm.script(Text(text="SUMMARY: dev was cut off once."), agent=OBSERVER_AGENT)
    try:
        s1 = await rt.new_parent()
        s2 = await rt.start(
            agents=AGENTS,
            prompt="Duplicate done signals: pick a queue",
            rounds=ROUNDS,
            parentSessionID=s1,
            turnTimeout=2,
        )
        result = await rt.result(s2, timeout=120)
        await rt.finalized(s2)
        # Late duplicates can act only on a worker: checked once the daemon holds none for S2
        # and has dispatched an idle of S2 sent after them.
        await rt.drained_after(s2, lambda: rt.oc("POST", f"/session/{s2}/abort"))
    finally:
        await proxy.stop()
    assert proxy.forwarded.count("session.idle") >= 2 * (len(AGENTS) * ROUNDS)
    assert "SUMMARY: dev was cut off once." in result["summary"]
    msgs = await rt.messages(s2)
    assert_each_turn_once(msgs, s2, rt.daemon.signer, rt.llm, AGENTS, ROUNDS, label="dup")
    reqs = rt.llm.requests_for(session=s2, kind="turn")
    assert [r.agent for r in reqs] == AGENTS * ROUNDS + [OBSERVER_AGENT]
    assert reqs[1].disconnected, "dev's round-1 request was not aborted"
    state = memory_state(rt, s2)
    turns = state.seat_turns()
    assert [(e.agent, e.round) for e in turns] == [
        (a, r + 1) for r in range(ROUNDS) for a in AGENTS
    ]
    dev1 = turns[1]
    assert dev1.cut_off and dev1.has_error and "timed out after 2 s" in (dev1.error or "")
    assert dev1.response.strip() and TOKENS.startswith(dev1.response.strip()[:8]), dev1.response
    assert len(dev1.response.strip()) < len(TOKENS.strip())
    assert sum(1 for e in state.history if e.agent == "dev" and e.round == 1) == 1
    assert not any(e.has_error for i, e in enumerate(turns) if i != 1)
    # rv's round-1 prompt tells it dev was cut off, and it is the only rv prompt of round 1.
    assert "dev (round 1) was cut off at the time limit" in reqs[2].last_user_text
    delimiters = [m for m in msgs if DELIMITER_TEXT in text_of(m, ignored=True)]
    assert len(delimiters) == 1, len(delimiters)
    s1_msgs = await rt.messages(s1)
    assert len(s1_msgs) == 1, [text_of(m) for m in s1_msgs]
    assert result["summary"] in text_of(s1_msgs[0])
