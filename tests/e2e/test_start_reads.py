"""The reads a start makes, kept per server instance, against the real server
(docs/design.md, "Reads kept per server instance").

What the daemon relies on (pinned here on the real ``opencode serve``): the server lists a
directory's agents as its instance loaded them, and only a disposal of that instance
(``POST /instance/dispose``, what a config change in OpenCode does) makes it read the project
again. What the daemon does with it: a seat's model changed in ``opencode.json`` and reloaded is
the model of the next roundtable, not the one the daemon kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roundtabled.offline.scripted_actions import Text

from .conftest import RT
from .edge_helpers import wait_for


def names(agents: Any) -> set[str]:
    return {str(a["name"]) for a in agents}


async def test_the_server_lists_the_agents_it_loaded_until_it_disposes_the_instance(
    rt_factory: Any,
) -> None:
    rt: RT = await rt_factory()
    where = {"directory": rt.directory}
    assert "late" not in names(await rt.oc("GET", "/agent", params=where))
    agent_dir = Path(rt.directory) / ".opencode" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "late.md").write_text("---\ndescription: added late\nmode: subagent\n---\nLate.\n")
    assert "late" not in names(await rt.oc("GET", "/agent", params=where))
    await rt.oc("POST", "/instance/dispose", params=where)
    assert "late" in names(await rt.oc("GET", "/agent", params=where))


async def one_round(rt: RT) -> str:
    rt.llm.script(Text(text="PM: ship it."), agent="pm")
    rt.llm.script(Text(text="DEV: agreed."), agent="dev")
    s2 = await rt.start(agents=["pm", "dev"], rounds=1, prompt="Ship the feature?")
    await rt.result(s2)
    await rt.finalized(s2)
    return s2


async def test_a_seat_s_model_changed_and_reloaded_is_the_next_roundtable_s(
    rt_factory: Any,
) -> None:
    """Failing input: pm on ``scripted/debater-1``, one roundtable; then ``opencode.json`` moves
    pm to ``scripted/debater-3`` and the instance is disposed; a second roundtable."""
    rt: RT = await rt_factory()
    first = await one_round(rt)
    assert [r.model for r in rt.llm.requests_for(agent="pm", session=first)] == ["debater-1"]
    config_file = Path(rt.directory) / "opencode.json"
    config = json.loads(config_file.read_text())
    config["agent"]["pm"]["model"] = "scripted/debater-3"
    config_file.write_text(json.dumps(config))
    await rt.oc("POST", "/instance/dispose", params={"directory": rt.directory})
    reads = rt.daemon.engine.start_reads
    await wait_for(lambda: not reads.kept(rt.directory), 10, "the daemon drops the kept reads")
    second = await one_round(rt)
    assert [r.model for r in rt.llm.requests_for(agent="pm", session=second)] == ["debater-3"]
