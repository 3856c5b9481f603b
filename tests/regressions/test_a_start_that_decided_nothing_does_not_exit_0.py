"""Field failure (a new user scripting ``roundtabled start``): a one-round debate whose seats
stated no position and whose observer failed printed ``Status: observer-failed, 1/1 rounds,
DEGRADED … there is no decision`` and exited 0, which a script reads as success (only an
all-failed, aborted or cancelled run exited 3). Now a run that ended early (the observer failed,
a timeout, a budget) without a decision exits 3 (README, "Exit codes"); a degraded run that did
decide (the decision rebuilt from the seats' stated positions) still exits 0.

On the real ``opencode serve``; only the model is scripted.
"""

from __future__ import annotations

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import HttpError, Text
from tests.e2e.cli_helpers import cli
from tests.e2e.conftest import RT


async def test_an_observer_failure_over_no_positions_exits_3(rt: RT) -> None:
    rt.llm.script(Text(text="It depends on the team."), agent="pm")
    rt.llm.script(Text(text="Hard to say."), agent="dev")
    rt.llm.script(HttpError(status=400, message="observer provider down"), agent=OBSERVER_AGENT)
    run = await cli(rt, "start", "--agents", "pm,dev", "--rounds", "1", "--quiet", "Monolith?")
    assert "observer-failed" in run.out, run
    assert "there is no decision" in run.out, run
    assert run.code == 3, run


async def test_an_observer_failure_over_stated_positions_still_exits_0(rt: RT) -> None:
    rt.llm.script(Text(text="Keep it.\nPosition: keep — keep it (confidence 7/10)"), agent="pm")
    rt.llm.script(Text(text="Keep it.\nPosition: keep — keep it (confidence 8/10)"), agent="dev")
    rt.llm.script(HttpError(status=400, message="observer provider down"), agent=OBSERVER_AGENT)
    run = await cli(rt, "start", "--agents", "pm,dev", "--rounds", "1", "--quiet", "Keep it?")
    assert "observer-failed" in run.out, run
    assert "decision: keep" in run.out, run
    assert run.code == 0, run
