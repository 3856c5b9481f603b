"""The files in ``examples/`` work as shipped, on the real OpenCode server.

Proves: ``examples/opencode.json`` with its ``agents/*.md`` prompt files loads in the real server —
pm, dev, rv are subagents with the docs/behaviour.md, 'Colours' colours, the prompt read from the
file, read-only
tools allowed and edit/bash/webfetch/question (and a nested roundtable) denied; and
``examples/control_api_client.py`` drives a whole roundtable through the control API.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.opencode_server import offline_config
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import ScriptedLLM

from .conftest import RT

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COLOURS = {"pm": "#3498db", "dev": "#2ecc71", "rv": "#e74c3c"}


def _rules(agent: dict[str, Any]) -> dict[str, str]:
    """The last matching action per permission (later rules win in OpenCode)."""
    out: dict[str, str] = {}
    for rule in agent.get("permission") or []:
        if rule.get("pattern") in ("*", None):
            out[str(rule["permission"])] = str(rule["action"])
    return out


async def test_example_opencode_json_loads_with_prompts_colours_and_permissions(
    scripted_llm: ScriptedLLM, opencode_factory: Any
) -> None:
    example = json.loads((EXAMPLES / "opencode.json").read_text())
    config = offline_config(scripted_llm.base_url)
    config["agent"].update(example["agent"])
    config["permission"] = {}  # the example alone must make the debaters safe
    files = {f"agents/{p.name}": p.read_text() for p in (EXAMPLES / "agents").glob("*.md")}
    server = await opencode_factory(config, files=files)
    async with (
        server.client() as http,
        http.get(server.url + "/agent", params={"directory": str(server.project_dir)}) as resp,
    ):
        assert resp.status == 200
        agents = {a["name"]: a for a in await resp.json()}
    for name, colour in COLOURS.items():
        agent = agents[name]
        assert agent["mode"] == "subagent"
        assert agent["color"].lower() == colour
        prompt_file = (EXAMPLES / "agents" / f"{name}.md").read_text()
        assert agent["prompt"].strip() == prompt_file.strip()  # {file:…} was resolved
        rules = _rules(agent)
        for tool in ("read", "grep", "glob", "list"):
            assert rules.get(tool) == "allow", (name, tool, rules)
        for tool in ("edit", "bash", "webfetch", "question", "external_directory", "roundtable"):
            assert rules.get(tool) == "deny", (name, tool, rules)


async def test_control_api_client_example_runs_a_roundtable(rt: RT, tmp_path: Path) -> None:
    rt.llm.script(Text(text="PM from the script."), agent="pm")
    rt.llm.script(Text(text="DEV from the script."), agent="dev")
    rt.llm.script(Text(text="SUMMARY from the script."), agent=OBSERVER_AGENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROUNDTABLED_")}
    env.update(rt.settings_env)
    env["ROUNDTABLED_URL"] = rt.control
    out_md = tmp_path / "out.md"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / "control_api_client.py"),
        "--agents",
        "pm,dev",
        "--directory",
        rt.directory,
        "--export",
        str(out_md),
        "Script me",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, (out, err)
    text = out.decode()
    assert "## pm (round 1, turn)" in text and "PM from the script." in text
    assert "SUMMARY from the script." in text
    assert "### dev · round 1" in out_md.read_text()
