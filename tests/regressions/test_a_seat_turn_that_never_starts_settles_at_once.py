"""A seat's turn that never starts: the server accepts the prompt but never runs it.

Field failure: a seat agent configured with a model its providers do not have. The server answers
the prompt with 204, goes busy, emits ``session.error`` ("Model not found: …"), goes idle and emits
a second ``session.error``; no assistant message is stored and no model request is made (server
behaviour pinned in docs/opencode-server.md, "a prompt whose model does not exist"). The daemon
waited out the turn timeout, or settled the turn with a generic text that hid the server's reason.

Proves, on the real ``opencode serve`` with the scripted model: the turn is settled as failed
within 5 s of the server's first error (the fault: the turn timeout), with the server's message
in the seat's notes, exactly once although the error comes twice; the next seat runs on its own
model (never the missing one the failed prompt left sticky); a debate in which that seat fails
every round concludes, and the result says so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from roundtabled.core.state import OBSERVER_AGENT, EndReason
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import ScriptedLLM
from tests.e2e.conftest import RT, SEAT_MODELS, roundtable_config
from tests.e2e.edge_helpers import EventLog, memory_state

AGENTS = ["pm", "dev", "rv"]
ROUNDS = 2
MISSING = "scripted/no-such-model"


@pytest.mark.timing
async def test_a_seat_on_a_missing_model_fails_fast_every_round_and_the_debate_concludes(
    rt_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """Exact failing input: pm, dev, rv × 2 rounds, turn timeout 300 s; dev's configured model
    is ``scripted/no-such-model`` (absent from provider ``scripted``); pm and rv on
    debater-1/debater-3."""
    cfg = roundtable_config(scripted_llm, extra_agents={"dev": {"model": MISSING}})
    rt: RT = await rt_factory(cfg)
    for agent in ("pm", "rv"):
        rt.llm.script(
            *[Text(text=f"{agent.upper()} round {r + 1}: a view.") for r in range(ROUNDS)],
            agent=agent,
        )
    rt.llm.script(Text(text="SUMMARY: dev never spoke."), agent=OBSERVER_AGENT)
    async with EventLog(rt) as events:
        s2 = await rt.start(agents=AGENTS, prompt="Missing model", rounds=ROUNDS, turnTimeout=300)
        result = await rt.result(s2, timeout=60)
    errors = [
        (t, p["properties"])
        for t, p in events.of_type("session.error")
        if (p.get("properties") or {}).get("sessionID") == s2
    ]
    # The server really failed dev's turn twice per round (the fault is present).
    assert len(errors) >= 2 * ROUNDS, errors
    assert all("Model not found" in str(e) or "ModelNotFound" in str(e) for _, e in errors)

    # No model request for dev; pm and rv on their own models in every round.
    reqs = rt.llm.requests_for(session=s2, kind="turn")
    assert [r.agent for r in reqs] == ["pm", "rv"] * ROUNDS + [OBSERVER_AGENT], reqs
    for r in reqs:
        if r.agent in SEAT_MODELS:
            assert r.model == SEAT_MODELS[r.agent], (r.agent, r.model)

    # Settled within 5 s of the server's first error of each of dev's turns (the fault: the turn
    # timeout): rv's request.
    rv_reqs = [r for r in reqs if r.agent == "rv"]
    since = 0.0
    for rv in rv_reqs:
        first = min(t for t, _ in errors if since < t < rv.t_mono)
        assert rv.t_mono - first <= 5.0, f"rv asked {rv.t_mono - first:.2f} s after the error"
        since = rv.t_mono

    state = memory_state(rt, s2)
    dev_turns = [e for e in state.seat_turns() if e.agent == "dev"]
    assert len(dev_turns) == ROUNDS, dev_turns
    for e in dev_turns:
        assert e.has_error and "Model not found" in (e.error or ""), e
    dev_errors = [x for x in state.errors if x.startswith("dev")]
    assert len(dev_errors) == ROUNDS, state.errors  # once per round, not once per session.error
    assert all("Model not found" in x for x in dev_errors), dev_errors

    assert result["endReason"] == EndReason.COMPLETED, result
    assert "SUMMARY: dev never spoke." in result["summary"]
    # ... and says so: the roundtable's status names dev's failure in each round.
    code, status = await rt.api("GET", f"/v1/roundtables/{s2}")
    assert code == 200, status
    said = [e for e in status["errors"] if e.startswith("dev") and "Model not found" in e]
    assert len(said) == ROUNDS, json.dumps(status)[:3000]
