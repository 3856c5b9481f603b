"""On OpenCode 2.x ``roundtabled agents`` marked OpenCode's own agents (``build``, ``plan``,
``general``, ``explore``) as debaters (●) and listed them among the project's agents: the 2.x
agent list (``GET /api/agent``) carries no ``native`` flag, and the 2.x shell's list for the
control API left it out, so every agent counted as one of the configuration. Now the shell marks
OpenCode 2.x's built-in agents ``native`` (``roundtabled.opencode.v2.BUILTIN_AGENTS``) and the
command lists them after the debaters with ○, as on 1.x."""

from __future__ import annotations

import json

import pytest

from tests.e2e.cli_helpers import cli
from tests.e2e.conftest import RT

pytestmark = pytest.mark.both_majors


@pytest.fixture
def opencode_major() -> int:
    """This fault is OpenCode 2.x's, whatever major the run's other servers are."""
    return 2


async def test_build_is_listed_as_a_built_in_after_the_debaters(rt: RT) -> None:
    assert rt.major == 2
    run = await cli(rt, "agents", "--directory", rt.directory)
    assert run.code == 0, run
    # one row per agent (the legend under the table starts with the marks too)
    rows = [line for line in run.out.splitlines() if line[:2] in ("● ", "○ ") and "  " in line]
    marks = {r.split()[1]: r[0] for r in rows}
    assert {marks["pm"], marks["dev"], marks["rv"]} == {"●"}, rows
    assert marks["build"] == "○" and marks["plan"] == "○", rows
    assert max(rows.index(r) for r in rows if r[0] == "●") < min(
        rows.index(r) for r in rows if r[0] == "○"
    ), run.out
    listed = {a["name"]: a for a in json.loads((await cli(rt, "agents", "--json")).out)}
    assert listed["build"]["native"] is True and listed["pm"]["native"] is False
