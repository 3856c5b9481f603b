"""On OpenCode 2.x a daemon that wrote a seat turn's state after its prompt (off the critical
path), used with an older 2.x plugin still installed, let an earlier turn prompt into a seat's
model request.

The exact situation: OpenCode 2.1.2 with the roundtabled 2.x plugin as shipped before it hid by
the newest turn prompt's marker and reported itself to the daemon
(``tests/fixtures/v2_plugin_lists_only/index.ts``: its ``context`` hook drops only the ids S2's
``metadata.roundtabled.hidden`` lists); a debate of pm and dev over 2 rounds, context "full";
each state write that follows its prompt lands after the seat's model request (here held until
the scripted model has received it). pm's round-2 request then held dev's round-1 prompt: S2's
metadata still listed the ids of dev's turn, which leave dev's own prompt in.

Now a seat turn's write follows its prompt only where the daemon trusts a report of the 2.x
plugin that hides by the marker (``PLUGIN_VERSION_V2``, docs/design.md "The 2.x shell"); this
plugin does not report, so every write goes before its prompt and each seat's request holds the
opening prompt and its own only.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from roundtabled.core.server_records import SessionRef
from roundtabled.core.state import OBSERVER_AGENT, Signer, decode_state
from roundtabled.core.validation import parse_request
from roundtabled.engine import v2_features
from roundtabled.engine.settings import Settings
from roundtabled.engine.v2run import V2Runner
from roundtabled.offline.opencode_server import OpenCodeServer, agent_prompts_of, offline_config
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import ScriptedLLM, content_text
from roundtabled.opencode.port import V2Port, port_for
from roundtabled.opencode.v2 import v2_event_stream
from roundtabled.service import install

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]

SEATS = {"pm": "debater-1", "dev": "debater-2"}
OLDER_PLUGIN = Path(__file__).parent.parent / "fixtures" / "v2_plugin_lists_only" / "index.ts"
REPLIES = {
    ("pm", 1): "PM round 1: customers want the feature soon.\nPosition: flag — yes",
    ("dev", 1): "DEV round 1: a flag lets us roll back within minutes.\nPosition: flag — yes",
    ("pm", 2): "PM round 2: marketing needs a date we can keep.\nPosition: flag — yes",
    ("dev", 2): "DEV round 2: the ledger schema needs no migration.\nPosition: flag — yes",
}


@dataclass
class Env:
    server: OpenCodeServer
    llm: ScriptedLLM
    port: V2Port
    runner: V2Runner
    signer: Signer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    root = tmp_path_factory.mktemp("v2older")
    llm = ScriptedLLM()
    await llm.start(port=0)
    config = offline_config(
        llm.base_url, extra_agents={seat: {"model": f"scripted/{m}"} for seat, m in SEATS.items()}
    )
    llm.agent_prompts.update(agent_prompts_of(config))
    server = OpenCodeServer(root, config, major=2)
    target = root / server.directory_name / ".opencode"
    install.install_tools(
        target, control_url="http://127.0.0.1:9", token_file=root / "token", major=2
    )
    # the older plugin in place of the shipped one (install-tool not run again)
    (target / install.V2_PLUGIN_DIR / install.V2_PLUGIN_FILE).write_text(OLDER_PLUGIN.read_text())
    await server.start()
    port = await port_for(server.url, password=server.password)
    assert isinstance(port, V2Port)
    signer = Signer(secrets.token_bytes(32))
    runner = V2Runner(port, signer, Settings(resync_period=2.0))
    connected = asyncio.Event()

    def on_event(ev: Any) -> None:
        if ev.type == "server.connected":
            connected.set()
        runner.on_event(ev)

    stream = v2_event_stream(server.url, on_event, password=server.password)
    task = asyncio.create_task(stream.run())
    try:
        await asyncio.wait_for(connected.wait(), 15)
        yield Env(server, llm, port, runner, signer)
    finally:
        await runner.close()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await port.close()
        await server.stop()
        await llm.stop()


async def test_an_older_2x_plugin_sees_no_earlier_turn_prompt_in_a_seat_s_request(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = str(env.server.project_dir)
    assert await v2_features.plugin_loaded(env.port, directory)  # the older plugin runs
    start_turn, write_state = env.port.start_turn, env.port.write_state
    prompted: list[str] = []
    written: set[str] = set()
    order: list[tuple[str, str]] = []

    async def prompt(session: SessionRef, *args: Any, **kw: Any) -> str:
        pid = await start_turn(session, *args, **kw)
        prompted.append(pid)
        order.append(("prompt", pid))
        return pid

    async def write(session: SessionRef, block: Any, **kw: Any) -> None:
        state = decode_state(block.text, block.metadata, session.id, env.signer)
        pid = state.pending.message_id if state.pending is not None else ""
        order.append(("write", pid))
        if pid in prompted and pid not in written:
            # A write that follows its prompt lands after the seat's model request.
            await env.llm.wait_for_requests(len(prompted), 60, session=session.id, kind="turn")
        written.add(pid)
        await write_state(session, block, **kw)

    monkeypatch.setattr(env.port, "start_turn", prompt)
    monkeypatch.setattr(env.port, "write_state", write)
    s1 = (await env.port.client.create_session(directory=directory, title="S1")).id
    for rnd in (1, 2):
        for seat in SEATS:
            env.llm.script(Text(text=REPLIES[(seat, rnd)]), agent=seat)
    env.llm.script(Text(text="SUMMARY: ship it behind a flag."), agent=OBSERVER_AGENT)
    since = len(env.llm.requests)
    req = parse_request(
        {"agents": list(SEATS), "rounds": 2, "prompt": "Which rollout?", "parentSessionID": s1}
    )
    s2 = (await env.runner.start(req)).session_id
    result = await env.runner.wait_result(s2, 120)
    assert result is not None and result["endReason"] == "completed", result
    assert await env.runner.finalized(s2, 30)

    seat_requests = [r for r in env.llm.requests[since:] if r.agent in SEATS]
    assert [r.agent for r in seat_requests] == ["pm", "dev", "pm", "dev"]
    for n, request in enumerate(seat_requests):
        users = [
            content_text(m.get("content")) for m in request.messages if m.get("role") == "user"
        ]
        # the opening prompt (it carries the topic) and the seat's own prompt, no other
        assert len(users) == (1 if n == 0 else 2), (request.agent, n, users)
        assert "Which rollout?" in users[0], users
    # the daemon heard no report of the marker-hiding plugin: each write went first
    for pid in prompted:
        assert order.index(("write", pid)) < order.index(("prompt", pid)), order
