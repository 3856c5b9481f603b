"""The tool shims (``roundtable``, ``available_agents``) inside the REAL ``opencode serve``.

The daemon is replaced by :class:`FakeControl`, a tiny token-protected aiohttp app implementing just
the routes the shims call (docs/control-api.md), so these tests pin the shim's side of the
contract: what it sends, how it waits, how it reports problems, and that OpenCode loads it at all —
also in a project where OpenCode's npm install of ``@opencode-ai/plugin`` cannot run.

On both majors (``--opencode-major 2``: the same shims, loaded by the 2.x plugin that
``install-tool --opencode 2`` writes); :func:`new_session`, :func:`say`, :func:`tool_parts` and
:func:`agent_info` read and drive either server, and :class:`Part` is a tool part as both store
it. The tests that pin a 1.x-only mechanism are marked ``only_1x`` with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from roundtabled.offline.opencode_server import OpenCodeServer, free_port
from roundtabled.offline.scripted_actions import Text, tool_call
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.opencode import v2
from roundtabled.service import install
from tests.conftest import OpenCodeFactory

pytestmark = pytest.mark.both_majors  # also under --opencode-major 2 (tests/conftest.py)

TOKEN = "test-token-0123456789"
FAKE_SES = "ses_fakeRoundtable0001"
AGENTS_TEXT = "Available agents: build, dev, plan, pm, rv"
BODY = web.RequestKey("body", dict[str, Any])
SUMMARY = "The pm and the dev agreed to ship the smaller scope first."


@dataclass
class FakeControl:
    """A stand-in for roundtabled's control API. ``result_mode``: ``"done"`` answers the first
    result poll with the summary; ``"hang"`` keeps answering ``done: false`` after each long poll.
    """

    result_mode: str = "done"
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    created: list[dict[str, Any]] = field(default_factory=list)
    cancels: list[dict[str, Any]] = field(default_factory=list)
    polls: list[dict[str, str]] = field(default_factory=list)
    unauthorized: int = 0
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    polling: asyncio.Event = field(default_factory=asyncio.Event)
    runner: web.AppRunner | None = None
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            body = json.loads(raw) if raw else None
        self.requests.append((request.method, request.path_qs, body))
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.unauthorized += 1
            return web.json_response({"error": "Error: missing or wrong token"}, status=401)
        request[BODY] = body if isinstance(body, dict) else {}
        return await handler(request)  # type: ignore[no-any-return]

    async def agents(self, request: web.Request) -> web.Response:
        return web.json_response({"agents": [], "text": AGENTS_TEXT})

    async def create(self, request: web.Request) -> web.Response:
        self.created.append(request[BODY])
        return web.json_response(
            {"sessionID": FAKE_SES, "phase": "debating", "title": "t", "extended": False}
        )

    async def result(self, request: web.Request) -> web.Response:
        self.polls.append(dict(request.query))
        self.polling.set()
        if self.result_mode == "done":
            return web.json_response(
                {
                    "done": True,
                    "sessionID": request.match_info["ses"],
                    "summary": SUMMARY,
                    "text": "…",
                    "phase": "concluded",
                    "endReason": "completed",
                }
            )
        wait = float(request.query.get("wait", "25"))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.cancelled.wait(), wait)
        return web.json_response({"done": False, "phase": "debating", "round": 1, "agent": "pm"})

    async def cancel(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = request[BODY]
        self.cancels.append({"ses": request.match_info["ses"], **body})
        self.cancelled.set()
        return web.json_response({"ok": True, "phase": "cancelled"})

    async def start(self) -> None:
        app = web.Application(middlewares=[self._auth])
        app.router.add_get("/v1/agents", self.agents)
        app.router.add_post("/v1/roundtables", self.create)
        app.router.add_get("/v1/roundtables/{ses}/result", self.result)
        app.router.add_post("/v1/roundtables/{ses}/cancel", self.cancel)
        self.runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self.runner.setup()
        self.port = free_port()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def fake() -> AsyncIterator[FakeControl]:
    f = FakeControl()
    await f.start()
    try:
        yield f
    finally:
        await f.stop()


def tool_files(tmp_path: Path, control_url: str, major: int = 1) -> dict[str, str]:
    """``{".opencode/tool/…": text}`` as installed by :func:`install.install_tools` for OpenCode
    ``major``; on 1.x less the plugin (its reports to the daemon are tests/e2e/test_plugin.py's),
    on 2.x with it (it carries the tools)."""
    token_file = tmp_path / "rt-config" / "token"
    token_file.parent.mkdir(parents=True, exist_ok=True)
    token_file.write_text(TOKEN + "\n")
    staging = tmp_path / f"staging-{free_port()}"
    return {
        ".opencode/" + p.relative_to(staging).as_posix(): p.read_text()
        for p in install.install_tools(
            staging, control_url=control_url, token_file=token_file, major=major
        )
        if major == 2 or p.parent.name != install.PLUGIN_DIR
    }


@dataclass(frozen=True)
class Part:
    """A tool part as either major stores it: ``status`` (``completed``, ``error``, …), the
    ``output`` the model gets (2.x: the content's text, or the error's message), the ``call_id``
    and the ``message_id`` of the assistant message holding it, and how long it ran in ms
    (``None`` while it runs)."""

    status: str
    output: str
    call_id: str
    message_id: str
    ran_ms: float | None


@contextlib.asynccontextmanager
async def v2_client(server: OpenCodeServer) -> AsyncIterator[v2.V2Client]:
    """A 2.x client of ``server``, closed on exit."""
    client = v2.V2Client(server.url, password=server.password)
    try:
        yield client
    finally:
        await client.close()


async def oc(
    server: OpenCodeServer, method: str, path: str, body: Any = None, **params: str
) -> Any:
    async with (
        aiohttp.ClientSession() as http,
        http.request(
            method,
            server.url + path,
            json=body,
            params=params or None,
            timeout=aiohttp.ClientTimeout(total=300),
        ) as resp,
    ):
        text = await resp.text()
        assert resp.status < 400, f"{method} {path}: HTTP {resp.status} {text[:500]}"
        return json.loads(text) if text else None


async def new_session(server: OpenCodeServer, directory: Path | None = None) -> str:
    where = str(directory or server.project_dir)
    if server.major == 2:
        async with v2_client(server) as client:
            return (await client.create_session(directory=where)).id
    s = await oc(server, "POST", "/session", {}, directory=where)
    return str(s["id"])


async def say(
    server: OpenCodeServer, ses: str, agent: str, text: str, *, wait: bool = True
) -> None:
    """Post the user message ``text`` to ``ses`` for ``agent``; ``wait=False`` returns as soon
    as the server has taken it (``prompt_async``; 2.x: the prompt admitted), else when the
    agent's turn is over (2.x: the session's agent switched first)."""
    if server.major == 2:
        async with v2_client(server) as client:
            await client.switch_agent(ses, agent)
            await client.prompt(ses, text)
            if wait:
                await wait_idle(server, ses, 300)
        return
    route = "message" if wait else "prompt_async"
    body = {"parts": [{"type": "text", "text": text}], "agent": agent}
    await oc(server, "POST", f"/session/{ses}/{route}", body)


async def wait_idle(server: OpenCodeServer, ses: str, timeout: float) -> None:
    """Wait until ``ses`` runs nothing (``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while True:
        if server.major == 2:
            async with v2_client(server) as client:
                busy = ses in await client.active()
        else:
            status = await oc(server, "GET", "/session/status", directory=str(server.project_dir))
            busy = ses in status and status[ses].get("type") != "idle"
        if not busy:
            return
        assert time.monotonic() < deadline, f"{ses} still busy after {timeout} s"
        await asyncio.sleep(0.05)


async def agent_info(server: OpenCodeServer, name: str) -> dict[str, Any]:
    """Agent ``name`` of the project as the server lists it: ``hidden``, ``mode``, ``prompt``
    (2.x: ``system``), ``description`` and ``deny_all`` (a rule denying every permission)."""
    if server.major == 2:
        async with v2_client(server) as client:
            [a] = [a for a in await client.agents(str(server.project_dir)) if a.id == name]
        rules = (a.model_extra or {}).get("permissions") or []
        return {
            "hidden": a.hidden,
            "mode": a.mode,
            "prompt": a.system or "",
            "description": a.description or "",
            "deny_all": {"action": "*", "resource": "*", "effect": "deny"} in rules,
        }
    agents = await oc(server, "GET", "/agent", directory=str(server.project_dir))
    [a] = [a for a in agents if a["name"] == name]
    return {
        "hidden": a["hidden"],
        "mode": a["mode"],
        "prompt": a["prompt"],
        "description": a["description"],
        "deny_all": {"permission": "*", "pattern": "*", "action": "deny"} in a["permission"],
    }


async def roundtable_schema(server: OpenCodeServer, directory: Path) -> dict[str, Any]:
    """The JSON schema of the ``roundtable`` tool's arguments, as the orchestrator model sees it
    in ``directory``."""
    tools = await oc(
        server,
        "GET",
        "/experimental/tool",
        directory=str(directory),
        provider="scripted",
        model="orchestrator-1",
    )
    return dict(next(t for t in tools if t["id"] == "roundtable")["parameters"])


async def tool_parts(server: OpenCodeServer, ses: str, tool: str) -> list[Part]:
    """The parts of ``ses`` that call ``tool``, oldest first."""
    if server.major == 2:
        async with v2_client(server) as client:
            records = await client.all_messages(ses)
        out = []
        for r in records:
            if not isinstance(r, v2.AssistantRecord):
                continue
            for p in r.content:
                if p.get("type") != "tool" or p.get("name") != tool:
                    continue
                state = p.get("state") or {}
                output = "".join(
                    str(c.get("text", ""))
                    for c in state.get("content") or []
                    if isinstance(c, dict)
                )
                if state.get("status") == "error":
                    output = str((state.get("error") or {}).get("message") or "")
                t = p.get("time") or {}
                ran = t["completed"] - t["ran"] if "completed" in t and "ran" in t else None
                out.append(Part(str(state.get("status")), output, str(p.get("id")), r.id, ran))
        return out
    msgs = await oc(server, "GET", f"/session/{ses}/message")
    out = []
    for m in msgs:
        for p in m["parts"]:
            if p.get("type") == "tool" and p["tool"] == tool:
                state = p["state"]
                t = state.get("time") or {}
                ran = t["end"] - t["start"] if "end" in t and "start" in t else None
                output = str(state.get("output") or state.get("error") or "")
                out.append(Part(state["status"], output, p["callID"], p["messageID"], ran))
    return out


async def run_tool(
    server: OpenCodeServer,
    llm: ScriptedLLM,
    tool: str,
    arguments: dict[str, Any],
    directory: Path | None = None,
) -> tuple[str, Part]:
    """Have the scripted ``build`` agent call ``tool`` once; returns (session id, tool part)."""
    llm.script(tool_call(tool, arguments), Text(text="noted"), agent="build")
    ses = await new_session(server, directory)
    await say(server, ses, "build", f"please call {tool}")
    parts = await tool_parts(server, ses, tool)
    assert len(parts) == 1, parts
    return ses, parts[0]


async def test_tools_listed_and_available_agents(
    tmp_path: Path,
    fake: FakeControl,
    scripted_llm: ScriptedLLM,
    opencode_factory: OpenCodeFactory,
    opencode_major: int,
) -> None:
    server = await opencode_factory(files=tool_files(tmp_path, fake.url, opencode_major))
    if opencode_major == 1:
        # (a) both custom tools are registered
        ids = await oc(server, "GET", "/experimental/tool/ids", directory=str(server.project_dir))
        assert "roundtable" in ids and "available_agents" in ids
        # the schema the orchestrator model sees: optional fields (zod resolvable here),
        # descriptions (2.x has no tool route: its plugin's schema is pinned by
        # tests/contract/test_v2_plugin.py)
        schema = await roundtable_schema(server, server.project_dir)
        assert schema["required"] == ["prompt"]
        assert schema["properties"]["rounds"]["maximum"] == 50
        assert "available_agents" in schema["properties"]["agents"]["description"]
        assert schema["properties"]["context"]["enum"] == ["full", "recent"]
    # (b) a real call through the model's tool call
    ses, part = await run_tool(server, scripted_llm, "available_agents", {})
    # (a) on both: the model was offered both tools
    [first] = scripted_llm.requests_for(agent="build", session=ses, kind="turn")
    assert "roundtable" in first.tools and "available_agents" in first.tools, first.tools
    assert part.status == "completed"
    assert part.output == AGENTS_TEXT
    assert any(
        p.startswith("/v1/agents?directory=") and str(server.project_dir) in p.replace("%2F", "/")
        for _, p, _ in fake.requests
    )
    assert fake.unauthorized == 0
    # the tool result went back to the model
    followup = scripted_llm.requests_for(agent="build", session=ses, kind="tool-followup")
    assert followup and AGENTS_TEXT in json.dumps(followup[-1].messages)


async def test_bad_args_and_valid_call(
    tmp_path: Path,
    fake: FakeControl,
    scripted_llm: ScriptedLLM,
    opencode_factory: OpenCodeFactory,
    opencode_major: int,
) -> None:
    server = await opencode_factory(files=tool_files(tmp_path, fake.url, opencode_major))
    # (c) bad arguments: an Error: text naming field, value and range; the daemon is not contacted
    _, part = await run_tool(
        server, scripted_llm, "roundtable", {"agents": ["pm", "dev"], "prompt": "x", "rounds": 0}
    )
    if opencode_major == 1:
        assert part.output == "Error: rounds must be an integer from 1 to 50, got 0"
    else:  # 2.x checks the arguments against the tool's JSON schema before the shim runs
        assert part.output.startswith('Invalid arguments for tool "roundtable"'), part.output
        assert "rounds: Expected a value greater than or equal to 1" in part.output
    # (duplicate names are refused by the daemon's shared rule, which lists the available
    # agents: tests/regressions/test_duplicate_agent_names_are_refused_everywhere.py); the 2.x
    # plugin's own reports (POST /v1/plugin, at load and every 5 s) are not the tool's calls
    assert [r for r in fake.requests if r[1] != "/v1/plugin"] == []
    # (d) a valid call: JSON {sessionID, summary}; the daemon saw the routing fields
    ses, part = await run_tool(
        server,
        scripted_llm,
        "roundtable",
        {
            "agents": ["pm", "dev"],
            "prompt": "Ship now?",
            "rounds": 2,
            "title": "Ship?",
            "context": "recent",
        },
    )
    assert part.status == "completed"
    assert json.loads(part.output) == {"sessionID": FAKE_SES, "summary": SUMMARY}
    [body] = fake.created
    assert body["parentSessionID"] == ses
    assert body["directory"] == str(server.project_dir)
    assert body["toolCallID"] == part.call_id
    assert body["toolMessageID"] == part.message_id
    assert body["agents"] == ["pm", "dev"] and body["rounds"] == 2 and body["title"] == "Ship?"
    assert body["context"] == "recent"  # the schema carries it; the daemon checks it
    assert fake.polls[0]["wait"] == "25" and fake.polls[0]["callID"] == part.call_id
    assert fake.unauthorized == 0
    # the abort signal OpenCode fires after a normal completion is not taken for a cancel
    await asyncio.sleep(0.3)
    assert fake.cancels == []


async def test_daemon_down_is_reported_at_once(
    tmp_path: Path,
    scripted_llm: ScriptedLLM,
    opencode_factory: OpenCodeFactory,
    opencode_major: int,
) -> None:
    # (e) nothing listens on the baked URL
    files = tool_files(tmp_path, f"http://127.0.0.1:{free_port()}", opencode_major)
    server = await opencode_factory(files=files)
    if opencode_major == 1:  # load the tools (2.x loads its plugin with the project)
        await oc(server, "GET", "/experimental/tool/ids", directory=str(server.project_dir))
    t0 = time.monotonic()
    _, part = await run_tool(
        server, scripted_llm, "roundtable", {"agents": ["pm", "dev"], "prompt": "x"}
    )
    out = part.output
    assert out.startswith("Error: roundtabled is not running"), out
    assert "roundtabled serve" in out
    assert part.ran_ms is not None and part.ran_ms < 3000
    assert time.monotonic() - t0 < 10  # the whole turn (two scripted model calls) included


async def test_abort_cancels_the_roundtable(
    tmp_path: Path,
    fake: FakeControl,
    scripted_llm: ScriptedLLM,
    opencode_factory: OpenCodeFactory,
    opencode_major: int,
) -> None:
    # (f) abort while the tool long-polls → cancel reaches the daemon, the session is idle at once
    fake.result_mode = "hang"
    server = await opencode_factory(files=tool_files(tmp_path, fake.url, opencode_major))
    scripted_llm.script(
        tool_call("roundtable", {"agents": ["pm", "dev"], "prompt": "x"}), agent="build"
    )
    ses = await new_session(server)
    await say(server, ses, "build", "debate", wait=False)
    await asyncio.wait_for(fake.polling.wait(), 30)
    t0 = time.monotonic()
    if opencode_major == 2:
        async with v2_client(server) as client:
            assert await client.interrupt(ses)
    else:
        await oc(server, "POST", f"/session/{ses}/abort")
    await asyncio.wait_for(fake.cancelled.wait(), 5.0)
    await wait_idle(server, ses, 5.0)
    assert time.monotonic() - t0 < 5.0
    [cancel] = fake.cancels
    assert cancel == {
        "ses": FAKE_SES,
        "summarize": False,
        "reason": "the orchestrator's session was aborted",
    }
    [part] = await tool_parts(server, ses, "roundtable")
    # either OpenCode marked the part aborted, or our immediate answer got there first
    assert part.status == "error" or part.output == "Error: roundtable cancelled", part


def offline_project(server: OpenCodeServer, name: str, files: dict[str, str]) -> Path:
    """A git project whose ``.opencode/`` has the tools but no ``node_modules``/``package.json``."""
    d = server.root / name
    (d / ".opencode").mkdir(parents=True)
    (d / "opencode.json").write_text(json.dumps(server.config))
    for rel, text in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=d, check=True)
    return d


