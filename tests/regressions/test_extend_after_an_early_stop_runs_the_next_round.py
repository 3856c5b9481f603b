"""Regression: ``extend`` after an early stop skipped rounds without saying so.

Field failure: a debate of 2 rounds ended ``all-failed`` after round 1 (every seat failed);
extended with 1 more round it ran "round 3" (``Status: all-failed, 1/3 rounds``, ``failed in
rounds 1, 3``): round 2 never ran and was never mentioned. Only a converged or budget stop
continued right after its last played round.

Proves, on the real ``opencode serve`` with the scripted model: the extension of that debate is
round 2 (the prompts say ``Round 2/2``, the seat turns are rounds 1 and 2, 2 rounds planned).
"""

from __future__ import annotations

from roundtabled.core.state import OBSERVER_AGENT, EndReason
from roundtabled.offline.scripted_actions import HttpError, Text
from tests.e2e.conftest import RT
from tests.e2e.edge_helpers import memory_state


async def test_extend_after_an_all_failed_stop_runs_round_2_not_round_3(rt: RT) -> None:
    """Exact failing input: agents pm, dev × 2 rounds; both fail in round 1 (all-failed);
    extend with 1 more round."""
    rt.llm.script(
        HttpError(status=400, message="pm down"), Text(text="PM round two: keep it."), agent="pm"
    )
    rt.llm.script(
        HttpError(status=400, message="dev down"), Text(text="DEV round two: keep it."), agent="dev"
    )
    rt.llm.script(Text(text="SUMMARY one."), Text(text="SUMMARY two."), agent=OBSERVER_AGENT)
    s1 = await rt.new_parent()
    s2 = await rt.start(agents=["pm", "dev"], prompt="Rewrite?", rounds=2, parentSessionID=s1)
    first = await rt.result(s2)
    assert first["endReason"] == EndReason.ALL_FAILED.value
    await rt.finalized(s2)
    n_before = len(rt.llm.requests_for(session=s2, kind="turn"))
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {"sessionID": s2, "directory": rt.directory, "prompt": "Try again", "rounds": 1},
    )
    assert status == 200, data
    await rt.result(s2)
    await rt.finalized(s2)
    reqs = [
        r
        for r in rt.llm.requests_for(session=s2, kind="turn")[n_before:]
        if r.agent in ("pm", "dev")
    ]
    assert [r.agent for r in reqs] == ["pm", "dev"]
    for req in reqs:
        assert "Round 2/2" in req.last_user_text, req.last_user_text[-400:]
    state = memory_state(rt, s2)
    assert [(e.agent, e.round) for e in state.seat_turns()] == [
        ("pm", 1),
        ("dev", 1),
        ("pm", 2),
        ("dev", 2),
    ]
    assert state.total_rounds == 2
