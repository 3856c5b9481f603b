"""The project directory: ``opencode serve`` started as a service outside the user's project.

Field failure: the server's own directory is not the project the orchestrator works in. The daemon
read the agents (and created S2) for the server's directory whenever the call named no directory,
so a seat agent defined only in the project was "unknown", and a call naming another directory
than S1's ran a debate there with whatever agents that directory has.

Proves, on the real ``opencode serve`` started in an empty temporary directory (provider in the
global config, seat agent ``arch`` only in project P's ``opencode.json``): a roundtable asked for
with only S1 (created for P) finds ``arch``, S2 has S1's directory and project, and ``arch``
answers with its own prompt; the same call naming the empty directory while S1 is P's is refused
with an ``Error:`` naming the mismatch, and no session is created for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from roundtabled.offline.opencode_server import OpenCodeServer, agent_prompts_of
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import ScriptedLLM
from tests.e2e.conftest import RT, make_rt, roundtable_config

ARCH_PROMPT = "You are arch, the architect seat defined only in this project.\nBe concise."
PROJECT_CONFIG: dict[str, Any] = {
    "$schema": "https://opencode.ai/config.json",
    "agent": {
        "arch": {
            "mode": "subagent",
            "description": "Architect seat (project only)",
            "prompt": ARCH_PROMPT,
            "model": "scripted/debater-3",
            "permission": {"*": "deny"},
        }
    },
}


@pytest.fixture
async def service_rt(tmp_path: Path, scripted_llm: ScriptedLLM) -> AsyncIterator[tuple[RT, Path]]:
    """A server started in an empty directory, project P beside it, a daemon knowing only the
    server's directory (as a service would)."""
    cfg = roundtable_config(scripted_llm)
    server = OpenCodeServer(tmp_path / "oc", cfg, directory_name="empty", config_in="global")
    scripted_llm.agent_prompts.update(agent_prompts_of(cfg))
    scripted_llm.agent_prompts.update(agent_prompts_of(PROJECT_CONFIG))
    await server.start()
    rt: RT | None = None
    try:
        project = await server.add_project("project-p", PROJECT_CONFIG)
        rt = await make_rt(tmp_path, scripted_llm, server)
        yield rt, project
    finally:
        if rt is not None:
            rt.daemon.request_stop()
            await rt.task
            await rt.daemon.client.close()
            await rt.http.close()
        await server.stop()


async def test_a_seat_defined_only_in_s1_s_project_is_found(service_rt: tuple[RT, Path]) -> None:
    """Exact failing input: server cwd = an empty directory; S1 = ``POST /session?directory=P``;
    ``POST /v1/roundtables`` ``{"agents": ["arch", "pm"], "observer": "pm", "prompt":
    "Monolith or services?", "rounds": 1, "parentSessionID": S1}`` (no ``directory``); then the
    same with ``"directory"`` = the server's empty directory."""
    rt, project = service_rt
    s1 = (await rt.oc("POST", "/session", {"title": "S1"}, params={"directory": str(project)}))[
        "id"
    ]
    s1_info = await rt.session(s1)
    rt.llm.script(Text(text="ARCH: a modular monolith first."), agent="arch")
    rt.llm.script(Text(text="PM: agreed."), Text(text="SUMMARY: modular monolith."), agent="pm")
    body = {
        "agents": ["arch", "pm"],
        "observer": "pm",
        "prompt": "Monolith or services?",
        "rounds": 1,
        "parentSessionID": s1,
    }
    status, data = await rt.api("POST", "/v1/roundtables", body)
    assert status == 200, data
    s2 = data["sessionID"]
    result = await rt.result(s2, timeout=90)
    assert "SUMMARY: modular monolith." in result["summary"], result
    s2_info = await rt.session(s2)
    assert s2_info["directory"] == s1_info["directory"] == str(project), s2_info
    assert s2_info["projectID"] == s1_info["projectID"], (s2_info, s1_info)
    arch = rt.llm.requests_for(session=s2, agent="arch", kind="turn")
    assert len(arch) == 1 and arch[0].system.lstrip().startswith(ARCH_PROMPT.splitlines()[0])

    before = await rt.oc("GET", "/session", params={"directory": rt.directory})
    status, data = await rt.api("POST", "/v1/roundtables", {**body, "directory": rt.directory})
    assert status == 400, data
    error = data["error"]
    assert error.startswith("Error:") and data.get("field") == "directory", data
    assert str(project) in error and rt.directory in error, error
    after = await rt.oc("GET", "/session", params={"directory": rt.directory})
    assert len(after) == len(before), after
