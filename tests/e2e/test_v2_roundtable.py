"""A roundtable on the real OpenCode 2.1.2 server, run by the 2.x shell (engine/v2run.py).

The server loads the roundtabled plugin as ``install-tool --opencode 2`` writes it; only the model
is scripted. What the shell does per command: docs/design.md, "The 2.x shell".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio
from pydantic import SecretStr

from bench.env import control_call
from roundtabled.core.server_records import SessionRef, TurnOutcome
from roundtabled.core.state import CONCLUDED_SUFFIX, OBSERVER_AGENT, Signer, decode_state
from roundtabled.core.validation import parse_request
from roundtabled.engine import v2_features
from roundtabled.engine.plugins import (
    HEARTBEAT_S,
    PLUGIN_VERSION_V2,
    PluginRegistry,
    parse_report,
)
from roundtabled.engine.settings import Settings
from roundtabled.engine.v2run import V2Runner
from roundtabled.errors import ValidationFailed
from roundtabled.offline.opencode_server import (
    OpenCodeServer,
    agent_prompts_of,
    free_port,
    offline_config,
)
from roundtabled.offline.scripted_actions import Text, ToolCall, ToolCalls
from roundtabled.offline.scripted_llm import ScriptedLLM, content_text
from roundtabled.opencode.events import Event
from roundtabled.opencode.port import STATE_KEY, V2Port, port_for
from roundtabled.opencode.v2 import v2_event_stream
from roundtabled.service import install
from roundtabled.service.config import load_settings
from roundtabled.service.daemon import Daemon
from tests.fakes.daemon_proc import DaemonProc
from tests.fakes.plugin_reports import PluginReports

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
    tap: list[Callable[[Event], list[Event]]]
    """At most one function through which the stream's events reach the runner (a test that
    drops or adds events); empty: each event as it comes."""
    reports: PluginReports
    """Where the plugin reports itself (into ``runner.plugins``)."""

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
    # the plugin (its context hook hides what S2's metadata lists and what the newest turn
    # prompt's marker says; it reports itself to `reports`) and the observer agent
    control_port = free_port()
    install.install_tools(
        root / server.directory_name / ".opencode",
        control_url=f"http://127.0.0.1:{control_port}",
        token_file=token,
        major=2,
    )
    await server.start()
    port = await port_for(server.url, password=server.password)
    assert isinstance(port, V2Port)
    signer = Signer(secrets.token_bytes(32))
    runner = V2Runner(port, signer, Settings(resync_period=2.0))
    reports = PluginReports(lambda: runner.plugins, token.read_text().strip(), control_port)
    await reports.start()
    connected = asyncio.Event()
    tap: list[Callable[[Event], list[Event]]] = []

    def on_event(ev: Event) -> None:
        if ev.type == "server.connected":
            connected.set()
        for each in tap[0](ev) if tap else [ev]:
            runner.on_event(each)

    stream = v2_event_stream(server.url, on_event, password=server.password)
    task = asyncio.create_task(stream.run())
    try:
        await asyncio.wait_for(connected.wait(), 15)
        yield Env(server, llm, port, runner, signer, tap, reports)
    finally:
        await reports.stop()
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


async def debate_counting_reads(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, dict[str, Any], list[tuple[str, TurnOutcome]], dict[tuple[str, int], str]]:
    """Run 3 seats × 2 rounds and the observer; returns S2, the result, every read of a turn's
    outcome in any session (``(session, outcome)``) and each seat's scripted reply."""
    reads: list[tuple[str, TurnOutcome]] = []
    read = env.port.turn_outcome

    async def counted(session: SessionRef, prompt_id: str) -> TurnOutcome:
        out = await read(session, prompt_id)
        reads.append((session.id, out))
        return out

    monkeypatch.setattr(env.port, "turn_outcome", counted)
    s1 = await env.parent()
    replies = {
        (seat, rnd): f"{seat.upper()} in round {rnd}: {ARGUMENTS[seat][rnd - 1]}.\n"
        "Position: flag — ship behind a flag (confidence 7/10)"
        for rnd in (1, 2)
        for seat in SEAT_MODELS
    }
    for rnd in (1, 2):
        for seat in SEAT_MODELS:
            env.llm.script(Text(text=replies[(seat, rnd)], chunk_size=8), agent=seat)
    env.llm.script(Text(text="SUMMARY: the seats agree on a flag."), agent=OBSERVER_AGENT)
    req = parse_request(
        {
            "agents": list(SEAT_MODELS),
            "rounds": 2,
            "prompt": "Which rollout?",
            "parentSessionID": s1,
        }
    )
    s2 = (await env.runner.start(req)).session_id
    result = await env.runner.wait_result(s2, 120)
    assert result is not None, "no result within 120 s"
    assert result["endReason"] == "completed", (result["endReason"], result["summary"])
    assert await env.runner.finalized(s2, 30)
    return s2, result, reads, replies


