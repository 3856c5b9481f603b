"""End-to-end harness: the real ``opencode serve`` + the scripted LLM + a roundtabled daemon.

``rt`` starts all three for one test and gives helpers to drive the daemon through its control API
(exactly what the tool shim does) and to read the server's truth.

The server is the OpenCode major of the run (``opencode_major``: ``--opencode-major 2`` or
``ROUNDTABLED_TEST_OPENCODE_MAJOR=2`` for the pinned 2.x). The helpers that read the server
(:meth:`RT.new_parent`, :meth:`RT.session`, :meth:`RT.transcript`, :meth:`RT.wait_idle`,
:meth:`RT.warm_up`) answer the same on both, so a test marked ``both_majors`` asserts the
product's behaviour, not one major's JSON; :meth:`RT.oc` and :meth:`RT.messages` are the 1.x
server's own routes and JSON.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.env import (
    control_call,
    new_root_session,
    result_polls,
    server_call,
    stop_daemon_task,
)
from roundtabled.offline.opencode_server import OpenCodeServer, free_port, offline_config
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.opencode import v2
from roundtabled.opencode.port import V2Port
from roundtabled.service import install
from roundtabled.service.config import load_settings
from roundtabled.service.daemon import Daemon

SEAT_MODELS = {"pm": "debater-1", "dev": "debater-2", "rv": "debater-3"}


def roundtable_config(llm: ScriptedLLM, **kw: Any) -> dict[str, Any]:
    """The offline config with each seat on its own scripted model."""
    extra = kw.pop("extra_agents", {}) or {}
    agents: dict[str, dict[str, Any]] = {
        name: {"model": f"scripted/{mid}"} for name, mid in SEAT_MODELS.items()
    }
    for name, cfg in extra.items():
        agents[name] = {**agents.get(name, {}), **cfg}
    return offline_config(llm.base_url, extra_agents=agents, **kw)


@dataclass(frozen=True)
class Said:
    """One message of a session as people read it, on either major: ``role`` ``"user"`` or
    ``"assistant"``, the ``agent`` that answered (assistant messages; ``None`` for a person or
    the daemon), the ``text`` the model sees (1.x: ``ignored`` parts left out; 2.x: one step's
    text parts)."""

    role: str
    agent: str | None
    text: str


@dataclass
class RT:
    """One end-to-end environment."""

    server: OpenCodeServer
    llm: ScriptedLLM
    daemon: Daemon
    task: asyncio.Task[int]
    tmp: Path
    http: aiohttp.ClientSession
    settings_env: dict[str, str]
    extra_tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    _v2: V2Port | None = None

    @property
    def major(self) -> int:
        """The OpenCode major of the server: 1 or 2."""
        return self.server.major

    @property
    def v2(self) -> V2Port:
        """The 2.x server port (only on 2.x): what the test reads the server through."""
        assert self.major == 2, "rt.v2 is the 2.x server's port"
        if self._v2 is None:
            client = v2.V2Client(self.server.url, password=self.server.password)
            self._v2 = V2Port(client)
        return self._v2

    @property
    def control(self) -> str:
        assert self.daemon.control_address
        return self.daemon.control_address

    @property
    def directory(self) -> str:
        return str(self.server.project_dir)

    async def api(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, str] | None = None,
        token: str | None = None,
        timeout: float = 60,
    ) -> tuple[int, Any]:
        """Call the daemon's control API (``token`` default the daemon's own); returns (status,
        decoded JSON or text)."""
        bearer = token if token is not None else self.daemon.token
        return await control_call(
            self.http, self.control, bearer, method, path, body, params=params, timeout=timeout
        )

    async def oc(
        self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None
    ) -> Any:
        """Call the OpenCode server."""
        return await server_call(self.http, self.server, method, path, body, params=params)

    async def warm_up(self) -> None:
        """One prompt in a scratch session of the project, answered by the scripted model's
        default reply (call it before scripting). The server's first turn in a directory starts
        its instance (plugins, tools, the snapshot's repository): on CI that took over 3 s before
        the model was called, longer than the turn timeout of a test that needs the model's
        request."""
        if self.major == 2:
            info = await self.v2.client.create_session(directory=self.directory, title="warm-up")
            await self.v2.client.prompt(info.id, "warm up")
            await self.wait_idle(info.id, 60)
            return
        where = {"directory": self.directory}
        s = await self.oc("POST", "/session", {"title": "warm-up"}, params=where)
        body = {"parts": [{"type": "text", "text": "warm up"}]}
        await self.oc("POST", f"/session/{s['id']}/message", body, params=where)

    async def new_parent(self, title: str = "S1 main session") -> str:
        """A root session S1 in the project directory (where the orchestrator would be)."""
        if self.major == 2:
            info = await self.v2.client.create_session(directory=self.directory, title=title)
            return info.id
        return await new_root_session(self.http, self.server, title)

    async def parent_args(self) -> list[str]:
        """The CLI's ``--parent S1`` on 2.x (a new root session: a 2.x roundtable runs in a
        child session, docs/design.md "The 2.x shell"); ``[]`` on 1.x, where a start needs none."""
        return ["--parent", await self.new_parent()] if self.major == 2 else []

    async def start(self, **body: Any) -> str:
        """POST /v1/roundtables; returns S2's id (asserts 200). On 2.x a body without
        ``parentSessionID`` gets a new root session as its parent (2.x needs one)."""
        body.setdefault("directory", self.directory)
        if self.major == 2 and not body.get("sessionID"):
            body.setdefault("parentSessionID", await self.new_parent())
        status, data = await self.api("POST", "/v1/roundtables", body)
        assert status == 200, data
        return str(data["sessionID"])

    async def result(self, s2: str, timeout: float = 60) -> dict[str, Any]:
        """Wait for the result like the tool shim (long poll; every answer must be a 200)."""
        async for status, data in result_polls(self.api, s2, timeout):
            assert status == 200, data
            if data.get("done"):
                return dict(data)
        raise AssertionError(f"roundtable {s2} did not finish in {timeout} s")

    async def finalized(self, s2: str, timeout: float = 30) -> dict[str, Any]:
        """Wait until phase 4 is complete (delimiter, title, toast); returns the status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, data = await self.api("GET", f"/v1/roundtables/{s2}")
            if status == 200 and data.get("finalized"):
                return dict(data)
            await asyncio.sleep(0.1)
        raise AssertionError(f"roundtable {s2} not finalized in {timeout} s")

    async def messages(self, session: str) -> list[dict[str, Any]]:
        """The 1.x server's messages of ``session`` (its JSON: ``{info, parts}``)."""
        return list(await self.oc("GET", f"/session/{session}/message"))

    async def transcript(self, session: str, *, parked: bool = False) -> list[Said]:
        """The user and assistant messages of ``session``, oldest first, on either major (2.x:
        the delivered records, then with ``parked`` the items parked in the inbox until the
        session's next execution, e.g. a result delivered while nobody waits for it)."""
        if self.major == 2:
            out: list[Said] = []
            for r in await self.v2.client.all_messages(session):
                if isinstance(r, v2.UserRecord):
                    out.append(Said("user", None, r.text))
                elif isinstance(r, v2.AssistantRecord):
                    out.append(Said("assistant", r.agent, r.text))
                elif r.type == "synthetic":
                    text = (r.model_extra or {}).get("text") or (
                        (r.model_extra or {}).get("payload") or {}
                    ).get("text")
                    out.append(Said("user", None, str(text or "")))
            if parked:
                for item in await self.v2.client.inbox(session):
                    payload = item.get("payload") or {}
                    out.append(Said("user", None, str(payload.get("text") or "")))
            return out
        said = []
        for m in await self.messages(session):
            text = "\n".join(
                str(p.get("text") or "")
                for p in m["parts"]
                if p.get("type") == "text" and not p.get("ignored")
            )
            said.append(Said(m["info"]["role"], m["info"].get("agent"), text))
        return said

    async def drained_after(
        self, s2: str, trigger: Callable[[], Awaitable[Any]], timeout: float = 20
    ) -> None:
        """Run ``trigger`` (something that makes the server emit a ``session.idle`` for ``s2``:
        an abort of the idle session, a person's message), then wait for the signal that the
        daemon can no longer act on it: that idle event was dispatched to the engine and the
        engine holds no worker for ``s2``. A check of "nothing happened" after this looks at
        a drained daemon, not at a quiet window."""
        seen = asyncio.Event()
        stream = self.daemon.stream
        original = stream._on_event

        def watch(event: Any) -> None:
            original(event)
            if event.type == "session.idle" and event.session_id == s2:
                seen.set()

        stream._on_event = watch
        try:
            await trigger()
            await asyncio.wait_for(seen.wait(), timeout)
        finally:
            stream._on_event = original
        await self.retired(s2, timeout)

    async def retired(self, s2: str, timeout: float = 20) -> None:
        """Wait until the daemon can no longer act on ``s2``: its worker has returned (``s2`` is
        not in ``engine.tables``: no pass can prompt, post or patch again, and a resync or a
        reconnect only looks at the tables) and no background task of the daemon is left (a
        toast, an answer to a permission). Only a new call (extend) or a restart can act on it
        after this, so a count taken now is final."""
        engine = self.daemon.engine
        deadline = time.monotonic() + timeout
        runner = self.daemon.v2
        if runner is not None:  # 2.x: the shell's loop for s2 has returned
            while (run := runner.tables.get(s2)) is not None and not (
                run.task is None or run.task.done()
            ):
                assert time.monotonic() < deadline, f"the daemon still drives {s2}"
                await asyncio.sleep(0.05)
            return
        while s2 in engine.tables or engine.shell.background:
            assert time.monotonic() < deadline, (
                f"the daemon still drives {s2}"
                if s2 in engine.tables
                else f"background tasks still run: {engine.shell.background}"
            )
            await asyncio.sleep(0.05)

    async def settled(self, s2: str, timeout: float = 30) -> dict[str, Any]:
        """Wait until the roundtable can change nothing more, the state a check that nothing
        else happened (no extra request, prompt, delivery, title) must look at: phase 4 is done
        (``finalized``: the result delivered, the delimiter, the title and the toast), the
        daemon is :meth:`retired` from it, and S2 and its parent are idle on the server (a
        prompt sent before that has reached the model and ended). Returns the status."""
        status = await self.finalized(s2, timeout)
        await self.retired(s2, timeout)
        for session in (s2, status.get("parentSessionID")):
            if session:
                await self.wait_idle(str(session), timeout, status.get("directory"))
        return status

    async def stored(self, session: str) -> list[str]:
        """Each message the server holds for ``session`` (tool parts included; 2.x: each
        record, then each item parked in the inbox) as one JSON text: what "it is in S1 once"
        counts in."""
        if self.major == 2:
            records = await self.v2.client.all_messages(session)
            inbox = await self.v2.client.inbox(session)
            return [json.dumps(r.model_dump(by_alias=True)) for r in records] + [
                json.dumps(item) for item in inbox
            ]
        return [json.dumps(m) for m in await self.messages(session)]

    async def sessions(self) -> list[str]:
        """The ids of the project's sessions."""
        if self.major == 2:
            return [s.id for s in await self.v2.client.sessions(self.directory)]
        where = {"directory": self.directory}
        return [str(s["id"]) for s in await self.oc("GET", "/session", params=where)]

    async def session(self, session: str) -> dict[str, Any]:
        """The session's info: on both majors at least ``id``, ``parentID``, ``title`` and
        ``metadata`` (1.x: its JSON as the server gives it)."""
        if self.major == 2:
            info = await self.v2.client.get_session(session)
            return info.model_dump(by_alias=True)
        return dict(await self.oc("GET", f"/session/{session}"))

    async def wait_idle(
        self, session: str, timeout: float = 20, directory: str | None = None
    ) -> None:
        """Wait until ``session`` (of ``directory``, default the project's) is not busy."""
        where = {"directory": directory or self.directory}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.major == 2:
                st: Any = await self.v2.client.active()
            else:
                st = await self.oc("GET", "/session/status", params=where)
            if session not in st:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{session} still busy after {timeout} s")

    async def restart_daemon(self, **overrides: Any) -> None:
        """Stop the daemon (graceful) and start a new one with the same settings."""
        self.daemon.request_stop()
        await asyncio.wait_for(self.task, 15)
        await self._launch(**overrides)

    async def kill_daemon(self) -> None:
        """Simulate kill -9 of the in-process daemon: cancel everything at once."""
        self.task.cancel()
        for t in asyncio.all_tasks():
            name = t.get_name()
            if name.startswith("rt-") or name in ("event-stream", "heartbeat"):
                t.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.daemon.client.close()

    async def _launch(self, **overrides: Any) -> None:
        cli: dict[str, Any] = {
            "server_url": self.server.url,
            "control_port": 0,
            "resync_period": 2.0,
            "directories": [self.directory],
        }
        cli.update(overrides)
        settings = load_settings(cli, env=self.settings_env)
        self.daemon = Daemon(settings)
        self.task = asyncio.create_task(self.daemon.run())
        # A daemon that exits at start (a port it cannot bind) fails the test now, not after 30 s.
        ready = asyncio.ensure_future(self.daemon.engine.ready.wait())
        done, _ = await asyncio.wait({ready, self.task}, timeout=30, return_when="FIRST_COMPLETED")
        if ready not in done:
            ready.cancel()
            if self.task in done:
                raise AssertionError(f"the daemon exited at start with {self.task.result()}")
            raise TimeoutError("the daemon was not ready after 30 s")