@pytest.mark.only_1x(
    "1.x installs @opencode-ai/plugin from npm into the project's .opencode and lists tools over"
    " /experimental/tool; 2.x installs nothing from npm and has no tool route"
)
async def test_no_network_project_still_lists_and_runs_both_tools(
    tmp_path: Path, fake: FakeControl, scripted_llm: ScriptedLLM, opencode_factory: OpenCodeFactory
) -> None:
    # (g) regression "a project with no network access still lists both tools": npm cannot reach
    # a registry, the project's .opencode has no node_modules, so OpenCode's install of
    # @opencode-ai/plugin fails (fast here: fetch-retries=0; ~70 s with npm's default retries).
    # A tool importing the package would make every tool listing fail with HTTP 500.
    server = await opencode_factory(
        env={"npm_config_registry": "http://127.0.0.1:9", "npm_config_fetch_retries": "0"}
    )
    project = offline_project(server, "offline", tool_files(tmp_path, fake.url))
    ids = await oc(server, "GET", "/experimental/tool/ids", directory=str(project))
    assert "roundtable" in ids and "available_agents" in ids
    assert not (project / ".opencode" / "node_modules" / "@opencode-ai").exists()
    # without zod the args are plain JSON Schema (all listed as required, optional ones nullable)
    schema = await roundtable_schema(server, project)
    assert schema["properties"]["rounds"]["type"] == ["integer", "null"]
    # and a real call with the nulls the model then sends
    _, part = await run_tool(server, scripted_llm, "available_agents", {}, directory=project)
    assert part.output == AGENTS_TEXT
    nulls = {"observer": None, "sessionID": None, "title": None, "extendMode": None}
    _, part = await run_tool(
        server,
        scripted_llm,
        "roundtable",
        {"agents": ["pm", "dev"], "prompt": "x", "rounds": None, **nulls},
        directory=project,
    )
    assert json.loads(part.output) == {"sessionID": FAKE_SES, "summary": SUMMARY}
    assert "rounds" not in fake.created[-1] and "observer" not in fake.created[-1]