async def test_each_ended_turn_is_taken_from_the_event_stream_without_a_read(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 2.x shell decides each ended turn from its execution's events: no read of S2's
    messages finds a turn over (a read while a turn still runs, on the resync timer, may be);
    the transcript holds every reply whole."""
    s2, result, reads, replies = await debate_counting_reads(env, monkeypatch)
    over = [out for sid, out in reads if sid == s2 and out.over]
    assert over == [], f"{len(over)} ended turn(s) read instead of taken from the stream"
    state = env.runner.state_of(s2)
    assert state is not None
    said = {(e.agent, e.round): e.response for e in state.history if e.agent in SEAT_MODELS}
    assert said == {k: v for k, v in replies.items()}
    assert "SUMMARY: the seats agree on a flag." in result["summary"]


async def debate_recording_order(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, list[tuple[str, str]], list[str], dict[tuple[str, int], str], int]:
    """Run :func:`debate_counting_reads` recording each prompt and state write in the order
    they were made (``("prompt" | "prompt+state" | "write", prompt id)``: a prompt that carries
    the state naming it is ``prompt+state``); returns S2's id, them, the prompt ids, each seat's
    reply and how many model requests were made before the debate."""
    calls: list[tuple[str, str]] = []
    start_turn, write_state = env.port.start_turn, env.port.write_state

    async def prompted(session: SessionRef, *args: Any, **kw: Any) -> str:
        pid = await start_turn(session, *args, **kw)
        block = kw.get("state")
        if block is not None:
            state = decode_state(block.text, block.metadata, session.id, env.signer)
            assert state.pending is not None and state.pending.message_id == pid
        calls.append(("prompt+state" if block is not None else "prompt", pid))
        return pid

    async def written(session: SessionRef, block: Any, **kw: Any) -> None:
        state = decode_state(block.text, block.metadata, session.id, env.signer)
        # what a request can see: recorded before the call lands, so a write that lands
        # first is also recorded first
        calls.append(("write", state.pending.message_id if state.pending else ""))
        await write_state(session, block, **kw)

    monkeypatch.setattr(env.port, "start_turn", prompted)
    monkeypatch.setattr(env.port, "write_state", written)
    since = len(env.llm.requests)
    s2, _result, _reads, replies = await debate_counting_reads(env, monkeypatch)
    prompts = [pid for kind, pid in calls if kind.startswith("prompt")]
    assert len(prompts) == 7, calls  # 3 seats × 2 rounds and the observer
    return s2, calls, prompts, replies, since


def assert_seats_saw_no_earlier_prompt(
    env: Env, since: int, replies: dict[tuple[str, int], str]
) -> None:
    """Every seat request of the debate held the opening prompt and its own, no other earlier
    turn prompt and no state block, and the last one every earlier reply (context "full")."""
    seat_requests = [r for r in env.llm.requests[since:] if r.agent in SEAT_MODELS]
    assert len(seat_requests) == 6, [r.agent for r in seat_requests]
    for n, request in enumerate(seat_requests):
        assert "roundtabled" not in orjson.dumps(request.messages).decode().lower(), n
        users = [
            content_text(m.get("content")) for m in request.messages if m.get("role") == "user"
        ]
        assert len(users) == (1 if n == 0 else 2), (n, users)
        assert "Which rollout?" in users[0], users
    said = " | ".join(content_text(m.get("content")) for m in seat_requests[-1].messages)
    assert replies[("pm", 1)] in said and replies[("pm", 2)] in said


async def test_after_turn_one_each_seat_turn_state_rides_with_its_prompt(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the plugin's report trusted (it hides by the newest turn prompt's marker), turn 1's
    state is written to S2's metadata before its prompt (a restart needs a block to resume
    from); every later seat turn's prompt carries the state naming it in the same call and no
    separate write names it, so no write sits between a turn's end and the next prompt
    (docs/design.md, "The 2.x shell"); the observer's is written first (its request keeps
    replies the seats' lists drop). S2 gives each carried block back with its prompt, and the
    plugin still keeps every earlier seat prompt but the opening one out of each seat's
    request."""
    # the directory's instance loads the plugin (here at the latest), which then reports
    assert await v2_features.plugin_loaded(env.port, env.directory)
    trusted = await env.runner.plugins.wait_for(env.directory, 3 * HEARTBEAT_S)
    assert trusted == PLUGIN_VERSION_V2, (trusted, env.reports.refused)
    s2, calls, prompts, replies, since = await debate_recording_order(env, monkeypatch)
    for pid in (prompts[0], prompts[-1]):  # turn 1 and the observer's
        assert ("prompt", pid) in calls, calls
        assert calls.index(("write", pid)) < calls.index(("prompt", pid)), (pid, calls)
    for pid in prompts[1:-1]:
        assert ("prompt+state", pid) in calls, (pid, calls)
        assert ("write", pid) not in calls, (pid, calls)
    stored = {p.id: p.state for p in await env.port.prompts(SessionRef(s2, None))}
    for pid in prompts[1:-1]:
        block = stored[pid]
        assert block is not None, pid
        state = decode_state(block.text, block.metadata, s2, env.signer)
        assert state.pending is not None and state.pending.message_id == pid
    assert_seats_saw_no_earlier_prompt(env, since, replies)


async def test_without_a_trusted_report_of_the_marker_plugin_each_write_goes_first(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin reports a version the daemon does not speak, as a plugin older than the
    daemon would (one that does not report at all: the regression file
    test_an_older_2x_plugin_lets_no_earlier_turn_prompt_into_a_seat_s_request.py): the report is
    refused, so every turn's state (and the ids the plugin hides) is written before its prompt,
    and no seat's request holds an earlier turn prompt but the opening one."""
    assert await v2_features.plugin_loaded(env.port, env.directory)
    monkeypatch.setattr(env.runner.plugins, "speaks", PLUGIN_VERSION_V2 + "-newer")
    env.runner.plugins.forget()
    why = await env.reports.next_refusal(3 * HEARTBEAT_S)  # the next heartbeat's
    assert "the daemon speaks" in why, why
    assert env.runner.plugins.version_for(env.directory) is None
    _s2, calls, prompts, replies, since = await debate_recording_order(env, monkeypatch)
    for pid in prompts:
        assert calls.index(("write", pid)) < calls.index(("prompt", pid)), (pid, calls)
    assert_seats_saw_no_earlier_prompt(env, since, replies)


async def test_a_report_is_trusted_only_for_the_file_the_server_runs_as_the_plugin(
    env: Env,
) -> None:
    """The 2.x shell's check of a report (``GET /api/plugin`` of the directory): trusted when
    the active roundtabled plugin is the reported file; not for another file (a twin that failed
    as a duplicate, a copy elsewhere), nor a report naming none, nor another directory's."""
    listed = await env.port.client.plugins(env.directory)
    (active,) = [p for p in listed if p.id == "roundtabled" and p.status == "active"]
    assert active.path is not None

    async def trusted(body: dict[str, Any]) -> str | None:
        reg = PluginRegistry(lambda: 0, verify=env.runner._plugin_runs, speaks=PLUGIN_VERSION_V2)
        reg.register(parse_report({"version": PLUGIN_VERSION_V2, **body}, 0))
        await reg.checked()
        return reg.version_for(body["directory"])

    here = {"directory": env.directory}
    assert await trusted({**here, "file": active.path}) == PLUGIN_VERSION_V2
    assert await trusted({**here, "file": active.path + ".old"}) is None
    assert await trusted(here) is None
    elsewhere = str(env.server.root / "elsewhere")
    os.makedirs(elsewhere, exist_ok=True)
    assert await trusted({"directory": elsewhere, "file": active.path}) is None


async def test_a_location_reload_drops_the_plugin_s_report_until_the_new_instance_reports(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``POST /api/location/reload`` replaces the directory's instance and its plugin (which may
    now be another file): the daemon drops the report it trusted at the instance's
    ``location.shutdown`` and trusts the directory again only on the new instance's report,
    checked against the server (docs/plugin.md, "The context hook": the report)."""
    assert await v2_features.plugin_loaded(env.port, env.directory)
    assert await env.runner.plugins.wait_for(env.directory, 3 * HEARTBEAT_S) == PLUGIN_VERSION_V2
    dropped: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    forget = env.runner.plugins.forget

    def recorded(directory: str | None = None) -> None:
        forget(directory)
        if not dropped.done():
            dropped.set_result(directory)

    monkeypatch.setattr(env.runner.plugins, "forget", recorded)
    await env.port.client._request("POST", "/api/location/reload")
    gone = await asyncio.wait_for(dropped, 30)
    assert gone is not None and os.path.realpath(gone) == os.path.realpath(env.directory)
    assert env.runner.plugins.version_for(env.directory) is None
    assert await env.runner.plugins.wait_for(env.directory, 3 * HEARTBEAT_S) == PLUGIN_VERSION_V2


async def test_a_turn_whose_events_were_missed_is_read_and_recorded_whole(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text part's end missed (dev, round 1) and a reconnect in the middle of a turn (rv,
    round 2; events during a disconnection are not replayed): each of those two turns is read
    (the fallback), every other one taken from the stream, and the transcript is whole."""

    def tap(ev: Event) -> list[Event]:
        text = ev.properties.get("text") if ev.type == "session.text.ended" else None
        if isinstance(text, str) and text.startswith("DEV in round 1"):
            return []
        if isinstance(text, str) and text.startswith("RV in round 2"):
            return [Event("server.connected"), ev]
        return [ev]

    env.tap.append(tap)
    try:
        s2, _, reads, replies = await debate_counting_reads(env, monkeypatch)
    finally:
        env.tap.clear()
    over = [out for sid, out in reads if sid == s2 and out.over]
    assert [(o.agent, o.text) for o in over] == [
        ("dev", replies[("dev", 1)]),
        ("rv", replies[("rv", 2)]),
    ]
    state = env.runner.state_of(s2)
    assert state is not None
    said = {(e.agent, e.round): e.response for e in state.history if e.agent in SEAT_MODELS}
    assert said == {k: v for k, v in replies.items()}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"parentSessionID": None}, "parentSessionID"),
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