async def make_rt(tmp_path: Path, llm: ScriptedLLM, server: OpenCodeServer, **overrides: Any) -> RT:
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "rt-config"),
        "XDG_STATE_HOME": str(tmp_path / "rt-state"),
    }
    if server.password:
        env["OPENCODE_SERVER_PASSWORD"] = server.password
    rt = RT(
        server=server,
        llm=llm,
        daemon=None,  # type: ignore[arg-type]  # set by _launch() below
        task=None,  # type: ignore[arg-type]
        tmp=tmp_path,
        http=aiohttp.ClientSession(),
        settings_env=env,
    )
    await rt._launch(**overrides)
    return rt


@pytest.fixture
async def rt_factory(
    tmp_path: Path, scripted_llm: ScriptedLLM, opencode_factory: Any, opencode_major: int
) -> AsyncIterator[Any]:
    """``await rt_factory(config=None, daemon={...overrides}, files=..., password=...)``."""
    made: list[RT] = []

    async def factory(
        config: dict[str, Any] | None = None,
        *,
        daemon: dict[str, Any] | None = None,
        files: dict[str, str] | None = None,
        password: str | None = None,
        install_tools: bool = True,
        plugin: bool = False,
    ) -> RT:
        cfg = config if config is not None else roundtable_config(scripted_llm)
        port = free_port()
        all_files = dict(files or {})
        if install_tools:
            # The tools and the observer agent are in place before the server loads the project
            # (2.x: the plugin carries the tools, so it is always installed).
            staging = tmp_path / f"staging-{port}"
            token_file = tmp_path / "rt-config" / "roundtabled" / "token"
            for path in install.install_tools(
                staging,
                control_url=f"http://127.0.0.1:{port}",
                token_file=token_file,
                major=opencode_major,
            ):
                rel = path.relative_to(staging).as_posix()
                if plugin or opencode_major == 2 or not rel.startswith(install.PLUGIN_DIR + "/"):
                    all_files[".opencode/" + rel] = path.read_text()
        server = await opencode_factory(cfg, files=all_files, password=password)
        overrides = {"control_port": port, **(daemon or {})}
        rt = await make_rt(tmp_path, scripted_llm, server, **overrides)
        made.append(rt)
        return rt

    try:
        yield factory
    finally:
        for rt in made:
            if not rt.task.done():
                await stop_daemon_task(rt.daemon, rt.task, 15)
            await rt.daemon.client.close()
            await rt.http.close()
            if rt._v2 is not None:
                await rt._v2.close()


@pytest.fixture
async def rt(rt_factory: Any) -> RT:
    """The default environment: seats pm, dev, rv on three scripted models."""
    return await rt_factory()  # type: ignore[no-any-return]
