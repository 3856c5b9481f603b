"""Regression: title clobbering.

Field failure: ``roundtabled start`` without ``--parent`` makes S2 a *root* session; with title
generation enabled in the server config, OpenCode's title agent answered late (after the daemon
had set ``(Roundtable) - … · CONCLUDED``) and overwrote the title, or the suffix was appended
twice. Proves: S2 keeps the daemon's title and ends with exactly one `` · CONCLUDED``, also after
a slow title request had every chance to land.
"""

from __future__ import annotations

import asyncio
from typing import Any

from roundtabled.core.state import CONCLUDED_SUFFIX, OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import ScriptedLLM
from tests.e2e.cli_helpers import cli
from tests.e2e.conftest import roundtable_config
from tests.e2e.edge_helpers import wait_for

TITLE_DELAY_S = 3.0
CLOBBER = "Generated Title That Must Not Win"


async def test_root_s2_keeps_the_daemon_title_with_one_concluded_suffix(
    rt_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """Failing input: server config ``offline_config(..., title=True)``; every title request
    answered ``"Generated Title That Must Not Win"`` after 3 s;
    ``roundtabled start --agents pm,dev "Monolith or services?"`` (no ``--parent``)."""
    rt = await rt_factory(roundtable_config(scripted_llm, title=True))
    for _ in range(5):
        rt.llm.script(Text(text=CLOBBER, first_byte_delay=TITLE_DELAY_S), agent="title")
    rt.llm.script(Text(text="PM: one deployable first."), agent="pm")
    rt.llm.script(Text(text="DEV: split only the hot path."), agent="dev")
    rt.llm.script(Text(text="SUMMARY: monolith first."), agent=OBSERVER_AGENT)
    run = await cli(rt, "start", "--agents", "pm,dev", "--quiet", "Monolith or services?")
    assert run.code == 0, run
    sessions = await rt.oc("GET", "/session", params={"directory": rt.directory})
    [s2_info] = [s for s in sessions if s["title"].startswith("(Roundtable)")]
    s2 = s2_info["id"]
    assert "parentID" not in s2_info
    # Every title request the model got has been answered (late) and the daemon can
    # change nothing more; then check the title twice.
    await wait_for(
        lambda: all(r.finished_at or r.disconnected for r in rt.llm.requests_for(kind="title")),
        30,
        "the title requests to be answered",
    )
    await rt.settled(s2)
    title = (await rt.session(s2))["title"]
    assert title == "(Roundtable) - Monolith or services?" + CONCLUDED_SUFFIX, title
    assert title.count(CONCLUDED_SUFFIX.strip()) == 1
    # the daemon's own record agrees, and nothing re-titles it after another wait (the server
    # applies a title reply after its stream ended, and says nothing when it drops one)
    await asyncio.sleep(2)
    assert (await rt.session(s2))["title"] == title
    status, st = await rt.api("GET", f"/v1/roundtables/{s2}")
    assert status == 200 and CLOBBER not in str(st)