async def test_the_daemon_runs_a_roundtable_on_2x_through_its_control_api(
    env: Env, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`roundtabled serve` against 2.x: not refused; a start through the control API runs on
    the 2.x shell, the result comes back by the long poll, the status says finalized, and a dry
    run answers the plan."""
    home = tmp_path_factory.mktemp("v2daemon")
    settings = load_settings(
        {
            "server_url": env.server.url,
            "control_port": 0,
            "resync_period": 2.0,
            "directories": [env.directory],
        },
        env={
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / "cfg"),
            "XDG_STATE_HOME": str(home / "state"),
            "OPENCODE_SERVER_PASSWORD": str(env.server.password),
        },
    )
    daemon = Daemon(settings)
    task = asyncio.create_task(daemon.run())
    ready = asyncio.ensure_future(daemon.engine.ready.wait())
    done, _ = await asyncio.wait({ready, task}, timeout=30, return_when="FIRST_COMPLETED")
    assert ready in done, "the daemon was not ready on 2.x"
    assert daemon.major == 2 and daemon.refused is None
    s1 = await env.parent()
    since = len(env.llm.requests)
    for seat in ("pm", "dev"):
        env.llm.script(
            Text(text=f"{seat}: {ARGUMENTS[seat][0]}.\nPosition: flag — yes"), agent=seat
        )
    env.llm.script(Text(text="SUMMARY: ship it behind a flag."), agent=OBSERVER_AGENT)
    try:
        async with aiohttp.ClientSession() as http:
            url = str(daemon.control_address)

            async def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
                return await control_call(http, url, daemon.token, method, path, body, timeout=60)

            status, planned = await call(
                "POST",
                "/v1/roundtables",
                {"agents": ["pm", "dev"], "prompt": "Flag?", "parentSessionID": s1, "dryRun": True},
            )
            assert status == 200 and planned["dryRun"] is True, planned
            status, made = await call(
                "POST",
                "/v1/roundtables",
                {"agents": ["pm", "dev"], "rounds": 1, "prompt": "Flag?", "parentSessionID": s1},
            )
            assert status == 200, made
            s2 = made["sessionID"]
            result: dict[str, Any] = {}
            for _ in range(6):
                status, result = await call("GET", f"/v1/roundtables/{s2}/result?wait=20")
                assert status == 200, result
                if result.get("done"):
                    break
            assert result.get("done"), result
            assert result["endReason"] == "completed"
            assert "SUMMARY: ship it behind a flag." in result["summary"]
            assert daemon.v2 is not None and await daemon.v2.finalized(s2, 30)
            status, st = await call("GET", f"/v1/roundtables/{s2}")
            assert status == 200 and st["finalized"] and st["phase"] == "done", st
    finally:
        daemon.request_stop()
        assert await asyncio.wait_for(task, 30) == 0
    who = [(r.agent, r.model) for r in env.llm.requests[since:] if r.kind == "turn"]
    assert [a for a, _ in who] == ["pm", "dev", OBSERVER_AGENT], who


async def test_a_daemon_killed_mid_debate_is_resumed_from_s2_s_metadata(
    env: Env, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """(c) `kill -9` of the daemon while a seat's turn runs: a new daemon resumes the debate
    from the signed state in S2's metadata; no turn is sent twice (the model saw each seat once
    per round, the observer once) and the result comes back once, completed."""
    root = tmp_path_factory.mktemp("v2kill")
    dp = DaemonProc(root, env.server.url, env.directory, password=str(env.server.password))
    s1 = await env.parent()
    since = len(env.llm.requests)
    devs = len(env.llm.requests_for(agent="dev"))
    for rnd in (0, 1):
        for seat in ("pm", "dev"):
            reply = f"{seat}: {ARGUMENTS[seat][rnd]}.\nPosition: flag — yes"
            # dev's first turn is slow: the daemon is killed while it runs
            delay = 3.0 if (seat, rnd) == ("dev", 0) else 0.0
            env.llm.script(Text(text=reply, first_byte_delay=delay), agent=seat)
    env.llm.script(Text(text="SUMMARY: resumed and concluded."), agent=OBSERVER_AGENT)

    def turns() -> list[str | None]:
        return [r.agent for r in env.llm.requests[since:] if r.kind == "turn"]

    async with aiohttp.ClientSession() as http:
        try:
            await dp.start(http)

            async def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
                return await control_call(http, dp.url, dp.token, method, path, body, timeout=60)

            status, made = await call(
                "POST",
                "/v1/roundtables",
                {"agents": ["pm", "dev"], "rounds": 2, "prompt": "Flag?", "parentSessionID": s1},
            )
            assert status == 200, made
            s2 = made["sessionID"]
            await env.llm.wait_for_requests(devs + 1, 30, agent="dev")
            dp.proc.kill()  # SIGKILL while dev's turn runs on the server
            await dp.proc.wait()
            await dp.start(http)
            result: dict[str, Any] = {}
            for _ in range(6):
                status, result = await call("GET", f"/v1/roundtables/{s2}/result?wait=20")
                assert status == 200, result
                if result.get("done"):
                    break
            assert result.get("done"), (result, dp.log()[-3000:])
            assert result["endReason"] == "completed"
            assert "SUMMARY: resumed and concluded." in result["summary"]
            async with asyncio.timeout(30):
                while True:
                    status, st = await call("GET", f"/v1/roundtables/{s2}")
                    if st.get("finalized"):
                        break
                    await asyncio.sleep(0.1)
            assert st["phase"] == "done"
        finally:
            dp.kill_all()
    assert turns() == ["pm", "dev", "pm", "dev", OBSERVER_AGENT]
    assert "roundtable resumed after a restart" in dp.log()


async def test_the_roundtable_tool_of_the_2x_plugin_returns_the_result_to_the_orchestrator(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """(d) The real tool path: the orchestrator's model in S1 calls `roundtable` (the 2.x
    plugin as install-tool writes it, pointed at the daemon), the daemon runs the debate on
    2.x, and the model gets the result as the tool's result."""
    root = tmp_path_factory.mktemp("v2tool")
    home = root / "home"
    llm = ScriptedLLM()
    await llm.start(port=0)
    config = offline_config(
        llm.base_url,
        extra_agents={seat: {"model": f"scripted/{mid}"} for seat, mid in SEAT_MODELS.items()},
    )
    llm.agent_prompts.update(agent_prompts_of(config))
    server = OpenCodeServer(root, config, major=2)
    control_port = free_port()
    env_vars = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "cfg"),
        "XDG_STATE_HOME": str(home / "state"),
    }
    settings = load_settings(
        {
            "server_url": "http://127.0.0.1:9",  # set once the server is up
            "control_port": control_port,
            "resync_period": 2.0,
        },
        env=env_vars,
    )
    install.install_tools(
        root / server.directory_name / ".opencode",
        control_url=f"http://127.0.0.1:{control_port}",
        token_file=settings.token_file,
        major=2,
    )
    await server.start()
    settings = settings.model_copy(
        update={
            "server_url": server.url,
            "server_password": SecretStr(str(server.password)),
            "directories": (str(server.project_dir),),
        }
    )
    daemon = Daemon(settings)
    task = asyncio.create_task(daemon.run())
    port = await port_for(server.url, password=server.password)
    assert isinstance(port, V2Port)
    try:
        await asyncio.wait_for(daemon.engine.ready.wait(), 30)
        # the plugin reports itself to the daemon's control API, which trusts it once the
        # server lists it active for the directory (docs/plugin.md, "The context hook")
        assert daemon.v2 is not None
        directory = str(server.project_dir)
        # the directory's instance (and so the plugin) loads at its first location-scoped call
        assert await v2_features.plugin_loaded(port, directory)
        trusted = await daemon.v2.plugins.wait_for(directory, 3 * HEARTBEAT_S)
        assert trusted == PLUGIN_VERSION_V2, daemon.v2.plugins.snapshot()
        s1 = await port.client.create_session(directory=str(server.project_dir), agent="build")
        for seat in ("pm", "dev"):
            reply = f"{seat}: {ARGUMENTS[seat][0]}.\nPosition: flag — yes"
            llm.script(Text(text=reply), agent=seat)
        llm.script(Text(text="SUMMARY: the tool path works."), agent=OBSERVER_AGENT)
        llm.script(
            ToolCalls(
                calls=[
                    ToolCall(
                        name="roundtable",
                        arguments={"prompt": "Flag?", "agents": ["pm", "dev"], "rounds": 1},
                        id="call_v2rt",
                    )
                ]
            ),
            Text(text="relayed"),
            session=s1.id,
        )
        await port.client.prompt(s1.id, "hold a roundtable", message_id="msg_" + "a" * 26)
        found = await llm.wait_for_requests(2, 90, session=s1.id)
        followup = found[1]
        (result,) = [str(m.get("content")) for m in followup.messages if m.get("role") == "tool"]
        assert "SUMMARY: the tool path works." in result, result
        assert '"endReason": "completed"' in result
    finally:
        daemon.request_stop()
        await asyncio.wait_for(task, 30)
        await port.close()
        await server.stop()
        await llm.stop()


