"""Regression: permission prompts nobody answers.

Field failure: with ``bash: ask`` in the config, a seat that ran ``bash`` (directly, or through a
``task`` subagent whose request is raised in a grandchild session) waited for a human who is not
there; each seat then sat busy until the turn timeout, and a permission raised while the daemon
was down was never answered at all. Proves, with policy ``reject``: both requests are answered
``reject`` within 2 s (the second one after a kill -9 + restart of the daemon, found through
``GET /permission``), both turns end, and no turn reaches the timeout.
"""

from __future__ import annotations

import json
import time
from typing import Any

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text, tool_call
from roundtabled.offline.scripted_llm import ScriptedLLM
from tests.e2e.conftest import roundtable_config
from tests.e2e.edge_helpers import EventLog, memory_state, wait_for

from .conftest import seat_turns

HELPER_PROMPT = "You are helper, a research assistant that runs commands for the developer."
TURN_TIMEOUT_S = 90


def permission_config(llm: ScriptedLLM) -> dict[str, Any]:
    """``bash: ask`` and ``external_directory: ask`` for everything; pm may call bash, dev may
    call ``task`` with the subagent ``helper``, which may call bash."""
    cfg = roundtable_config(
        llm,
        extra_agents={
            "pm": {"permission": {"*": "deny", "bash": "ask", "external_directory": "ask"}},
            "dev": {"permission": {"*": "deny", "task": "allow"}},
            "helper": {
                "mode": "subagent",
                "description": "Runs commands for the developer",
                "prompt": HELPER_PROMPT,
                "model": "scripted/debater-3",
                "permission": {"*": "deny", "bash": "ask", "external_directory": "ask"},
            },
        },
    )
    cfg["permission"].update({"bash": "ask", "external_directory": "ask"})
    return cfg


async def reply_to(
    events: EventLog, request_id: str, what: str
) -> list[tuple[float, dict[str, Any]]]:
    """The ``permission.replied`` events (receive time, payload) answering ``request_id``, once
    there is one (within 10 s)."""
    replied: list[tuple[float, dict[str, Any]]] = await wait_for(
        lambda: [
            (t, p)
            for t, p in events.of_type("permission.replied")
            if p["properties"]["requestID"] == request_id
        ],
        10,
        what,
    )
    return replied


async def test_bash_asks_in_s2_and_in_a_task_grandchild_are_rejected_within_2s_across_a_kill(
    rt_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """Failing input: config ``permission: {bash: ask, external_directory: ask}``, global config
    ``subagent_depth: 3`` (a seat in S2 may run ``task``); policy ``reject``; S1 → roundtable
    ``["pm","dev"]``, 1 round, ``turnTimeout=90``. pm's model calls ``bash {"command": "ls"}``;
    dev's model calls ``task`` → subagent ``helper`` (grandchild of S1) whose model calls
    ``bash {"command": "cat /etc/hostname"}``; the daemon is killed (-9) while helper's request
    is in flight, so the second ``permission.asked`` is raised while no daemon runs; then it is
    restarted."""
    cfg = permission_config(scripted_llm)
    rt = await rt_factory(
        cfg,
        files={"../xdg/config/opencode/opencode.json": json.dumps({"subagent_depth": 3})},
    )
    rt.llm.script(
        tool_call("bash", {"command": "ls", "description": "List files"}),
        Text(text="PM: fine, no shell; my position stands."),
        agent="pm",
    )
    rt.llm.script(
        tool_call(
            "task",
            {
                "description": "check host",
                "prompt": "Run cat /etc/hostname",
                "subagent_type": "helper",
            },
        ),
        Text(text="DEV: the helper could not run it; I argue from experience."),
        agent="dev",
    )
    rt.llm.script(
        tool_call(
            "bash",
            {"command": "cat /etc/hostname", "description": "Host name"},
            first_byte_delay=2.0,  # the permission is raised after the daemon is gone
        ),
        Text(text="helper: no shell access."),
        agent="helper",
    )
    rt.llm.script(Text(text="SUMMARY: no shell was used."), agent=OBSERVER_AGENT)
    s1 = await rt.new_parent()
    t0 = time.monotonic()
    async with EventLog(rt) as events:
        s2 = await rt.start(
            agents=["pm", "dev"],
            prompt="Check the host",
            parentSessionID=s1,
            turnTimeout=TURN_TIMEOUT_S,
        )
        # 1. pm's bash in S2
        asked = await wait_for(lambda: events.of_type("permission.asked"), 60, "pm's request")
        first = asked[0][1]["properties"]
        assert first["sessionID"] == s2 and first["permission"] == "bash"
        replied = await reply_to(events, first["id"], "the reply to pm's request")
        assert replied[0][1]["properties"]["reply"] == "reject"
        assert replied[0][0] - asked[0][0] < 2.0
        # 2. helper's request: kill the daemon while it is in flight, restart after it is raised
        try:
            helper = await rt.llm.wait_for_requests(1, within=60, agent="helper")
        except TimeoutError:
            seen = [(r.agent, r.kind, r.action) for r in rt.llm.requests]
            raise AssertionError(f"dev's task subagent never ran; model requests: {seen}") from None
        grandchild = helper[0].session_id
        assert grandchild and grandchild != s2
        await rt.kill_daemon()
        second_asked = await wait_for(
            lambda: [
                (t, p)
                for t, p in events.of_type("permission.asked")
                if p["properties"]["sessionID"] == grandchild
            ],
            30,
            "helper's request",
        )
        pending = await rt.oc("GET", "/permission", params={"directory": rt.directory})
        assert [p["id"] for p in pending] == [second_asked[0][1]["properties"]["id"]]
        restarted = time.monotonic()
        await rt._launch()
        second = second_asked[0][1]["properties"]
        replied2 = await reply_to(
            events, second["id"], "the reply to helper's request after the restart"
        )
        assert replied2[0][1]["properties"]["reply"] == "reject"
        assert replied2[0][0] - restarted < 2.0, replied2[0][0] - restarted
        result = await rt.result(s2, timeout=TURN_TIMEOUT_S)
    # both turns ended on their own, well before the turn timeout; nothing pending any more
    assert time.monotonic() - t0 < TURN_TIMEOUT_S
    assert result["endReason"] == "completed", result
    assert seat_turns(rt, s2) == ["pm", "dev", OBSERVER_AGENT]
    status, st = await rt.api("GET", f"/v1/roundtables/{s2}")
    assert status == 200 and st["errors"] == [], st
    history = memory_state(rt, s2).history
    assert [e.agent for e in history if e.kind == "turn"] == ["pm", "dev"]
    assert not any(e.has_error or e.cut_off for e in history), history
    assert await rt.oc("GET", "/permission", params={"directory": rt.directory}) == []
