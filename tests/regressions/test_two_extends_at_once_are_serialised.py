"""Regression: two ``extend`` calls at once were both applied to one roundtable.

Field failure: ``roundtabled extend -q SES --rounds 1 "Continue A" & roundtabled extend -q SES
--rounds 3 "Continue B" & wait`` on a concluded roundtable: both exited 0 (``completed, 5/5
rounds``), the export listed one extension (B), S2 held two ``── pm · round 3 ──`` prompts and
the log said "extended" twice: two workers drove one roundtable.

Proves, on the real ``opencode serve`` with the scripted model: of the two requests (the bodies
the CLI sends) one is applied and the other refused with an ``Error:`` naming ``sessionID`` and
the running extension; every turn is prompted once.
"""

from __future__ import annotations

import asyncio

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from tests.e2e.conftest import RT
from tests.e2e.edge_helpers import memory_state


async def test_two_extends_at_once_one_is_applied_the_other_refused(rt: RT) -> None:
    """Exact input: pm, dev × 1 round, concluded; extend +1 "Continue A" and +3 "Continue B"
    at once."""
    rt.llm.script(Text(text="SUMMARY."), Text(text="SUMMARY again."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Ship it?", rounds=1)
    await rt.result(s2)
    await rt.finalized(s2)

    def body(rounds: int, prompt: str) -> dict[str, object]:
        return {"sessionID": s2, "directory": rt.directory, "prompt": prompt, "rounds": rounds}

    (sa, da), (sb, db) = await asyncio.gather(
        rt.api("POST", "/v1/roundtables", body(1, "Continue A")),
        rt.api("POST", "/v1/roundtables", body(3, "Continue B")),
    )
    assert sorted([sa, sb]) == [200, 400], (sa, da, sb, db)
    refused = da if sa == 400 else db
    assert refused["field"] == "sessionID", refused
    assert refused["error"].startswith("Error: "), refused
    assert "Continue A" in refused["error"] or "Continue B" in refused["error"], refused
    await rt.result(s2)
    await rt.finalized(s2)
    state = memory_state(rt, s2)
    applied = "Continue A" if sa == 200 else "Continue B"
    assert [e.prompt for e in state.extensions] == [applied]
    turns = [(e.agent, e.round) for e in state.seat_turns()]
    assert len(turns) == len(set(turns)) == 2 * state.total_rounds, turns
    seat_requests = [r.agent for r in rt.llm.requests_for(session=s2, kind="turn")]
    assert seat_requests.count("pm") == state.total_rounds, seat_requests