async def test_a_cancel_interrupts_the_running_turn_and_ends_the_roundtable(env: Env) -> None:
    """A cancel while a seat's turn runs: the turn is interrupted on the server, recorded as cut
    off by the cancel, no later turn is prompted, and the result says cancelled."""
    s1 = await env.parent()
    since = len(env.llm.requests)
    pms = len(env.llm.requests_for(agent="pm"))
    env.llm.script(Text(text="pm: slow", first_byte_delay=30.0), agent="pm")
    req = parse_request({"agents": ["pm", "dev"], "prompt": "Flag?", "parentSessionID": s1})
    state = await env.runner.start(req)
    s2 = state.session_id
    await env.llm.wait_for_requests(pms + 1, 30, agent="pm")
    await env.runner.cancel(s2, summarize=False, reason="cancelled by the user")
    result = await env.runner.wait_result(s2, 60)
    assert result is not None and result["endReason"] == "cancelled", result
    assert await env.runner.finalized(s2, 30)
    assert [r.agent for r in env.llm.requests[since:] if r.kind == "turn"] == ["pm"]
    assert s2 not in await env.port.client.active()


async def test_s2_deleted_mid_debate_ends_it_without_writing_into_s2(env: Env) -> None:
    """S2 deleted while a seat's turn runs (2.x interrupts it first): the roundtable ends as
    deleted, its result is released, and nothing is written into the deleted S2."""
    s1 = await env.parent()
    pms = len(env.llm.requests_for(agent="pm"))
    env.llm.script(Text(text="pm: slow", first_byte_delay=30.0), agent="pm")
    req = parse_request({"agents": ["pm", "dev"], "prompt": "Flag?", "parentSessionID": s1})
    s2 = (await env.runner.start(req)).session_id
    await env.llm.wait_for_requests(pms + 1, 30, agent="pm")
    await env.port.client.delete_session(s2)
    result = await env.runner.wait_result(s2, 60)
    assert result is not None and result["endReason"] == "session-deleted", result
    assert await env.runner.finalized(s2, 30)


