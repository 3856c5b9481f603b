"""Regression "compaction inside the debate": OpenCode's auto-compaction mid-debate is
nobody's seat turn.

Field failure: a seat's reply reported usage near the model's context limit; the server then ran a
compaction request, added a synthetic "Continue if you have next steps…" user message and a
further reply. The daemon took the compaction (or the synthetic continuation) for the next seat's
turn: the next seat was skipped or prompted twice, and after the compaction the models no longer
saw the topic, the round or who had said what.

Proves, on the real ``opencode serve`` with the scripted model (context limit 4,000 tokens, auto
compaction on, 3,900 tokens reported by pm's round-2 reply; 3 seats × 4 rounds): the compaction
happens, the history holds exactly the 12 seat turns (+ the observer) in order, dev is prompted
exactly once in round 2, every later turn request still carries the topic, its round and the
attribution of what was said since, and the result in S1 covers all 4 rounds.
"""

from __future__ import annotations

from typing import Any

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from tests.e2e.conftest import roundtable_config
from tests.e2e.edge_helpers import memory_state
from tests.fakes.daemon_proc import text_of, turn_markers

AGENTS = ["pm", "dev", "rv"]
ROUNDS = 4
TOPIC = "Should the payments team adopt event sourcing?"


async def test_auto_compaction_mid_debate_is_nobodys_turn(
    rt_factory: Any, scripted_llm: Any
) -> None:
    """Exact failing input: ``offline_config(..., context_limit=4000, auto_compaction=True)``;
    agents pm, dev, rv × 4 rounds; pm's round-2 reply is ``Text(..., prompt_tokens=3900)``."""
    rt = await rt_factory(roundtable_config(scripted_llm, context_limit=4000, auto_compaction=True))
    rt.llm.script(
        Text(text="PM r1: events give us an audit log for free."),
        Text(text="PM r2: but the context is getting long.", prompt_tokens=3900),
        agent="pm",
    )
    rt.llm.script(
        Text(text="COMPACTED: pm, dev and rv argued about event sourcing."), agent="compaction"
    )
    s1 = await rt.new_parent()
    s2 = await rt.start(agents=AGENTS, prompt=TOPIC, rounds=ROUNDS, parentSessionID=s1)
    result = await rt.result(s2, timeout=150)
    # Nothing left that could prompt again (finalized, the worker retired, S2 idle).
    await rt.settled(s2)
    assert rt.llm.requests_for(session=s2, kind="compaction"), "no compaction happened"
    # Seat turns: exactly one per (round, seat), in order; the compaction is nobody's turn.
    state = memory_state(rt, s2)
    assert [(e.agent, e.round) for e in state.seat_turns()] == [
        (a, r) for r in range(1, ROUNDS + 1) for a in AGENTS
    ]
    assert not any(e.has_error for e in state.seat_turns())
    assert [e.kind for e in state.history if e.kind == "observer"] == ["observer"]
    turns, observers = turn_markers(await rt.messages(s2), s2, rt.daemon.signer)
    assert turns == [(r, s) for r in range(ROUNDS) for s in range(len(AGENTS))]
    assert observers == 1
    # dev is prompted exactly once in round 2 (its marker is unique, and one model request).
    prompted = [r for r in rt.llm.requests_for(session=s2, kind="turn") if r.agent != "compaction"]
    dev_r2 = [r for r in prompted if r.agent == "dev" and "Round 2/4" in r.last_user_text]
    assert len(dev_r2) == 1, [r.last_user_text[:120] for r in dev_r2]
    # Later requests (round 3 on) still carry topic, round and attribution.
    seat_reqs = [
        r for r in prompted if r.agent in AGENTS and "| Current agent:" in r.last_user_text
    ]
    assert len(seat_reqs) == len(AGENTS) * ROUNDS, [r.agent for r in prompted]
    for req in seat_reqs[6:]:
        text = req.last_user_text
        assert TOPIC in text, text[:300]
        assert f"| Current agent: {req.agent}" in text
        assert "Since your last turn:" in text and "(round " in text, text
    rounds_seen = [int(r.last_user_text.split("Round ")[1].split("/")[0]) for r in seat_reqs]
    assert rounds_seen == [r for r in range(1, ROUNDS + 1) for _ in AGENTS]
    # The result covers all 4 rounds.
    obs = rt.llm.requests_for(session=s2, agent=OBSERVER_AGENT)
    assert len(obs) == 1
    for r in range(1, ROUNDS + 1):
        for a in AGENTS:
            assert f"── {a} · round {r} ──" in obs[0].last_user_text, (a, r)
    assert result["endReason"] == "completed"
    s1_msgs = await rt.messages(s1)
    assert len(s1_msgs) == 1 and result["summary"] in text_of(s1_msgs[0])
