"""Contract: the roundtabled plugin for OpenCode 2.x as ``roundtabled install-tool --opencode 2``
writes it (roundtabled/tools/v2/index.ts, docs/plugin.md "OpenCode 2.x"), on the real 2.x binary
pinned in opencode-v2/. Only the model is scripted.

The plugin's side of the contract is pinned apart from the daemon (which drives 2.x end to end
in tests/e2e/test_v2_*.py), so the control API is a loopback stand-in here
(:class:`ControlStandIn`): it answers ``GET /v1/agents``, ``POST /v1/roundtables``,
``GET /v1/roundtables/{id}/result`` and ``POST /v1/roundtables/{id}/cancel`` as the daemon does
(docs/control-api.md) and records what the tools sent. One server per module; each test works in
sessions of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from roundtabled.engine.plugins import HEARTBEAT_S, PLUGIN_VERSION_V2
from roundtabled.offline.opencode_server import OpenCodeServer, agent_prompts_of, offline_config
from roundtabled.offline.scripted_actions import Text, ToolCall, ToolCalls
from roundtabled.offline.scripted_llm import RecordedRequest, ScriptedLLM
from roundtabled.opencode.events import Event
from roundtabled.opencode.v2 import V2Client, reply_of, tool_call_of, turn_end, v2_event_stream
from roundtabled.service import install
from tests.contract.v2_env import V2Env

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120), pytest.mark.e2e]

TOKEN = "standin-token"
OLDER_PLUGIN = Path(__file__).parent.parent / "fixtures" / "v2_plugin_lists_only" / "index.ts"
"""The 2.x plugin as shipped before it reported itself and hid by the turn prompts' markers."""
AGENTS_TEXT = "Available agents: dev, pm, rv"