async def test_roundtabled_start_on_2x_shows_the_turns_and_the_verdict(
    env: Env, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`roundtabled start` against a daemon on 2.x: the progress feed shows each seat's turn,
    then the verdict, exit 0 (the feed answered 501 before, and the turns were not shown)."""
    root = tmp_path_factory.mktemp("v2cli")
    dp = DaemonProc(root, env.server.url, env.directory, password=str(env.server.password))
    s1 = await env.parent()
    for seat in ("pm", "dev"):
        reply = (
            f"{seat}: {ARGUMENTS[seat][0]}.\nPosition: flag — ship behind a flag (confidence 8/10)"
        )
        env.llm.script(Text(text=reply), agent=seat)
    env.llm.script(Text(text="SUMMARY: ship behind a flag."), agent=OBSERVER_AGENT)
    async with aiohttp.ClientSession() as http:
        try:
            await dp.start(http)
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "roundtabled",
                "start",
                "--parent",
                s1,
                "--agents",
                "pm,dev",
                "--rounds",
                "1",
                "Ship the payments change behind a flag?",
                env=dp.env(None),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(proc.communicate(), 120)
        finally:
            dp.kill_all()
    stdout, stderr = out.decode(), err.decode()
    assert proc.returncode == 0, (stdout, stderr, dp.log()[-3000:])
    assert "does not stream" not in stderr and "not supported" not in stderr, stderr
    for seat in ("pm", "dev"):
        assert f"{seat}: {ARGUMENTS[seat][0]}." in stdout, stdout
    assert "Status: completed, 1/1 rounds" in stdout, stdout
    assert "── verdict ──" in stdout, stdout