@pytest.mark.only_1x(
    "1.x registers every file of .opencode/tool/ as a tool (/experimental/tool/ids); on 2.x the"
    " plugin registers the tools itself"
)
async def test_the_control_module_is_no_tool_and_the_shims_cannot_do_without_it(
    tmp_path: Path, fake: FakeControl, opencode_factory: OpenCodeFactory
) -> None:
    # roundtabled/control.ts sits beside tool/, not in it: OpenCode registers no tool from it.
    files = tool_files(tmp_path, fake.url)
    control = f".opencode/{install.CONTROL_DIR}/{install.CONTROL_FILE}"
    assert control in files
    server = await opencode_factory(files=files)
    ids = await oc(server, "GET", "/experimental/tool/ids", directory=str(server.project_dir))
    assert sorted(i for i in ids if i in ("roundtable", "available_agents")) == [
        "available_agents",
        "roundtable",
    ]
    assert not [i for i in ids if "control" in i], ids
    # Without it a shim fails to load and takes the whole registry down (why install-tool writes
    # it first and doctor names it when it is missing).
    del files[control]
    project = offline_project(server, "no-control", files)
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            server.url + "/experimental/tool/ids",
            params={"directory": str(project)},
            timeout=aiohttp.ClientTimeout(total=300),
        ) as resp,
    ):
        assert resp.status == 500, await resp.text()


async def test_observer_agent_is_hidden_and_toolless(
    tmp_path: Path,
    fake: FakeControl,
    scripted_llm: ScriptedLLM,
    opencode_factory: OpenCodeFactory,
    opencode_major: int,
) -> None:
    server = await opencode_factory(files=tool_files(tmp_path, fake.url, opencode_major))
    observer = await agent_info(server, "roundtable-observer")
    assert observer["hidden"] is True
    assert observer["mode"] == "subagent"
    assert observer["prompt"].startswith("You are the impartial roundtable observer."), observer
    assert "Built-in roundtable observer" in observer["description"]
    assert observer["deny_all"], observer
    # a prompt as that agent reaches the model with no tools at all
    scripted_llm.script(Text(text="summary"), agent="roundtable-observer")
    ses = await new_session(server)
    await say(server, ses, "roundtable-observer", "consolidate")
    [req] = scripted_llm.requests_for(session=ses, kind="turn")
    assert req.agent == "roundtable-observer"
    assert req.tools == []
