"""Benchmark environment: the real ``opencode serve`` + the scripted LLM + a roundtabled daemon.

The same set-up as the end-to-end tests (``tests/e2e/conftest.py``), without pytest: one private,
offline OpenCode server (pinned npm package) whose seats ``pm``, ``dev``, ``rv`` and the hidden
built-in observer agent run on the scripted LLM, which answers instantly unless an action says
otherwise. The daemon runs in this process (so its counters can be read) or, for memory figures,
as a child process (so its RSS is its own).

Times are seconds unless a name ends in ``_ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import aiohttp

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.opencode_server import OpenCodeServer, free_port, offline_config
from roundtabled.offline.scripted_actions import Action
from roundtabled.offline.scripted_llm import RecordedRequest
from roundtabled.service.config import load_settings
from roundtabled.service.daemon import Daemon
from roundtabled.service.install import CONTROL_DIR, CONTROL_FILE, PLUGIN_DIR, render_tool

SEAT_MODELS = {"pm": "debater-1", "dev": "debater-2", "rv": "debater-3"}
OBSERVER_PROMPT = "You are the roundtable observer. Consolidate the debate."
TOPIC = "Should we split the payments monolith into services this quarter?"


class RemoteLLM:
    """The scripted LLM in its own process (so the daemon's process and event loop are the
    daemon's alone), driven through its control routes (``/script``, ``/requests`` …)."""

    def __init__(self) -> None:
        self.port = 0
        self.proc: asyncio.subprocess.Process | None = None
        self.http: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    async def start(self) -> None:
        """Start the scripted model; it reports ``prompt_tokens`` measured from each request
        (an action's own ``prompt_tokens`` wins)."""
        self.port = free_port()
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "roundtabled.offline.scripted_llm",
            "--port",
            str(self.port),
            "--measured-tokens",
            stdout=asyncio.subprocess.DEVNULL,
        )
        self.http = aiohttp.ClientSession()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, aiohttp.ClientError):
                async with self.http.get(self.url + "/health") as r:
                    if r.status == 200:
                        break
            await asyncio.sleep(0.05)
        await self._post("/agent-prompts", {OBSERVER_PROMPT: OBSERVER_AGENT})

    async def _post(self, path: str, body: Any) -> Any:
        assert self.http is not None
        async with self.http.post(self.url + path, json=body) as r:
            r.raise_for_status()
            return await r.json()

    async def script(self, *actions: Action, agent: str | None = None) -> None:
        """Queue ``actions`` for ``agent`` (any session)."""
        await self._post("/script", {"actions": [a.model_dump() for a in actions], "agent": agent})

    async def agent_prompt(self, prefix: str, agent: str) -> None:
        """Requests whose system prompt starts with ``prefix`` are ``agent``'s."""
        await self._post("/agent-prompts", {prefix: agent})

    async def reset(self) -> None:
        """Forget every queued action and recorded request."""
        await self._post("/reset", {})

    async def requests_for(self, session: str) -> list[RecordedRequest]:
        """Recorded requests of ``session``."""
        assert self.http is not None
        async with self.http.get(self.url + "/requests") as r:
            data = await r.json(content_type=None)
        return [RecordedRequest(**d) for d in data if d.get("session_id") == session]

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.close()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await self.proc.wait()


async def server_call(
    http: aiohttp.ClientSession,
    server: OpenCodeServer,
    method: str,
    path: str,
    body: Any = None,
    *,
    params: dict[str, str] | None = None,
    timeout: float | None = None,
) -> Any:
    """``method path`` at the OpenCode server (``timeout`` s, default aiohttp's): the decoded
    JSON answer, ``None`` for a 204; raises :class:`aiohttp.ClientResponseError` on an error
    status. The end-to-end tests call the server through this too."""
    extra: dict[str, Any] = {}
    if timeout is not None:
        extra["timeout"] = aiohttp.ClientTimeout(total=timeout)
    async with http.request(
        method,
        server.url + path,
        json=body,
        params=params,
        headers=server.auth_headers,
        **extra,
    ) as resp:
        resp.raise_for_status()
        if resp.status == 204:
            return None
        return await resp.json()


async def control_call(
    http: aiohttp.ClientSession,
    control: str,
    token: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    params: dict[str, str] | None = None,
    timeout: float,
) -> tuple[int, Any]:
    """``method path`` at a daemon's control API (``control`` its base URL, ``token`` its bearer
    token, ``timeout`` s): the status and the decoded JSON answer, or the text of one that is not
    JSON. The end-to-end tests call the daemon through this too."""
    async with http.request(
        method,
        control + path,
        json=body,
        params=params,
        headers={"Authorization": f"Bearer {token}"},
        timeout=aiohttp.ClientTimeout(total=timeout),
    ) as resp:
        if "json" in resp.headers.get("content-type", ""):
            return resp.status, await resp.json()
        return resp.status, await resp.text()


