"""``roundtabled list`` padded STATUS to 10 characters, so a roundtable whose status is
``observer-failed`` (15) pushed its ROUND, AGENT, ELAPSED and TITLE cells to the right of their
headers. Now each column is as wide as its widest cell: every row's cells start under their
header (the real 1.x server; only the model is scripted).
"""

from __future__ import annotations

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import HttpError, Text
from tests.e2e.cli_helpers import cli
from tests.e2e.conftest import RT


async def test_an_observer_failed_row_lines_up_with_the_header(rt: RT) -> None:
    rt.llm.script(Text(text="Keep it.\nPosition: keep — keep it (confidence 7/10)"), agent="pm")
    rt.llm.script(Text(text="Keep it.\nPosition: keep — keep it (confidence 8/10)"), agent="dev")
    rt.llm.script(HttpError(status=400, message="observer provider down"), agent=OBSERVER_AGENT)
    started = await cli(rt, "start", "--agents", "pm,dev", "--rounds", "1", "-q", "Keep it?")
    assert "observer-failed" in started.out, started
    listed = await cli(rt, "list")
    assert listed.code == 0, listed
    head, *rows = listed.out.splitlines()
    [row] = [r for r in rows if "observer-failed" in r]
    status, rounds, agent = head.index("STATUS"), head.index("ROUND"), head.index("AGENT")
    assert row[status:].startswith("observer-failed "), (head, row)
    assert row[rounds:agent].strip() == "1/1", (head, row)
    assert row[agent:].startswith("- "), (head, row)
    assert row[head.index("TITLE") :].startswith("Keep it?"), (head, row)
