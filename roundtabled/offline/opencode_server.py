"""Launch a private, offline ``opencode serve`` for tests, the demo and benchmarks.

Purpose: one real OpenCode server per test (or per demo), fully isolated from the user's machine:
its own ``XDG_*`` directories under ``root``, its own git project directory, a free loopback port,
and a provider ``scripted`` pointing at :class:`roundtabled.offline.scripted_llm.ScriptedLLM`.

Invariants:

- Nothing is downloaded. ``OPENCODE_DISABLE_MODELS_FETCH=1`` is set, and every config directory
  the server would ``npm install @opencode-ai/plugin`` into (the global
  ``$XDG_CONFIG_HOME/opencode`` and each project's ``.opencode``) is pre-filled by
  :func:`~roundtabled.opencode.config_dir.prefill_config_dir` (how: that module).
- The binary is :func:`~roundtabled.opencode.binary.find_opencode_binary`'s:
  ``$ROUNDTABLED_OPENCODE_BIN`` (another release) or the pinned one.
- The server runs in its own session / process group; :meth:`OpenCodeServer.stop` and
  :meth:`OpenCodeServer.kill` signal that group only. Servers still alive at interpreter exit are
  SIGKILLed (``atexit``), so a failing test leaves no orphan.
- Time units: seconds everywhere in this module's API.

OpenCode 2.x (``major=2``, the binary pinned in ``opencode-v2/``): the same layout, with these
differences (docs/opencode-server.md, "2.x"):

- Basic auth is always on: a 2.x server without ``OPENCODE_SERVER_PASSWORD`` makes up a password
  and prints it, so the harness makes one up itself (:attr:`OpenCodeServer.password`).
- Its ``XDG_*`` directories, ``HOME`` and log are its own (``xdg-v2/``, ``home-v2/``,
  ``opencode-v2.log``): both majors keep their data in ``$XDG_DATA_HOME/opencode/opencode.db``,
  and a 2.x server imports and migrates 1.x's history there.
- Nothing is pre-filled: a 2.x server installs nothing (its ``@opencode/plugin`` import is resolved
  by the binary itself).
- Ready when ``GET /api/info`` answers 200 (1.x: ``/global/health``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import random
import secrets
import signal
import socket
import time
import warnings
from pathlib import Path
from typing import Any, Literal

import aiohttp

from roundtabled.opencode.binary import find_opencode_binary
from roundtabled.opencode.config_dir import (
    PREFILL_MARKER,
    prefill_config_dir,
)

__all__ = [
    "AGENT_PROMPTS",
    "BUILD_PROMPT",
    "MODEL_IDS",
    "SEAT_COLORS",
    "SEAT_DESCRIPTIONS",
    "SEAT_PROMPTS",
    "OpenCodeServer",
    "agent_prompts_of",
    "free_port",
    "offline_config",
]


SEAT_COLORS = {"pm": "#3498db", "dev": "#2ecc71", "rv": "#e74c3c"}
SEAT_DESCRIPTIONS = {
    "pm": "Product manager seat",
    "dev": "Developer seat",
    "rv": "Reviewer seat",
}
SEAT_PROMPTS = {
    "pm": "You are pm, the product manager in a roundtable debate.\n"
    "Argue from the user's and the business's point of view. Be concise.",
    "dev": "You are dev, the developer in a roundtable debate.\n"
    "Argue from the implementation's point of view. Be concise.",
    "rv": "You are rv, the reviewer in a roundtable debate.\n"
    "Look for risks, gaps and contradictions. Be concise.",
}
BUILD_PROMPT = "You are build, the orchestrator."
MODEL_IDS = ("debater-1", "debater-2", "debater-3", "observer-1", "orchestrator-1")

#: First line of each agent prompt of :func:`offline_config` → agent name. The scripted LLM
#: recognises the agent of a request by this prefix of the system message.
AGENT_PROMPTS: dict[str, str] = {
    **{p.splitlines()[0]: name for name, p in SEAT_PROMPTS.items()},
    BUILD_PROMPT: "build",
    # The built-in observer agent installed with the tools (roundtabled/agents/*.md).
    "You are the impartial roundtable observer.": "roundtable-observer",
}

# Processes to SIGKILL at interpreter exit (pid → process group id).
_LIVE: dict[int, int] = {}


@atexit.register
def _kill_leftovers() -> None:
    for pgid in list(_LIVE.values()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    _LIVE.clear()


# ----------------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------------


def offline_config(
    llm_base_url: str,
    *,
    extra_agents: dict[str, dict[str, Any]] | None = None,
    models: dict[str, dict[str, Any]] | list[str] | None = None,
    title: bool = False,
    auto_compaction: bool = False,
    context_limit: int = 128000,
    permission: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An ``opencode.json`` dict for the scripted provider.

    - ``llm_base_url``: the scripted LLM's ``.../v1`` URL.
    - provider ``scripted`` with models :data:`MODEL_IDS` (``models`` as a list replaces the ids;
      as a dict ``{id: extra model config}`` adds/overrides models, e.g. ``{"debater-1":
      {"cost": {"input": 3, "output": 15}}}``); each model has ``limit.context = context_limit``
      (tokens) and ``limit.output = min(4096, context_limit // 4)``.
    - seats ``pm``, ``dev``, ``rv``: subagents with :data:`SEAT_PROMPTS`, colours, and
      ``permission`` (default ``{"*": "deny"}``: no tools at all).
    - ``build`` (primary, default agent) with prompt :data:`BUILD_PROMPT`; keeps its tools.
    - ``title=False`` disables the title agent (no extra title request); ``auto_compaction``
      toggles ``compaction.auto``. ``extra_agents`` are merged into ``agent`` last.
    """
    model_cfg: dict[str, dict[str, Any]] = {}
    # The output reserve must leave room in the context: with ``output >= context`` OpenCode
    # sees every reply as an overflow and loops compaction → "Continue" → compaction forever.
    output_limit = min(4096, context_limit // 4)
    ids = list(models) if isinstance(models, list) else list(MODEL_IDS)
    for mid in ids:
        model_cfg[mid] = {
            "name": mid.replace("-", " ").title(),
            "limit": {"context": context_limit, "output": output_limit},
        }
    if isinstance(models, dict):
        for mid, extra in models.items():
            base = model_cfg.setdefault(
                mid, {"name": mid, "limit": {"context": context_limit, "output": output_limit}}
            )
            base.update(extra)
    first = ids[0] if ids else next(iter(model_cfg))
    default_model = "orchestrator-1" if "orchestrator-1" in model_cfg else first
    seat_permission = permission if permission is not None else {"*": "deny"}
    agents: dict[str, dict[str, Any]] = {
        "build": {"mode": "primary", "prompt": BUILD_PROMPT},
    }
    if not title:
        agents["title"] = {"disable": True}
    for name, prompt in SEAT_PROMPTS.items():
        agents[name] = {
            "mode": "subagent",
            "description": SEAT_DESCRIPTIONS[name],
            "prompt": prompt,
            "color": SEAT_COLORS[name],
            "permission": dict(seat_permission),
        }
    for name, cfg in (extra_agents or {}).items():
        agents[name] = {**agents.get(name, {}), **cfg}
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "compaction": {"auto": auto_compaction},
        "provider": {
            "scripted": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted LLM",
                "options": {"baseURL": llm_base_url, "apiKey": "unused"},
                "models": model_cfg,
            }
        },
        "model": f"scripted/{default_model}",
        "small_model": f"scripted/{default_model}",
        "default_agent": "build",
        "permission": {
            "edit": "deny",
            "bash": "deny",
            "webfetch": "deny",
            "external_directory": "deny",
            "question": "deny",
        },
        "agent": agents,
    }