@dataclass
class ControlStandIn:
    """The daemon's control API, as far as the two tools use it; records each request as
    ``(method, path_qs, authorization, json body or None)``."""

    seen: list[tuple[str, str, str | None, Any]] = field(default_factory=list)
    results: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    runner: web.AppRunner | None = None
    url: str = ""
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def _record(self, request: web.Request) -> None:
        body = await request.json() if request.can_read_body else None
        self.seen.append(
            (request.method, request.path_qs, request.headers.get("authorization"), body)
        )
        async with self.arrived:
            self.arrived.notify_all()

    async def wait_for(
        self, method: str, prefix: str, count: int, within: float = 30.0
    ) -> list[tuple[str, str, str | None, Any]]:
        """The recorded requests of ``method`` whose path starts with ``prefix``, once there are
        at least ``count`` (waits up to ``within`` seconds for them)."""
        async with asyncio.timeout(within), self.arrived:
            await self.arrived.wait_for(lambda: len(self.requests(method, prefix)) >= count)
        return self.requests(method, prefix)

    async def agents(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response({"text": AGENTS_TEXT})

    async def create(self, request: web.Request) -> web.Response:
        await self._record(request)
        ses = "ses_standin" + secrets.token_hex(6)
        self.results[ses] = asyncio.get_running_loop().create_future()
        return web.json_response({"sessionID": ses})

    async def result(self, request: web.Request) -> web.Response:
        await self._record(request)
        fut = self.results[request.match_info["ses"]]
        try:
            # the daemon's long-poll: answer "still running" after the wait, the result at once
            done = await asyncio.wait_for(asyncio.shield(fut), 20)
        except TimeoutError:
            return web.json_response({"done": False})
        return web.json_response(done)

    async def cancel(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response({"ok": True})

    async def plugin(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response({"accepted": True})

    def requests(self, method: str, prefix: str) -> list[tuple[str, str, str | None, Any]]:
        return [s for s in self.seen if s[0] == method and s[1].startswith(prefix)]

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/v1/agents", self.agents)
        app.router.add_post("/v1/roundtables", self.create)
        app.router.add_get("/v1/roundtables/{ses}/result", self.result)
        app.router.add_post("/v1/roundtables/{ses}/cancel", self.cancel)
        app.router.add_post("/v1/plugin", self.plugin)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        for fut in self.results.values():
            if not fut.done():
                fut.cancel()
        if self.runner is not None:
            await self.runner.cleanup()


@dataclass
class PluginEnv:
    v2: V2Env
    control: ControlStandIn
    installed: list[Path]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[PluginEnv]:
    root = tmp_path_factory.mktemp("v2plugin")
    control = ControlStandIn()
    await control.start()
    token = root / "token"
    token.write_text(TOKEN + "\n")
    llm = ScriptedLLM()
    await llm.start(port=0)
    config = offline_config(llm.base_url)
    llm.agent_prompts.update(agent_prompts_of(config))
    server = OpenCodeServer(root, config, major=2)
    installed = install.install_tools(
        root / server.directory_name / ".opencode",
        control_url=control.url,
        token_file=token,
        major=2,
    )
    await server.start()
    v2 = V2Env(server=server, llm=llm, client=V2Client(server.url, password=server.password))

    def on_event(ev: Event) -> None:
        if ev.type == "server.connected":
            v2.connected.set()
        v2.events.append(ev)

    v2.stream = v2_event_stream(server.url, on_event, password=server.password)
    v2.task = asyncio.create_task(v2.stream.run())
    try:
        await asyncio.wait_for(v2.connected.wait(), 15)
        yield PluginEnv(v2=v2, control=control, installed=installed)
    finally:
        v2.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await v2.task
        await v2.client.close()
        await server.stop()
        await llm.stop()
        await control.stop()


def msg_id() -> str:
    return "msg_" + secrets.token_hex(13)


async def run_turn(v2: V2Env, session_id: str, text: str, **prompt: Any) -> tuple[str, Any]:
    """Prompt ``session_id``, wait for its end of turn; returns the prompt id and the idle
    record."""
    since = len(v2.events)
    mid = msg_id()
    await v2.client.prompt(session_id, text, message_id=mid, **prompt)
    await v2.wait_event(
        lambda e: turn_end(e) is not None and e.session_id == session_id, since=since
    )
    return mid, reply_of(await v2.client.all_messages(session_id), mid)


def tool_results(req: RecordedRequest) -> list[str]:
    return [str(m.get("content")) for m in req.messages if m.get("role") == "tool"]


def texts(req: RecordedRequest) -> list[str]:
    return [str(m.get("content")) for m in req.messages if m.get("role") != "system"]


async def test_install_writes_the_2x_layout_and_the_plugin_loads_active(env: PluginEnv) -> None:
    target = env.v2.server.project_dir / ".opencode"
    assert [p.relative_to(target).as_posix() for p in env.installed] == [
        "roundtabled/control.ts",
        "roundtabled/roundtable.ts",
        "roundtabled/available_agents.ts",
        "agents/roundtable-observer.md",
        "plugins/roundtabled/index.ts",
        "plugins/roundtabled/tui.ts",
    ]
    assert not (target / "tool").exists() and not (target / "plugin").exists()
    plugins = {p.id: p for p in await env.v2.client.plugins(env.v2.directory)}
    assert plugins[install.V2_PLUGIN_ID].status == "active", plugins.get(install.V2_PLUGIN_ID)
    assert not env.v2.server.npm_install_ran()
    # the observer agent from agents/ is listed, hidden
    agents = {a.id: a for a in await env.v2.client.agents(env.v2.directory)}
    assert "roundtable-observer" in agents


async def test_available_agents_reaches_the_control_api_and_answers_the_model(
    env: PluginEnv,
) -> None:
    c, llm = env.v2.client, env.v2.llm
    s1 = await c.create_session(directory=env.v2.directory, agent="build")
    llm.script(
        ToolCalls(calls=[ToolCall(name="available_agents", arguments={})]),
        Text(text="done"),
        session=s1.id,
    )
    before = len(env.control.requests("GET", "/v1/agents"))
    _, (_, idle) = await run_turn(env.v2, s1.id, "which agents can debate?")
    assert idle is not None and idle.outcome == "succeeded"
    first, followup = llm.requests_for(session=s1.id)
    # both tools reach the model as plain tools (codemode: false), not only inside `execute`
    assert {"roundtable", "available_agents"} <= set(first.tools)
    assert tool_results(followup) == [AGENTS_TEXT]
    (_, path, auth, _) = env.control.requests("GET", "/v1/agents")[before]
    assert auth == f"Bearer {TOKEN}"
    assert path.endswith("directory=" + env.v2.directory.replace("/", "%2F"))


async def test_roundtable_sends_s1_and_returns_the_daemons_output(env: PluginEnv) -> None:
    c, llm = env.v2.client, env.v2.llm
    s1 = await c.create_session(directory=env.v2.directory, agent="build")
    llm.script(
        ToolCalls(
            calls=[
                ToolCall(
                    name="roundtable",
                    arguments={"prompt": "cats or dogs?", "agents": ["pm", "dev"]},
                    id="call_rt1",
                )
            ]
        ),
        Text(text="relayed"),
        session=s1.id,
    )
    before = len(env.control.requests("POST", "/v1/roundtables"))
    since = len(env.v2.events)
    mid = msg_id()
    await c.prompt(s1.id, "hold a roundtable", message_id=mid)
    (_, _, auth, body) = (await env.control.wait_for("POST", "/v1/roundtables", before + 1))[before]
    assert auth == f"Bearer {TOKEN}"
    assert body["prompt"] == "cats or dogs?" and body["agents"] == ["pm", "dev"]
    assert body["parentSessionID"] == s1.id  # S1: the session whose model called the tool
    assert body["directory"] == env.v2.directory
    assert body["toolCallID"] == "call_rt1"
    ses = next(reversed(env.control.results))
    env.control.results[ses].set_result(
        {"done": True, "output": '{"summary": "dogs"}', "endReason": "completed"}
    )
    await env.v2.wait_event(
        lambda e: turn_end(e) is not None and e.session_id == s1.id, since=since
    )
    followup = llm.requests_for(session=s1.id)[-1]
    assert tool_results(followup) == ['{"summary": "dogs"}']


async def test_the_tool_part_in_s1_holds_the_result_and_its_delivery_mark(env: PluginEnv) -> None:
    """What phase 4 reads in S1 to decide the delivery (docs/design.md, "The 2.x shell"): the
    tool's ``messageID`` (sent as ``toolMessageID``) names the assistant record whose content
    holds the call's part; while the tool waits the part is ``running`` and S1 is listed in
    ``GET /api/session/active``; once it returns, the part is ``completed`` with the result's
    text and the metadata the shim returned (the daemon's signed ``deliveryMark`` under
    ``roundtabled``) stored beside it."""
    c, llm = env.v2.client, env.v2.llm
    s1 = await c.create_session(directory=env.v2.directory, agent="build")
    llm.script(
        ToolCalls(
            calls=[
                ToolCall(
                    name="roundtable",
                    arguments={"prompt": "tea or coffee?", "agents": ["pm", "dev"]},
                    id="call_mark1",
                )
            ]
        ),
        Text(text="relayed"),
        session=s1.id,
    )
    before = len(env.control.requests("POST", "/v1/roundtables"))
    since = len(env.v2.events)
    await c.prompt(s1.id, "hold a roundtable", message_id=msg_id())
    (_, _, _, body) = (await env.control.wait_for("POST", "/v1/roundtables", before + 1))[before]
    record_id = body["toolMessageID"]
    ses = next(reversed(env.control.results))
    await env.control.wait_for("GET", f"/v1/roundtables/{ses}/result", 1)
    assert tool_call_of(await c.message(s1.id, record_id), "call_mark1")[0] == "running"
    assert s1.id in await c.active()
    mark = {"kind": "result", "roundtable": ses, "mac": "m" * 64}
    output = '{"summary": "tea", "sessionID": "' + ses + '"}'
    env.control.results[ses].set_result(
        {"done": True, "output": output, "endReason": "completed", "deliveryMark": mark}
    )
    await env.v2.wait_event(
        lambda e: turn_end(e) is not None and e.session_id == s1.id, since=since
    )
    status, text, metadata = tool_call_of(await c.message(s1.id, record_id), "call_mark1")
    assert (status, text) == ("completed", output)
    assert metadata["roundtabled"] == mark
    assert metadata["sessionID"] == ses and metadata["endReason"] == "completed"
    assert s1.id not in await c.active()


async def test_roundtable_refuses_bad_arguments_before_the_daemon(env: PluginEnv) -> None:
    # Two checks: 2.x validates the input against the tool's JSON Schema (the same bounds as the
    # 1.x shim's arguments), and the shim's own checks run behind it (here: a sessionID).
    c, llm = env.v2.client, env.v2.llm
    s1 = await c.create_session(directory=env.v2.directory, agent="build")
    llm.script(
        ToolCalls(
            calls=[
                ToolCall(
                    name="roundtable",
                    arguments={"prompt": "x", "agents": ["pm", "dev"], "rounds": 0},
                ),
                ToolCall(name="roundtable", arguments={"prompt": "x", "sessionID": "nope"}),
            ]
        ),
        Text(text="ok"),
        session=s1.id,
    )
    before = len(env.control.seen)
    await run_turn(env.v2, s1.id, "go")
    schema, shim = tool_results(llm.requests_for(session=s1.id)[-1])
    assert '"type":"tool.execution"' in schema
    assert "rounds: Expected a value greater than or equal to 1" in schema
    assert shim == (
        'Error: sessionID must look like "ses_…" (the sessionID an earlier roundtable '
        'returned), got "nope"'
    )
    assert env.control.seen[before:] == []


async def test_interrupting_s1_cancels_the_running_roundtable(env: PluginEnv) -> None:
    c, llm = env.v2.client, env.v2.llm
    s1 = await c.create_session(directory=env.v2.directory, agent="build")
    llm.script(
        ToolCalls(
            calls=[ToolCall(name="roundtable", arguments={"prompt": "p", "agents": ["pm", "dev"]})]
        ),
        session=s1.id,
    )
    before = len(env.control.requests("GET", "/v1/roundtables/"))
    await c.prompt(s1.id, "start one", message_id=msg_id())
    await env.control.wait_for("GET", "/v1/roundtables/", before + 1)  # the tool's long-poll
    ses = next(reversed(env.control.results))
    assert await c.interrupt(s1.id) is True
    ((_, _, _, body),) = await env.control.wait_for("POST", f"/v1/roundtables/{ses}/cancel", 1)
    assert body == {"summarize": False, "reason": "the orchestrator's session was aborted"}


async def test_the_hook_drops_what_the_session_metadata_lists_reply_included(
    env: PluginEnv,
) -> None:
    c, llm = env.v2.client, env.v2.llm
    seat = await c.create_session(directory=env.v2.directory, agent="pm")
    llm.script(Text(text="SECRET reply"), session=seat.id)
    first, (reply, _) = await run_turn(env.v2, seat.id, "SECRET question")
    await c.prompt(
        seat.id,
        "MARKED state block",
        message_id=msg_id(),
        metadata={"roundtabled": {"hidden": True}},
        resume=False,
    )
    await c.update_session(seat.id, metadata={"roundtabled": {"hidden": [first, reply[0].id]}})
    await run_turn(env.v2, seat.id, "next question")
    last = llm.requests_for(session=seat.id)[-1]
    assert any("next question" in t for t in texts(last))
    assert not any("SECRET" in t or "MARKED" in t for t in texts(last)), texts(last)
    # the history keeps everything
    stored = [getattr(r, "text", "") for r in await c.all_messages(seat.id)]
    assert {"SECRET question", "SECRET reply", "MARKED state block"} <= set(stored)


def _marker(session_id: str, kind: str, rnd: int, seat: int, **extra: Any) -> dict[str, Any]:
    """A turn prompt's marker metadata as the daemon writes it (the plugin reads, never
    verifies, the signature: a forged one can only hide more of its own session)."""
    body = {"kind": kind, "round": rnd, "seat": seat, "roundtable": session_id, **extra}
    return {"roundtabled": {**body, "v": 1, "mac": "x"}}


async def test_the_hook_drops_by_the_newest_turn_prompt_s_marker_with_nothing_listed(
    env: PluginEnv,
) -> None:
    """No id in S2's metadata (the daemon's state write not landed yet): the newest turn
    prompt's marker alone leaves out every earlier turn prompt but the opening one, every
    earlier observer prompt with its reply, and the seat turns of its ``hide`` span with their
    replies (docs/plugin.md, "The context hook")."""
    c, llm = env.v2.client, env.v2.llm
    seat = await c.create_session(directory=env.v2.directory, agent="pm")
    sid = seat.id
    plugin = {"view": "plugin"}
    for text, reply, meta in [
        ("OPENING topic", "OPENING answer", _marker(sid, "turn", 0, 0, **plugin)),
        ("SPAN prompt", "SPAN answer", _marker(sid, "turn", 0, 1, **plugin)),
        ("OLD prompt", "KEPT answer", _marker(sid, "turn", 1, 0, **plugin)),
        ("VERDICT request", "VERDICT answer", _marker(sid, "observer", 1, -1, **plugin)),
        ("NOTE from a person", "NOTE answer", {}),
        ("OTHER roundtable", "OTHER answer", _marker("ses_other", "turn", 1, 1, **plugin)),
    ]:
        llm.script(Text(text=reply), session=sid)
        await run_turn(env.v2, sid, text, metadata=meta)
    llm.script(Text(text="head answer"), session=sid)
    await run_turn(
        env.v2,
        sid,
        "HEAD question",
        metadata=_marker(sid, "turn", 2, 0, view="plugin", hide=[0, 0]),
    )
    seen = " | ".join(texts(llm.requests_for(session=sid)[-1]))
    for kept in (
        "OPENING topic",
        "OPENING answer",
        "KEPT answer",
        "NOTE from a person",
        "NOTE answer",
        "OTHER roundtable",
        "HEAD question",
    ):
        assert kept in seen, (kept, seen)
    for dropped in ("SPAN prompt", "SPAN answer", "OLD prompt", "VERDICT"):
        assert dropped not in seen, (dropped, seen)

    # A newest marker without the plugin view (hiding off) leaves every message in.
    llm.script(Text(text="patch answer"), session=sid)
    await run_turn(env.v2, sid, "PATCH question", metadata=_marker(sid, "turn", 2, 1))
    seen = " | ".join(texts(llm.requests_for(session=sid)[-1]))
    assert "OLD prompt" in seen and "VERDICT request" in seen, seen


@pytest.mark.parametrize(
    "metadata",
    [
        {"roundtabled": {"hidden": "msg_not_a_list"}},
        {"roundtabled": {"hidden": [3, None, {"id": "x"}]}},
        {"roundtabled": "hidden"},
        {"roundtabled": None},
    ],
    ids=["string", "odd-items", "not-an-object", "null"],
)
async def test_malformed_metadata_never_fails_a_request(
    env: PluginEnv, metadata: dict[str, Any]
) -> None:
    c, llm = env.v2.client, env.v2.llm
    seat = await c.create_session(directory=env.v2.directory, agent="pm", metadata=metadata)
    await c.prompt(seat.id, "KEPT note", message_id=msg_id(), metadata=metadata, resume=False)
    _, (_, idle) = await run_turn(env.v2, seat.id, "question")
    assert idle is not None and idle.outcome == "succeeded"
    (req,) = llm.requests_for(session=seat.id)
    assert any("KEPT note" in t for t in texts(req))
    assert any("question" in t for t in texts(req))


async def _cli(*args: str, cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "roundtabled",
        *args,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _cli_env(env: PluginEnv, home: Path) -> dict[str, str]:
    server = env.v2.server
    out = {k: v for k, v in os.environ.items() if not k.startswith(("ROUNDTABLED_", "XDG_"))}
    out.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        ROUNDTABLED_SERVER_URL=server.url,
        ROUNDTABLED_SERVER_PASSWORD=server.password or "",
        ROUNDTABLED_URL=env.control.url,
    )
    return out


async def test_install_tool_detects_2x_and_names_the_1x_files(
    env: PluginEnv, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    cli_env = _cli_env(env, tmp_path / "home")
    rc, out, err = await _cli("install-tool", "--opencode", "1", cwd=project, env=cli_env)
    assert (rc, out) == (2, ""), err  # contradicts the server's major: nothing written
    assert err.startswith("Error: --opencode 1 contradicts the server at ")
    assert not (project / ".opencode").exists()
    force = ("install-tool", "--opencode", "1", "--force")
    rc, out, err = await _cli(*force, cwd=project, env=cli_env)
    assert rc == 0, err
    assert out.splitlines()[0].startswith("Installing for OpenCode 1.x (--opencode 1); note: ")
    assert "is OpenCode 2.1.2" in out.splitlines()[0]
    rc, out, err = await _cli("install-tool", cwd=project, env=cli_env)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == (
        f"Installing for OpenCode 2.x (detected: OpenCode 2.1.2 at {env.v2.server.url}; "
        "for the other major give --opencode 1)"
    )
    assert (project / ".opencode" / "plugins" / "roundtabled" / "index.ts").is_file()
    assert lines[-1].startswith(f"Note: {project / '.opencode'} also holds the OpenCode 1.x files")
    assert "--opencode 1" in lines[-1]


async def test_the_plugin_reports_its_version_and_directory_to_the_control_api(
    env: PluginEnv,
) -> None:
    """Loaded into a directory's instance, the plugin reports itself (``POST /v1/plugin`` with
    the daemon's token) with the 2.x plugin protocol the daemon speaks, which the shipped file
    declares as install-tool reads it (docs/plugin.md, "The context hook"), and again at its
    heartbeat."""
    directory = env.v2.directory
    listed = await env.v2.client.plugins(directory)  # the directory's instance is loaded
    assert any(p.id == "roundtabled" and p.status == "active" for p in listed)
    reports = await env.control.wait_for("POST", "/v1/plugin", 2, within=3 * HEARTBEAT_S)
    for _method, _path, auth, body in reports[:2]:
        assert auth == f"Bearer {TOKEN}"
        assert body["version"] == PLUGIN_VERSION_V2, body
        assert os.path.realpath(body["directory"]) == os.path.realpath(directory), body
        assert set(body) == {"version", "directory", "file"}, body
        # the file the server lists as the active plugin's source (the daemon checks it)
        (active,) = [p for p in listed if p.id == "roundtabled" and p.status == "active"]
        assert body["file"] == active.path, (body, active.source)
    shipped = (Path(install.__file__).parent.parent / "tools" / "v2" / "index.ts").read_text()
    assert install.plugin_version(shipped) == PLUGIN_VERSION_V2


async def test_doctor_on_2x_names_install_tool_for_an_older_2x_plugin(
    env: PluginEnv, tmp_path: Path
) -> None:
    """The 2.x plugin from before it reported itself (it hides only what S2's metadata lists)
    loads and runs; doctor's plugin check says it is older than the daemon speaks, naming
    ``roundtabled install-tool``, and exits 1."""
    project = tmp_path / "proj"
    project.mkdir()
    cli_env = _cli_env(env, tmp_path / "home")
    rc, _, err = await _cli("install-tool", "--opencode", "2", cwd=project, env=cli_env)
    assert rc == 0, err
    plugin = project / ".opencode" / install.V2_PLUGIN_DIR / install.V2_PLUGIN_FILE
    rc, out, err = await _cli("doctor", cwd=project, env=cli_env)
    # the stand-in is no daemon (no /v1/ping): only that check fails
    assert rc == 1 and "1 problem(s): daemon" in out, (out, err)
    plugin.write_text(OLDER_PLUGIN.read_text())
    rc, out, err = await _cli("doctor", cwd=project, env=cli_env)
    assert rc == 1, (out, err)
    assert "driven by the 2.x shell" in out
    (line,) = [x for x in out.splitlines() if x.split()[1:2] == ["plugin"]]
    assert line.startswith("✗") and line.endswith(
        f"{plugin} is an earlier version, the daemon speaks {PLUGIN_VERSION_V2!r}: until then "
        "each seat turn's state is written before its prompt"
    )
    assert "fix: roundtabled install-tool --opencode 2 --project" in out


async def test_doctor_on_2x_names_install_tool_when_only_1x_files_are_there(
    env: PluginEnv, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    cli_env = _cli_env(env, tmp_path / "home")
    force = ("install-tool", "--opencode", "1", "--force")
    rc, _, err = await _cli(*force, cwd=project, env=cli_env)
    assert rc == 0, err
    rc, out, err = await _cli("doctor", cwd=project, env=cli_env)
    assert rc == 2
    # the server is driven by the 2.x shell; the 1.x files are of no use to it
    assert out.strip().startswith("OpenCode 2.1.2 at ") and "driven by the 2.x shell" in out
    (second,) = [line for line in err.strip().splitlines() if not line.startswith("warning:")]
    assert second == (
        f"Error: {project / '.opencode'} holds roundtabled's files for OpenCode 1.x only, but the "
        f"server is OpenCode 2.x, which does not load them: run roundtabled install-tool "
        f"--project {project} --opencode 2"
    )


async def test_a_global_install_loads_and_a_project_twin_is_a_duplicate(tmp_path: Path) -> None:
    # A server of its own: the global plugin applies to every project of its server.
    server = OpenCodeServer(tmp_path, offline_config("http://127.0.0.1:9/v1"), major=2)
    token = tmp_path / "token"
    install.install_tools(
        server.global_config_dir, control_url="http://127.0.0.1:4747", token_file=token, major=2
    )
    await server.start()
    try:
        async with V2Client(server.url, password=server.password) as c:
            alone = [p for p in await c.plugins(str(server.project_dir)) if p.id == "roundtabled"]
            assert [p.status for p in alone] == ["active"]
            both = await server.add_project("both")
            install.install_tools(
                both / ".opencode", control_url="http://127.0.0.1:4747", token_file=token, major=2
            )
            line = install.duplicate_plugin_line(both / ".opencode", server.global_config_dir, 2)
            assert line is not None and "`Duplicate plugin ID: roundtabled`" in line
            twins = {
                str(p.source.get("path")): p
                for p in await c.plugins(str(both))
                if p.id == "roundtabled"
            }
            glob = str(server.global_config_dir / "plugins/roundtabled/index.ts")
            proj = str(both / ".opencode/plugins/roundtabled/index.ts")
            assert twins[glob].status == "active"
            assert twins[proj].status == "failed"
            assert twins[proj].state.get("error") == "Duplicate plugin ID: roundtabled"
    finally:
        await server.stop()


async def test_a_1x_server_loads_the_1x_install_only_beside_the_2x_plugin(tmp_path: Path) -> None:
    # Both installs in one directory: 1.x loads top-level plugin files only, so the 2.x plugin
    # (plugins/roundtabled/index.ts) is not loaded and breaks nothing.
    server = OpenCodeServer(tmp_path, offline_config("http://127.0.0.1:9/v1"), password="pw1")
    target = tmp_path / server.directory_name / ".opencode"
    for major in (2, 1):
        install.install_tools(
            target, control_url="http://127.0.0.1:4747", token_file=tmp_path / "tok", major=major
        )
    await server.start()
    try:
        params = {"directory": str(server.project_dir)}
        async with server.client() as http:
            async with http.get(server.url + "/experimental/tool/ids", params=params) as resp:
                assert resp.status == 200
                tools = await resp.json()
            async with http.get(server.url + "/config", params=params) as resp:
                plugins = (await resp.json()).get("plugin", [])
        assert {"roundtable", "available_agents"} <= set(tools)
        assert [p.rsplit("/.opencode/", 1)[-1] for p in plugins] == ["plugin/roundtable-plugin.ts"]
    finally:
        await server.stop()