async def result_polls(
    api: Callable[..., Awaitable[tuple[int, Any]]], s2: str, timeout: float
) -> AsyncIterator[tuple[int, Any]]:
    """S2's result long-polled through ``api`` (a control API call) like the tool shim, 10 s a
    poll, until ``timeout`` s have passed: each answer, ``(status, data)``. What an answer means
    (done, an error) is the caller's to judge."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        yield await api("GET", f"/v1/roundtables/{s2}/result", params={"wait": "10"})


async def new_root_session(http: aiohttp.ClientSession, server: OpenCodeServer, title: str) -> str:
    """A root session titled ``title`` in the server's project directory (where an orchestrator
    would be, the parent S1 of a roundtable); its id."""
    where = {"directory": str(server.project_dir)}
    s = await server_call(http, server, "POST", "/session", {"title": title}, params=where)
    return str(s["id"])


async def stop_daemon_task(daemon: Daemon, task: asyncio.Task[int], timeout: float) -> None:
    """Ask an in-process daemon to stop and wait up to ``timeout`` s for its task to end; a task
    still running then is cancelled. The end-to-end fixtures stop their daemons through this."""
    daemon.request_stop()
    try:
        await asyncio.wait_for(task, timeout)
    except (TimeoutError, asyncio.CancelledError):
        task.cancel()


def bench_config(llm: RemoteLLM) -> dict[str, Any]:
    """The offline config: each seat on its own scripted model, plus the hidden observer agent
    (defined here so the benchmark does not depend on ``roundtabled install``)."""
    agents: dict[str, dict[str, Any]] = {
        name: {"model": f"scripted/{mid}"} for name, mid in SEAT_MODELS.items()
    }
    agents["qa"] = {  # a fourth seat (figure 7c), on the first seat's model
        "mode": "subagent",
        "description": "qa",
        "prompt": "You are qa, the tester of the roundtable.",
        "model": "scripted/debater-1",
        "permission": {"*": "deny"},
    }
    agents[OBSERVER_AGENT] = {
        "mode": "subagent",
        "hidden": True,
        "description": "Roundtable observer",
        "prompt": OBSERVER_PROMPT,
        "model": "scripted/observer-1",
        "permission": {"*": "deny"},
    }
    return offline_config(llm.base_url, extra_agents=agents)


def rss_mb(pid: int | None = None) -> float:
    """Resident set size of ``pid`` (default: this process) in MB (MiB), from ``/proc``."""
    path = f"/proc/{pid or os.getpid()}/status"
    with open(path) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS in {path}")


@dataclass
class Env:
    """One benchmark environment under ``root``."""

    root: Path
    llm: RemoteLLM = field(default_factory=RemoteLLM)
    server: OpenCodeServer | None = None
    daemon: Daemon | None = None
    task: asyncio.Task[int] | None = None
    proc: asyncio.subprocess.Process | None = None
    control: str = ""
    token: str = ""
    control_port: int = 0
    """The daemon's control port chosen before the server started (plugin installed), else 0."""
    http: aiohttp.ClientSession | None = None
    major: int = 1
    """The OpenCode major the server is (2: the pinned 2.x in ``opencode-v2/``; a daemon
    started against it drives it through the 2.x shell)."""

    @property
    def srv(self) -> OpenCodeServer:
        assert self.server is not None
        return self.server

    @property
    def directory(self) -> str:
        return str(self.srv.project_dir)

    @property
    def env(self) -> dict[str, str]:
        """The daemon's environment (its own XDG directories: key, token, state)."""
        return {
            "HOME": str(self.root / "home"),
            "XDG_CONFIG_HOME": str(self.root / "rt-config"),
            "XDG_STATE_HOME": str(self.root / "rt-state"),
            "PATH": os.environ.get("PATH", ""),
        }

    async def start(self, config: dict[str, Any] | None = None, *, plugin: bool = False) -> None:
        """Start the scripted LLM and the OpenCode server (no daemon yet). ``plugin``: the
        roundtable plugin is installed in the project first, calling the daemon that
        :meth:`launch_daemon` starts on a port chosen now (docs/plugin.md)."""
        await self.llm.start()
        cfg = config or bench_config(self.llm)
        self.server = OpenCodeServer(self.root / "opencode", cfg, major=2 if self.major == 2 else 1)
        if plugin:
            assert self.major == 1, "the 2.x plugin: bench.overhead_v2 installs it"
            self.control_port = free_port()
            token = self.root / "rt-config" / "roundtabled" / "token"
            shipped = resources.files("roundtabled") / "tools"
            control = render_tool(
                (shipped / CONTROL_FILE).read_text(),
                control_url=f"http://127.0.0.1:{self.control_port}",
                token_file=token,
            )
            # The plugin reads the daemon's URL and token file from the control module.
            opencode = self.server.project_dir / ".opencode"
            for target, text in (
                (opencode / CONTROL_DIR / CONTROL_FILE, control),
                (
                    opencode / PLUGIN_DIR / "roundtable-plugin.ts",
                    (shipped / "roundtable-plugin.ts").read_text(),
                ),
            ):
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
        await self.server.start()
        self.http = aiohttp.ClientSession()

    async def plugin_reported(self, timeout: float = 30) -> None:
        """Wait until the daemon has the plugin's report for the project directory."""
        assert self.daemon is not None
        deadline = time.monotonic() + timeout
        plugins = self.daemon.engine.shell.plugins
        while plugins.version_for(self.directory) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("the roundtable plugin did not report itself to the daemon")
            await asyncio.sleep(0.05)

    def settings_cli(self, **overrides: Any) -> dict[str, Any]:
        cli: dict[str, Any] = {
            "server_url": self.srv.url,
            "control_port": self.control_port,
            "resync_period": 15.0,
            "directories": [self.directory],
            "log_level": "warning",
        }
        cli.update(overrides)
        return cli

    async def launch_daemon(self, **overrides: Any) -> float:
        """Start an in-process daemon; returns seconds from construction to ``ready``."""
        t0 = time.perf_counter()
        settings = load_settings(self.settings_cli(**overrides), env=self.env)
        self.daemon = Daemon(settings)
        self.task = asyncio.create_task(self.daemon.run())
        await asyncio.wait_for(self.daemon.engine.ready.wait(), 120)
        ready = time.perf_counter() - t0
        assert self.daemon.control_address
        self.control = self.daemon.control_address
        self.token = self.daemon.token
        return ready

    async def stop_daemon(self) -> None:
        """Stop the in-process daemon gracefully."""
        if self.daemon is not None and self.task is not None:
            await stop_daemon_task(self.daemon, self.task, 20)
            await self.daemon.client.close()
        self.daemon, self.task = None, None

    async def spawn_daemon(self, port: int | None = None) -> int:
        """Start ``roundtabled serve`` as a child process; returns its pid once the control API
        answers ``/v1/health`` ready."""
        port = port or free_port()
        env = {**os.environ, **self.env}
        if self.srv.password:  # the 2.x server always asks for one
            env["OPENCODE_SERVER_PASSWORD"] = self.srv.password
        log = (self.root / "daemon.log").open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "roundtabled",
            "serve",
            "--server-url",
            self.srv.url,
            "--control-port",
            str(port),
            "--log-level",
            "warning",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log,
        )
        log.close()  # the child has its own descriptor
        self.control = f"http://127.0.0.1:{port}"
        token_file = self.root / "rt-config" / "roundtabled" / "token"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, aiohttp.ClientError):
                if token_file.exists():
                    self.token = token_file.read_text().strip()
                    status, data = await self.api("GET", "/v1/health")
                    if status == 200 and isinstance(data, dict) and data.get("ready"):
                        return self.proc.pid
            await asyncio.sleep(0.1)
        raise RuntimeError("the daemon child did not become ready in 60 s")

    async def kill_child(self) -> None:
        """SIGTERM the daemon child and wait for it."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 15)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        self.proc = None

    async def close(self) -> None:
        """Stop everything this environment started."""
        await self.stop_daemon()
        await self.kill_child()
        if self.http is not None:
            await self.http.close()
        if self.server is not None:
            await self.server.stop()
        await self.llm.stop()

    # -- HTTP helpers ---------------------------------------------------------------------------

    async def api(
        self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        """Call the daemon's control API: (status, JSON or text)."""
        assert self.http is not None
        return await control_call(
            self.http, self.control, self.token, method, path, body, params=params, timeout=120
        )

    async def oc(
        self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None
    ) -> Any:
        """Call the OpenCode server; decoded JSON (``None`` for 204)."""
        assert self.http is not None
        return await server_call(self.http, self.srv, method, path, body, params=params)

    async def new_parent(self, title: str = "S1 bench") -> str:
        assert self.http is not None
        if self.major == 2:
            body = {"title": title, "location": {"directory": self.directory}}
            made = await server_call(self.http, self.srv, "POST", "/api/session", body)
            return str(made["data"]["id"])
        return await new_root_session(self.http, self.srv, title)

    async def start_rt(self, **body: Any) -> str:
        """``POST /v1/roundtables``; S2's id."""
        body.setdefault("directory", self.directory)
        status, data = await self.api("POST", "/v1/roundtables", body)
        if status != 200:
            raise RuntimeError(f"start failed: {status} {data}")
        return str(data["sessionID"])

    async def result(self, s2: str, timeout: float = 300) -> dict[str, Any]:
        """Long-poll the result like the tool shim (an answer other than 200 is polled again)."""
        async for status, data in result_polls(self.api, s2, timeout):
            if status == 200 and data.get("done"):
                return dict(data)
        raise RuntimeError(f"roundtable {s2} did not finish in {timeout} s")

    async def wait_idle(self, session: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = await self.oc("GET", "/session/status", params={"directory": self.directory})
            if session not in st:
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"{session} still busy after {timeout} s")


def emit_json(result: object, out: str | Path | None) -> None:
    """Print ``result`` as indented JSON on stdout and, when ``out`` names a file, write it there
    too (the bench commands' ``--out``)."""
    text = json.dumps(result, indent=2)
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")