def agent_prompts_of(config: dict[str, Any]) -> dict[str, str]:
    """``{first line of prompt: agent name}`` for every agent of ``config`` with a prompt."""
    out: dict[str, str] = {}
    for name, cfg in (config.get("agent") or {}).items():
        prompt = cfg.get("prompt") if isinstance(cfg, dict) else None
        if isinstance(prompt, str) and prompt.strip():
            out[prompt.strip().splitlines()[0]] = name
    return out


# ----------------------------------------------------------------------------------------------
# Server
# ----------------------------------------------------------------------------------------------


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_PORT = 10000


def ephemeral_port_range() -> tuple[int, int]:
    """The kernel's range for ports it picks itself (``bind(0)``, outgoing connections), inclusive.

    Read from ``/proc/sys/net/ipv4/ip_local_port_range``; Linux's default ``(32768, 60999)`` where
    that file cannot be read."""
    try:
        low, high = (int(x) for x in _EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now and that the kernel never picks by itself.

    The port is chosen at random below the kernel's ephemeral range and checked with a bind. A
    port from ``bind(0)`` comes from the pool the kernel also draws outgoing connections' local
    ports from, so between this call and the caller's own bind (seconds later, after an
    ``opencode serve`` started) a client socket could take it and the caller fails with "address
    already in use". Below the range only another explicit bind can. Falls back to ``bind(0)``
    when the range leaves no room or 200 tries found nothing free.
    """
    low, _ = ephemeral_port_range()
    rng = random.SystemRandom()
    if low - 1 > _LOWEST_PORT:
        for _ in range(200):
            port = rng.randint(_LOWEST_PORT, low - 1)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _run(*cmd: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {out.decode()}")


def _signal_group(proc: asyncio.subprocess.Process | None, sig: int) -> None:
    """Send ``sig`` to the process group of ``proc`` (the server and the children it spawned),
    if it still runs."""
    if proc is None or proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


class OpenCodeServer:
    """A private ``opencode serve`` process.

    Layout under ``root``: ``<directory_name>/`` (git project with ``opencode.json`` and a
    pre-filled ``.opencode/``), ``xdg/{config,data,cache,state}``, ``home/``, ``opencode.log``.

    ``env`` entries are added to (and override) the server's environment; ``password`` turns on
    Basic auth (user ``opencode``) and is used by the health check and :attr:`auth`.

    ``major`` picks the OpenCode major to run (1: the pinned 1.x; 2: the pinned 2.x, see the
    module docstring); with ``major=2`` and no ``password`` one is made up.

    ``config_in="global"`` writes ``config`` to the global ``$XDG_CONFIG_HOME/opencode`` instead
    and starts the server in an empty directory (no ``opencode.json``, no git): a server run as
    a service outside any project. Projects are then made with :meth:`add_project`.
    """

    def __init__(
        self,
        root: Path,
        config: dict[str, Any],
        *,
        password: str | None = None,
        env: dict[str, str] | None = None,
        directory_name: str = "project",
        config_in: Literal["project", "global"] = "project",
        major: Literal[1, 2] = 1,
    ) -> None:
        self.root = Path(root)
        self.config = config
        self.config_in = config_in
        self.major = major
        if major == 2 and not password:
            password = secrets.token_urlsafe(18)
        self.password = password
        self.extra_env = dict(env or {})
        self.directory_name = directory_name
        self.binary = find_opencode_binary(major)
        self._proc: asyncio.subprocess.Process | None = None
        self._port: int | None = None
        self._log_file: Any = None
        self.startup_seconds: float | None = None
        #: ``version`` of ``/global/health`` (2.x: ``/api/info``) once started (the release
        #: under test).
        self.version: str | None = None

    # -- properties -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def project_dir(self) -> Path:
        return self.root / self.directory_name

    @property
    def _suffix(self) -> str:
        return "" if self.major == 1 else f"-v{self.major}"

    @property
    def log_path(self) -> Path:
        return self.root / f"opencode{self._suffix}.log"

    @property
    def xdg_dir(self) -> Path:
        """``root/xdg`` (2.x: ``root/xdg-v2``): each major has its own data directories."""
        return self.root / f"xdg{self._suffix}"

    @property
    def home_dir(self) -> Path:
        return self.root / f"home{self._suffix}"

    @property
    def global_config_dir(self) -> Path:
        """``$XDG_CONFIG_HOME/opencode`` of this server."""
        return self.xdg_dir / "config" / "opencode"

    @property
    def auth_headers(self) -> dict[str, str]:
        """``{"Authorization": "Basic …"}`` when a password is set, else ``{}``. Preferred over
        :attr:`auth`: aiohttp 3.14 deprecates ``BasicAuth`` and ``ClientSession(auth=)``."""
        if not self.password:
            return {}
        return {"Authorization": aiohttp.encode_basic_auth("opencode", self.password)}

    @property
    def auth(self) -> aiohttp.BasicAuth | None:
        """``aiohttp.BasicAuth("opencode", password)`` or ``None`` (deprecated by aiohttp 3.14;
        see :attr:`auth_headers`)."""
        if not self.password:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return aiohttp.BasicAuth("opencode", self.password)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    def client(self, **kwargs: Any) -> aiohttp.ClientSession:
        """An ``aiohttp.ClientSession`` with ``base_url`` = :attr:`url` and :attr:`auth_headers`
        (use as ``async with server.client() as http: await http.get("/session")``)."""
        kwargs.setdefault("timeout", aiohttp.ClientTimeout(total=60))
        headers = {**self.auth_headers, **(kwargs.pop("headers", None) or {})}
        return aiohttp.ClientSession(base_url=self.url, headers=headers, **kwargs)

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    # -- setup --------------------------------------------------------------------------------

    async def add_project(self, name: str, config: dict[str, Any] | None = None) -> Path:
        """Create ``root/name`` as another git project with ``config`` (default: the server's
        config); returns its path.

        Address it with ``?directory=<path>`` / ``x-opencode-directory``.
        """
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        (path / "opencode.json").write_text(json.dumps(config or self.config, indent=2))
        if self.major == 1:
            prefill_config_dir(path / ".opencode")
        if not (path / ".git").exists():
            git = (
                "git",
                "-c",
                "user.name=roundtabled-tests",
                "-c",
                "user.email=tests@roundtabled.invalid",
                "-c",
                "commit.gpgsign=false",
            )
            await _run("git", "init", "-q", "-b", "main", cwd=path)
            await _run(*git, "add", "-A", cwd=path)
            await _run(*git, "commit", "-q", "--allow-empty", "-m", "init", cwd=path)
        return path

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        for key in list(env):
            if key.startswith("OPENCODE_"):
                del env[key]
        xdg = self.xdg_dir
        env.update(
            XDG_CONFIG_HOME=str(xdg / "config"),
            XDG_DATA_HOME=str(xdg / "data"),
            XDG_CACHE_HOME=str(xdg / "cache"),
            XDG_STATE_HOME=str(xdg / "state"),
            HOME=str(self.home_dir),
            OPENCODE_DISABLE_MODELS_FETCH="1",
            OPENCODE_DISABLE_AUTOUPDATE="1",
            # The server's built-in plugins (provider logins) and LSP downloads play no part
            # offline; external plugins (a project's plugin/*.ts) still load.
            # docs/opencode-server.md, "Start-up of a private server".
            OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
            OPENCODE_DISABLE_LSP_DOWNLOAD="1",
        )
        if self.password:
            env["OPENCODE_SERVER_PASSWORD"] = self.password
        env.update(self.extra_env)
        return env

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, startup_timeout: float = 30.0) -> None:
        """Prepare directories (first time) and spawn the server; wait until healthy.

        Raises :class:`RuntimeError` with the log tail if it is not healthy within
        ``startup_timeout`` s.
        """
        if self.running:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        for sub in ("config", "data", "cache", "state"):
            (self.xdg_dir / sub).mkdir(parents=True, exist_ok=True)
        self.home_dir.mkdir(exist_ok=True)
        if self.major == 1:
            prefill_config_dir(self.global_config_dir)
        else:
            self.global_config_dir.mkdir(parents=True, exist_ok=True)
        if self.config_in == "global":
            (self.global_config_dir / "opencode.json").write_text(json.dumps(self.config, indent=2))
            self.project_dir.mkdir(parents=True, exist_ok=True)
        else:
            await self.add_project(self.directory_name)
        if self._port is not None:
            await self._spawn(self._port, startup_timeout)
            return
        # A free port can be taken by another process (a parallel test worker) before the server
        # binds it; the server then exits at once with "ServeError": try another port.
        for attempt in range(3):
            try:
                await self._spawn(free_port(), startup_timeout)
                return
            except RuntimeError:
                if attempt == 2 or "ServeError" not in self.log_tail(5):
                    raise

    async def _spawn(self, port: int, startup_timeout: float) -> None:
        t0 = time.monotonic()
        self._port = port
        # a local file opened in append mode: instantaneous; closed in _reap
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115, ASYNC230
        self._log_file.write(f"\n=== roundtabled: starting on port {port} ===\n".encode())
        self._log_file.flush()
        self._proc = await asyncio.create_subprocess_exec(
            str(self.binary),
            "serve",
            "--port",
            str(port),
            "--hostname",
            "127.0.0.1",
            "--print-logs",
            "--log-level",
            # 2.x accepts only lower-case level names
            "INFO" if self.major == 1 else "info",
            cwd=self.project_dir,
            env=self._environment(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=self._log_file,
            start_new_session=True,
        )
        _LIVE[self._proc.pid] = self._proc.pid
        try:
            await self._wait_healthy(startup_timeout)
        except BaseException:
            await self.kill()
            raise
        self.startup_seconds = time.monotonic() - t0

    async def _wait_healthy(self, startup_timeout: float) -> None:
        deadline = time.monotonic() + startup_timeout
        last_error = "no attempt"
        health = "/global/health" if self.major == 1 else "/api/info"
        async with aiohttp.ClientSession(headers=self.auth_headers) as http:
            while time.monotonic() < deadline:
                if self._proc is None or self._proc.returncode is not None:
                    code = self._proc.returncode if self._proc else None
                    raise RuntimeError(
                        f"opencode serve exited with {code} during startup; log tail:\n"
                        + self.log_tail()
                    )
                # Short per-attempt timeout: the port accepts connections ~0.1 s before the
                # server is ready, and a request sent in that window is never answered.
                try:
                    async with http.get(
                        f"{self.url}{health}", timeout=aiohttp.ClientTimeout(total=0.5)
                    ) as resp:
                        if resp.status == 200:
                            body = await resp.json(content_type=None)
                            self.version = str(body.get("version"))
                            return
                        last_error = f"HTTP {resp.status}"
                except (aiohttp.ClientError, TimeoutError) as exc:
                    last_error = repr(exc)
                await asyncio.sleep(0.1)
        raise RuntimeError(
            f"opencode serve not healthy after {startup_timeout}s ({last_error}); log tail:\n"
            + self.log_tail()
        )

    async def _reap(self) -> None:
        proc = self._proc
        if proc is not None:
            await proc.wait()
            _LIVE.pop(proc.pid, None)
            # make sure nothing else is left in the group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    async def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the server's process group, wait up to ``grace`` s, then SIGKILL."""
        proc = self._proc
        if proc is None:
            return
        _signal_group(self._proc, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), grace)
        except TimeoutError:
            _signal_group(self._proc, signal.SIGKILL)
        await self._reap()

    async def kill(self) -> None:
        """SIGKILL the server's process group at once (simulates a crash)."""
        _signal_group(self._proc, signal.SIGKILL)
        await self._reap()

    async def restart(self, *, hard: bool = False, startup_timeout: float = 30.0) -> None:
        """Stop (``hard=True``: SIGKILL) and start again with the same data directories, on the
        same port if it can be bound again, else on a new free port (check :attr:`url`)."""
        await (self.kill() if hard else self.stop())
        try:
            await self._spawn(self.port, startup_timeout)
        except RuntimeError:
            await self._spawn(free_port(), startup_timeout)

    def npm_install_ran(self) -> bool:
        """True if the server reinstalled dependencies in any pre-filled config directory: the
        global config dir or the ``.opencode`` of a project created under ``root`` (detected by
        the :data:`PREFILL_MARKER` missing from its ``package-lock.json``).

        2.x pre-fills nothing: True if a ``node_modules`` appeared in its global config dir or
        any project's ``.opencode``."""
        if self.major != 1:
            return any(
                (d / "node_modules").exists()
                for d in [self.global_config_dir, *sorted(self.root.glob("*/.opencode"))]
            )
        for d in [self.global_config_dir, *sorted(self.root.glob("*/.opencode"))]:
            try:
                lock = json.loads((d / "package-lock.json").read_text())
            except (FileNotFoundError, ValueError):
                return True
            if not lock.get(PREFILL_MARKER):
                return True
        return False

    async def __aenter__(self) -> OpenCodeServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
