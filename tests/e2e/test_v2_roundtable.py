"""A roundtable on the real OpenCode 2.1.2 server, run by the 2.x shell (engine/v2run.py).

The server loads the roundtabled plugin as ``install-tool --opencode 2`` writes it; only the model
is scripted. What the shell does per command: docs/design.md, "The 2.x shell".
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from roundtabled.core.events import Event
from roundtabled.core.state import CONCLUDED_SUFFIX, OBSERVER_AGENT, Signer, decode_state
from roundtabled.core.validation import parse_request
from roundtabled.engine.settings import Settings
from roundtabled.engine.v2run import V2Runner
from roundtabled.errors import ValidationFailed
from roundtabled.offline.opencode_server import OpenCodeServer, agent_prompts_of, offline_config
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import ScriptedLLM, content_text
from roundtabled.opencode.port import STATE_KEY, V2Port, port_for
from roundtabled.opencode.v2 import v2_event_stream
from roundtabled.service import install

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]

SEAT_MODELS = {"pm": "debater-1", "dev": "debater-2", "rv": "debater-3"}
"""Each seat's own configured model; the observer runs on the directory's default."""
ARGUMENTS = {
    "pm": ("customers want the feature soon", "marketing needs a date we can keep"),
    "dev": ("a flag lets us roll back within minutes", "the ledger schema needs no migration"),
    "rv": ("audits require a staged rollout", "two regions first keeps the risk bounded"),
}
"""Replies that share few words, so loop detection never ends the debate early."""


@dataclass
class Env:
    server: OpenCodeServer
    llm: ScriptedLLM
    port: V2Port
    runner: V2Runner
    signer: Signer

    @property
    def directory(self) -> str:
        return str(self.server.project_dir)

    async def parent(self) -> str:
        info = await self.port.client.create_session(directory=self.directory, title="S1")
        return info.id


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    root = tmp_path_factory.mktemp("v2rt")
    llm = ScriptedLLM()
    await llm.start(port=0)
    config = offline_config(
        llm.base_url,
        extra_agents={seat: {"model": f"scripted/{mid}"} for seat, mid in SEAT_MODELS.items()},
    )
    llm.agent_prompts.update(agent_prompts_of(config))
    server = OpenCodeServer(root, config, major=2)
    token = root / "token"
    token.write_text(secrets.token_hex(16) + "\n")
    # the plugin (its context hook hides what S2's metadata lists) and the observer agent
    install.install_tools(
        root / server.directory_name / ".opencode",
        control_url="http://127.0.0.1:9",
        token_file=token,
        major=2,
    )
    await server.start()
    port = await port_for(server.url, password=server.password)
    assert isinstance(port, V2Port)
    signer = Signer(secrets.token_bytes(32))
    runner = V2Runner(port, signer, Settings(resync_period=2.0))
    connected = asyncio.Event()

    def on_event(ev: Event) -> None:
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


async def test_three_seats_two_rounds_each_on_its_own_model(env: Env) -> None:
    """(a) Each seat speaks once per round on its own configured model, the observer once, the
    result comes back completed and S2's title is concluded. (b) The plugin keeps every earlier
    turn prompt but the opening one out of each later request."""
    s1 = await env.parent()
    since = len(env.llm.requests)
    replies = {
        (seat, rnd): f"{seat.upper()} in round {rnd}: {ARGUMENTS[seat][rnd - 1]}.\n"
        "Position: flag — ship behind a flag (confidence 7/10)"
        for rnd in (1, 2)
        for seat in SEAT_MODELS
    }
    for rnd in (1, 2):
        for seat in SEAT_MODELS:
            env.llm.script(Text(text=replies[(seat, rnd)]), agent=seat)
    env.llm.script(Text(text="SUMMARY: the seats agree on a flag."), agent=OBSERVER_AGENT)
    req = parse_request(
        {
            "agents": list(SEAT_MODELS),
            "rounds": 2,
            "prompt": "Which rollout for payments?",
            "parentSessionID": s1,
        }
    )
    state = await env.runner.start(req)
    s2 = state.session_id
    result = await env.runner.wait_result(s2, 120)
    assert result is not None, "no result within 120 s"
    assert result["endReason"] == "completed", (result["endReason"], result["summary"])
    assert "SUMMARY: the seats agree on a flag." in result["summary"]
    contract = result["result"]
    assert contract["status"]["endReason"] == "completed"
    assert contract["status"]["roundsCompleted"] == 2
    assert [s["answered"] for s in contract["status"]["seats"]] == [2, 2, 2]
    assert contract["verdict"]["decision"] is not None, contract["verdict"]
    assert [p["label"] for p in contract["verdict"]["positions"]] == ["flag"] * 3

    requests = [r for r in env.llm.requests[since:] if r.kind in ("turn", "tool-followup")]
    who = [(r.agent, r.model) for r in requests]
    seats = [(s, f"{SEAT_MODELS[s]}") for s in SEAT_MODELS]
    assert [a for a, _ in who] == [*SEAT_MODELS, *SEAT_MODELS, OBSERVER_AGENT], who
    for (agent, model), (want_agent, want_model) in zip(who[:6], seats * 2, strict=True):
        assert agent == want_agent
        assert model is not None and model.endswith(want_model), (agent, model)

    # (b) the turn prompts already answered are out of each later request (the opening one,
    # which carries the topic, stays); every earlier reply stays in view
    def said(req: Any, role: str) -> list[str]:
        return [content_text(m.get("content")) for m in req.messages if m.get("role") == role]

    own_prompts = [said(r, "user")[-1] for r in requests]
    assert "Which rollout for payments?" in own_prompts[0]
    answered: list[str] = []
    for i, r in enumerate(requests):
        if i > 0:
            # the opening prompt (it carries the topic) and the turn's own, nothing between
            assert said(r, "user") == [own_prompts[0], own_prompts[i]], i
        assert [t.strip() for t in said(r, "assistant")] == answered, i
        if i < 6:
            answered.append(replies[(list(SEAT_MODELS)[i % 3], 1 + i // 3)])

    assert await env.runner.finalized(s2, 30)
    info = await env.port.client.get_session(s2)
    assert info.title is not None and info.title.endswith(CONCLUDED_SUFFIX)
    held = (info.metadata or {})[STATE_KEY]
    final = decode_state(held["text"], held["metadata"], s2, env.signer)
    assert final.phase.value == "done"
    assert [e.agent for e in final.history] == [*SEAT_MODELS, *SEAT_MODELS, OBSERVER_AGENT]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"context": "recent"}, "context"),
        ({"opening": "independent"}, "opening"),
    ],
)
async def test_what_2x_cannot_run_yet_is_refused_naming_the_field(
    env: Env, body: dict[str, str], field: str
) -> None:
    s1 = await env.parent()
    req = parse_request({"agents": ["pm", "dev"], "prompt": "Q?", "parentSessionID": s1, **body})
    with pytest.raises(ValidationFailed) as caught:
        await env.runner.start(req)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"Error: {field}:")
    assert "OpenCode 2.x" in str(caught.value)
