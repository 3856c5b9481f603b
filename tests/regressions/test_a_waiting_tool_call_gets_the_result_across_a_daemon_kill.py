"""Field fault (OpenCode 1.18.33): the ``roundtable`` tool call in S1 long-polls the daemon; the
daemon is killed (``kill -9``) while dev speaks in round 1 (or during the observer's turn) and a
new daemon is started on the same address. The new daemon resumed the roundtable and concluded it
(S2's title ends ``· CONCLUDED``), but the tool call ended with ``Error: no roundtable 'ses_…' is
known to this daemon``: the control API answered the shim's poll before the start-up recovery had
loaded the roundtable. And the result never reached S1: that error text names S2's id, so the
delivery took the ended tool call for one that had returned the result, and posted no fallback.

Now a request about a roundtable while recovery runs is answered "starting" (HTTP 503) and the
shim waits through it; the delivery recognises the result in S1 by the signed delivery mark the
shim stores in the tool part's metadata, and posts the fallback whenever the tool call ended
without it.

Exact sequence: daemon = ``python -m roundtabled serve`` subprocess on a fixed port, the real
shims installed for it; the orchestrator calls ``roundtable({agents: [pm, dev], rounds: 2,
prompt})``; dev's round-1 turn (or the observer's turn) takes 4 s to start; the daemon is
SIGKILLed as soon as the model was asked for it, and started again at once.
"""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.opencode_server import free_port
from roundtabled.offline.scripted_actions import Text, tool_call
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.service import install
from tests.conftest import OpenCodeFactory
from tests.e2e.conftest import roundtable_config
from tests.e2e.edge_helpers import ORCHESTRATOR_MODEL
from tests.e2e.test_tool_shim import oc
from tests.fakes.daemon_proc import DaemonProc, text_of, turn_markers

pytestmark = pytest.mark.slow

AGENTS = ["pm", "dev"]
ROUNDS = 2
SLOW_S = 4.0
"""How long the turn the daemon is killed in takes to start (s)."""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("during", ["dev", OBSERVER_AGENT])
async def test_a_waiting_tool_call_gets_the_result_once_across_a_daemon_kill(
    during: str, tmp_path: Path, scripted_llm: ScriptedLLM, opencode_factory: OpenCodeFactory
) -> None:
    port = free_port()
    root = tmp_path / "daemon"
    token_file = root / "config" / "roundtabled" / "token"
    staging = tmp_path / "staging"
    files = {
        ".opencode/" + p.relative_to(staging).as_posix(): p.read_text()
        for p in install.install_tools(
            staging, control_url=f"http://127.0.0.1:{port}", token_file=token_file
        )
    }
    server = await opencode_factory(roundtable_config(scripted_llm), files=files)
    directory = str(server.project_dir)
    daemon = DaemonProc(root, server.url, directory, port=port, keep_port=True)
    prompt = "Kill the daemon mid-debate: should we split the payments monolith?"
    scripted_llm.script(
        tool_call("roundtable", {"agents": AGENTS, "rounds": ROUNDS, "prompt": prompt}),
        Text(text="The orchestrator goes on."),
        agent="build",
    )
    slow = Text(text=f"{during} answers after a pause.", first_byte_delay=SLOW_S)
    scripted_llm.script(slow, agent=during)
    async with aiohttp.ClientSession() as http:
        await daemon.start(http)
        try:
            s1 = str((await oc(server, "POST", "/session", {}, directory=directory))["id"])
            await oc(
                server,
                "POST",
                f"/session/{s1}/prompt_async",
                {
                    "agent": "build",
                    "model": ORCHESTRATOR_MODEL,
                    "parts": [{"type": "text", "text": "Convene a roundtable."}],
                },
            )
            first = (await scripted_llm.wait_for_requests(1, within=90, agent=during))[0]
            s2 = first.session_id
            assert s2 is not None
            daemon.proc.kill()
            await daemon.proc.wait()
            await daemon.start(http)
            await daemon.settled(http, s2, timeout=120)
            # The orchestrator's turn has ended (S1 idle, checked by settled): its tool part is
            # final, and a fallback would have been posted by now.
            s1_msgs = await oc(server, "GET", f"/session/{s1}/message")
            s2_msgs = await oc(server, "GET", f"/session/{s2}/message")
            info = await oc(server, "GET", f"/session/{s2}")
            children = await oc(server, "GET", f"/session/{s1}/children")
        finally:
            daemon.kill_all()
    assert str(info["title"]).endswith("· CONCLUDED"), info["title"]
    assert [c["id"] for c in children] == [s2], "a second S2"
    turns, observers = turn_markers(s2_msgs, s2, daemon.signer)
    assert turns == [(r, s) for r in range(ROUNDS) for s in range(len(AGENTS))], turns
    assert observers == 1, observers
    seat_requests = [r.agent for r in scripted_llm.requests_for(session=s2, kind="turn")]
    assert [a for a in seat_requests if a != OBSERVER_AGENT] == AGENTS * ROUNDS, seat_requests
    assert 1 <= seat_requests.count(OBSERVER_AGENT) <= 2, seat_requests
    summary = scripted_llm.requests_for(session=s2, agent=OBSERVER_AGENT)[-1].reply_text.strip()
    assert summary
    tools = [
        p
        for m in s1_msgs
        for p in m["parts"]
        if p.get("type") == "tool" and p["tool"] == "roundtable"
    ]
    assert len(tools) == 1, tools
    output = str(tools[0]["state"].get("output") or "")
    holding = [m for m in s1_msgs if summary[:60] in json.dumps(m, ensure_ascii=False)]
    assert len(holding) == 1, [text_of(m, ignored=True)[:200] for m in s1_msgs]
    assert "is known to this daemon" not in output, output
    # The shim waited through the restart: the result is the tool call's, no fallback message,
    # and S1 says so itself (the daemon's signed mark beside the result in the tool part).
    assert summary[:60] in output, output[:500]
    assert (tools[0]["state"].get("metadata") or {}).get("roundtabled"), tools[0]["state"]
