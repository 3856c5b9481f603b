"""``roundtabled doctor``: is everything in place for a roundtable? Each check prints ✓ or ✗ (or
``-`` when an earlier failure makes it moot) and, when it fails, one fix-it hint.

Checks, in order (each talks to the real thing, nothing is assumed):

1. **config** — the configuration file in use (the settings already loaded without error).
2. **server** — ``GET {server_url}/global/health`` answers; shows the OpenCode version.
3. **auth** — the server accepts our credentials (or needs none); a 401 names the setting.
4. **events** — ``GET /global/event`` delivers its first ``server.connected`` within
   :data:`STREAM_TIMEOUT_S`.
5. **tools** — the ``roundtable``/``available_agents`` tools and the observer agent are installed
   for the current project (``.opencode/`` here or above) or globally, with the
   ``roundtabled/control.ts`` they import, and the server loaded them
   (``GET /experimental/tool/ids`` lists them; else: its config directory, from ``GET /path``).
6. **agents** — the server lists at least two agents a roundtable can seat, and the hidden
   observer agent ``roundtable-observer``.
7. **plugin** — the roundtable plugin file (``plugin/roundtable-plugin.ts``) is installed with
   the daemon's plugin version (and the ``roundtabled/control.ts`` it imports), and the daemon
   heard from it for this directory (the positive signal of the plugin mode, docs/plugin.md);
   without it the daemon hides prompts by PATCH and refuses ``context: "recent"``.
8. **daemon** — the control API answers ``/v1/ping`` and, with the token, ``/v1/health``: ready,
   connected to the same server, number of active roundtables.

Before the checks, the server's OpenCode major is asked (:mod:`roundtabled.service.server_major`):
something that is no OpenCode (or a 2.x refusing the password) is reported in one line on stderr,
exit code 2, no check run. A 2.x server (driven by the 2.x shell, docs/opencode-server.md "2.x")
gets one line saying so and what 2.x refuses, then 2.x's own checks
(:mod:`roundtabled.service.doctor_v2`: server, auth, events, plugin, agents, daemon), no 1.x
check; where its project (and global directory) holds roundtabled's 1.x files only, a line on
stderr says to run ``roundtabled install-tool --opencode 2`` (exit 2). On a 1.x server holding
only the 2.x plugin, the same the other way round. A server that does not answer has no major:
the **server** check says so and a **files** line lists roundtabled's files on disk for each
major (or names both ``install-tool --opencode`` commands), instead of the tools, agents and
plugin checks. The **config** line names the file the settings were read from (``--config``).

Exit code: 0 when every check passed, 1 otherwise (2: the server refused as above). Secrets are
never printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from roundtabled import __version__
from roundtabled.engine.plugins import PLUGIN_VERSION
from roundtabled.errors import RoundtableError
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.service import config as cfg
from roundtabled.service import install

OBSERVER_AGENT = "roundtable-observer"
"""Name of the built-in observer agent installed with the tools."""
HTTP_TIMEOUT_S = 5.0
"""Timeout of each HTTP check, in seconds."""
STREAM_TIMEOUT_S = 5.0
"""How long the event stream may take to send ``server.connected``, in seconds."""


@dataclass
class Check:
    """The outcome of one check. ``ok`` is ``None`` when the check was skipped."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""
    warn: bool = False
    """A passed check worth a look (printed with ``!``): it does not fail doctor."""


def _marks() -> tuple[str, str, str]:
    enc = (getattr(sys.stdout, "encoding", None) or "ascii").lower()
    try:
        "✓✗".encode(enc)
    except (UnicodeEncodeError, LookupError):
        return "OK  ", "FAIL", "-   "
    return "✓", "✗", "-"


def print_check(check: Check) -> None:
    """One line for ``check`` on stdout (``✓``, ``✗``, ``-`` skipped, ``!`` a warning), and its
    fix on the next line when it failed."""
    good, bad, skip = _marks()
    mark = good if check.ok else (skip if check.ok is None else bad)
    if check.ok and check.warn:
        mark = "!"
    print(f"{mark} {check.name:8} {check.detail}")
    if check.fix and not check.ok:
        print(f"  {'':8} fix: {check.fix}")


def _auth(settings: cfg.Settings) -> aiohttp.BasicAuth | None:
    if settings.server_password is None:
        return None
    return aiohttp.BasicAuth(settings.server_username, settings.server_password.get_secret_value())


def _start_server_hint(settings: cfg.Settings) -> str:
    """How to get the server up: start it, and first install OpenCode where it is not found
    (after ``pip install`` alone there is none: it is an npm package)."""
    from roundtabled.opencode.binary import OPENCODE_VERSION, find_opencode_binary

    hint = (
        f"start the OpenCode server: `opencode serve --port {_port(settings.server_url)}` "
        "(or `systemctl --user start opencode-serve`), or point server_url / "
        "ROUNDTABLED_SERVER_URL at the running one"
    )
    try:
        find_opencode_binary()
    except FileNotFoundError:
        hint = (
            "OpenCode is not installed here: install it with `npm install -g "
            f"opencode-ai@{OPENCODE_VERSION}` (Node.js's npm; see https://opencode.ai), then "
            + hint
        )
    return hint


def _port(url: str) -> int:
    """The port of ``url`` (4096 when it names none or an invalid one: this is only a hint)."""
    try:
        return urlsplit(url).port or 4096
    except ValueError:
        return 4096


def _url_problem(url: str) -> str | None:
    """Why ``url`` cannot be the OpenCode server's base URL (``None``: it can): a scheme other
    than http/https, no host, or a port that is not a number from 1 to 65535."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"server_url {url!r} is not a valid URL: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"server_url {url!r} must be an http:// or https:// URL with a host"
    if port == 0:
        return f"server_url {url!r} has port 0"
    return None


async def _server_checks(http: aiohttp.ClientSession, settings: cfg.Settings) -> list[Check]:
    """server, auth, events."""
    url = settings.server_url
    timeout = aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S)
    try:
        async with http.get(f"{url}/global/health", timeout=timeout) as resp:
            status = resp.status
            body = await resp.read()
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
        return [
            Check("server", False, f"{url} not reachable: {reason}", _start_server_hint(settings)),
            Check("auth", None, "not checked (server unreachable)"),
            Check("events", None, "not checked (server unreachable)"),
        ]
    version = "?"
    if status == 200:
        with contextlib.suppress(orjson.JSONDecodeError, AttributeError):
            version = str(orjson.loads(body).get("version", "?"))
    if status not in (200, 401):
        return [
            Check(
                "server",
                False,
                f"{url}/global/health answered HTTP {status}",
                "is server_url the OpenCode server (`opencode serve`)?",
            ),
            Check("auth", None, "not checked"),
            Check("events", None, "not checked"),
        ]
    checks: list[Check] = []
    auth = _auth(settings)
    if status == 200 and auth is None:
        checks.append(Check("server", True, f"{url} reachable, OpenCode {version}"))
        checks.append(Check("auth", True, "the server needs no password"))
    else:
        try:
            async with http.get(f"{url}/global/health", timeout=timeout, auth=auth) as resp:
                status2 = resp.status
                body = await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            checks.append(Check("server", False, f"{url} stopped answering: {exc}"))
            return [*checks, Check("auth", None, "not checked"), Check("events", None, "-")]
        if status2 == 200:
            with contextlib.suppress(orjson.JSONDecodeError, AttributeError):
                version = str(orjson.loads(body).get("version", "?"))
        checks.append(Check("server", True, f"{url} reachable, OpenCode {version}"))
        if status2 == 200:
            detail = (
                "password accepted"
                if status == 401
                else "the server needs no password (ours is configured but unused)"
            )
            checks.append(Check("auth", True, detail))
        elif auth is None:
            checks.append(
                Check(
                    "auth",
                    False,
                    "the server requires a password (HTTP 401) and none is configured",
                    "set OPENCODE_SERVER_PASSWORD (the same value `opencode serve` uses) or "
                    "server_password in config.toml; for the service, in ~/.config/roundtabled/env",
                )
            )
            return [*checks, Check("events", None, "not checked (auth failed)")]
        else:
            checks.append(
                Check(
                    "auth",
                    False,
                    f"the server rejected user {settings.server_username!r} and the configured "
                    "password (HTTP 401)",
                    "use the OPENCODE_SERVER_PASSWORD (and OPENCODE_SERVER_USERNAME) that "
                    "`opencode serve` was started with",
                )
            )
            return [*checks, Check("events", None, "not checked (auth failed)")]
    checks.append(await _events_check(http, settings, auth))
    return checks


def _v1_connected(data: bytes) -> bool:
    """Whether a 1.x event's ``data`` (``{"payload": {"type": …}}`` or the event itself) is
    ``server.connected``."""
    with contextlib.suppress(orjson.JSONDecodeError):
        event = orjson.loads(data)
        payload = event.get("payload", event) if isinstance(event, dict) else {}
        return isinstance(payload, dict) and payload.get("type") == "server.connected"
    return False


async def _events_check(
    http: aiohttp.ClientSession, settings: cfg.Settings, auth: aiohttp.BasicAuth | None
) -> Check:
    headers = {"Authorization": auth.encode()} if auth is not None else {}
    return await events_check(http, settings.server_url, "/global/event", headers, _v1_connected)


async def events_check(
    http: aiohttp.ClientSession,
    server_url: str,
    route: str,
    headers: Mapping[str, str],
    connected: Callable[[bytes], bool],
) -> Check:
    """The ``events`` check: ``GET server_url + route`` answers 200 and streams a data event
    that ``connected`` (given the bytes after ``data:``) takes for ``server.connected`` within
    :data:`STREAM_TIMEOUT_S` seconds. ``headers``: the request's (its credentials)."""

    async def first_event() -> str:
        async with http.get(
            server_url + route,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=HTTP_TIMEOUT_S),
        ) as resp:
            if resp.status != 200:
                return f"HTTP {resp.status}"
            async for line in resp.content:
                # ``: heartbeat`` comments and blank separators carry no event
                if line.startswith(b"data:") and connected(line[5:]):
                    return "ok"
            return "the stream closed before server.connected"

    try:
        outcome = await asyncio.wait_for(first_event(), STREAM_TIMEOUT_S)
    except TimeoutError:
        outcome = f"no server.connected within {STREAM_TIMEOUT_S:g} s"
    except (aiohttp.ClientError, OSError) as exc:
        outcome = str(exc) or type(exc).__name__
    if outcome == "ok":
        return Check("events", True, f"{route} streams (server.connected received)")
    return Check(
        "events",
        False,
        f"{route}: {outcome}",
        "a proxy in front of OpenCode must not buffer text/event-stream responses; "
        "check the server's log",
    )


def _project_root(cwd: Path) -> Path:
    """The directory whose ``.opencode`` OpenCode would load for ``cwd``
    (:func:`roundtabled.service.install.project_root`)."""
    return install.project_root(cwd)


def _tools_check(env: Mapping[str, str], cwd: Path, control_url: str) -> Check:
    """Tools and observer agent in the project (``.opencode``) or globally, calling our daemon."""

    root = _project_root(cwd)
    fix = f"roundtabled install-tool --project {root} (this project) or --global (every project)"
    status: dict[str, Any] = install.installed_status(root, env)
    complete: list[str] = []
    partial: list[str] = []
    wrong_url: list[str] = []
    no_control: list[str] = []
    for label, entry in status.items():
        tools = entry.get("tools") or {}
        have = [n for n in install.TOOL_FILES if n in tools]
        where = f"{label} ({entry.get('path')})"
        if entry.get("control") is None and any(
            (info or {}).get("needsControl") for info in tools.values()
        ):
            no_control.append(where)
        if len(have) == len(install.TOOL_FILES) and entry.get("observer"):
            complete.append(where)
        elif have or entry.get("observer"):
            missing = [n for n in install.TOOL_FILES if n not in tools]
            if not entry.get("observer"):
                missing.append("the observer agent")
            partial.append(f"{where} lacks {', '.join(missing)}")
        for name, info in tools.items():
            url = (info or {}).get("url")
            if url and url.rstrip("/") != control_url.rstrip("/"):
                wrong_url.append(f"{where} {name} calls {url}")
    control = f"{install.CONTROL_DIR}/{install.CONTROL_FILE}"
    if no_control:
        # A shim whose import fails takes OpenCode's whole tool registry down with it.
        return Check(
            "tools",
            False,
            f"{'; '.join(no_control)}: the tools import {control}, which is missing (OpenCode "
            "then fails every tool listing with HTTP 500)",
            f"{fix}, then restart opencode serve",
        )
    if wrong_url:
        return Check(
            "tools",
            False,
            f"{'; '.join(wrong_url)}, but the daemon is at {control_url}",
            f"re-run roundtabled install-tool (with ROUNDTABLED_URL={control_url} if needed), "
            "then restart opencode serve",
        )
    if complete:
        return Check("tools", True, "installed: " + ", ".join(complete))
    wrong_major = install.wrong_major_line(root, env, 1)
    if wrong_major is not None:
        return Check("tools", False, wrong_major, f"{fix}, with --opencode 1")
    if partial:
        return Check("tools", False, "incomplete: " + "; ".join(partial), fix)
    return Check(
        "tools",
        False,
        f"the roundtable tools are installed neither in the project ({status['project']['path']})"
        f" nor globally ({status['global']['path']})",
        fix,
    )


async def _tools_loaded_check(settings: cfg.Settings, cwd: Path, files: Check) -> Check:
    """``files`` (tool files found) confirmed by what the server loaded for ``cwd``: its
    ``GET /experimental/tool/ids`` must list every tool. A server whose configuration directory
    differs from ours (another ``XDG_CONFIG_HOME``), or started before the install, does not.
    """

    password = settings.server_password
    client = OpenCodeClient(
        settings.server_url,
        username=settings.server_username,
        password=password.get_secret_value() if password is not None else None,
        timeout=HTTP_TIMEOUT_S * 6,  # the first call in a directory installs its plugins
    )
    try:
        async with client:
            ids = set(await client.tool_ids(str(cwd)))
            where = await client.path()
    except RoundtableError as exc:
        return Check("tools", False, f"{files.detail}; GET /experimental/tool/ids failed: {exc}")
    names = [n.removesuffix(".ts") for n in install.TOOL_FILES]
    missing = [n for n in names if n not in ids]
    if not missing:
        return Check("tools", True, f"{files.detail}; the server loaded {', '.join(names)}")
    server_config = where.get("config") if isinstance(where, dict) else None
    return Check(
        "tools",
        False,
        f"{files.detail.replace('installed: ', 'installed in ', 1)}, which this OpenCode server "
        f"does not read for {cwd} (it lacks {', '.join(missing)}; its config directory is "
        f"{server_config or '?'})",
        f"install with the server's environment (XDG_CONFIG_HOME={Path(str(server_config)).parent}"
        " roundtabled install-tool --global) or into the project "
        f"(roundtabled install-tool --project {_project_root(cwd)}); if the files were installed "
        "after the server started, restart opencode serve",
    )


async def _agents_check(http: aiohttp.ClientSession, settings: cfg.Settings, cwd: Path) -> Check:
    try:
        async with http.get(
            f"{settings.server_url}/agent",
            params={"directory": str(cwd)},
            auth=_auth(settings),
            timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S * 2),
        ) as resp:
            if resp.status != 200:
                return Check("agents", False, f"GET /agent answered HTTP {resp.status}")
            agents = orjson.loads(await resp.read())
    except (aiohttp.ClientError, TimeoutError, OSError, orjson.JSONDecodeError) as exc:
        return Check("agents", False, f"GET /agent failed: {exc}")
    names = sorted(str(a.get("name")) for a in agents if not a.get("hidden"))
    custom = sorted(
        str(a.get("name")) for a in agents if not a.get("hidden") and not a.get("native")
    )
    has_observer = any(a.get("name") == OBSERVER_AGENT for a in agents)
    detail = f"{len(names)} seatable: {', '.join(names)}"
    if not has_observer:
        return Check(
            "agents",
            False,
            f"{detail}; the observer agent {OBSERVER_AGENT!r} is missing",
            "roundtabled install-tool (installs the observer agent with the tools), then restart "
            "`opencode serve` so it loads it",
        )
    if len(custom) < 2:
        return Check(
            "agents",
            True,
            f"{detail} (only the built-ins: add debaters such as pm, dev, rv from "
            "examples/opencode.json)",
        )
    return Check("agents", True, f"{detail}; observer {OBSERVER_AGENT} present")


async def plugin_check(
    http: aiohttp.ClientSession,
    settings: cfg.Settings,
    control_url: str,
    env: Mapping[str, str],
    cwd: Path,
) -> Check:
    """The plugin file and its version, then the daemon's report of it for ``cwd``."""
    root = _project_root(cwd)
    fix = f"roundtabled install-tool --project {root} (or --global), then restart opencode serve"
    status: dict[str, Any] = install.installed_status(root, env)
    found = [(label, e["plugin"]) for label, e in status.items() if e.get("plugin")]
    if not found:  # optional: the daemon hides prompts by PATCH without it
        return Check(
            "plugin",
            True,
            "the roundtable plugin is not installed: seats' earlier prompts are hidden by one "
            f"PATCH per turn and context 'recent' is refused (to install: {fix})",
            warn=True,
        )
    orphans = [
        p["path"]
        for label, p in found
        if p.get("needsControl") and status[label].get("control") is None
    ]
    if orphans:  # OpenCode skips a plugin whose import fails
        control = f"{install.CONTROL_DIR}/{install.CONTROL_FILE}"
        return Check(
            "plugin", False, f"{', '.join(orphans)} imports {control}, which is missing", fix
        )
    stale = [f"{p['path']} has version {p['version']!r}" for _, p in found]
    if all(p["version"] != PLUGIN_VERSION for _, p in found):
        return Check(
            "plugin", False, f"{'; '.join(stale)}, the daemon speaks {PLUGIN_VERSION!r}", fix
        )
    files = ", ".join(f"{label} ({p['path']})" for label, p in found)
    try:
        token = settings.token_file.read_text().strip()
        async with http.get(
            f"{control_url}/v1/health",
            headers={"Authorization": f"Bearer {token}"},
            timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S),
        ) as resp:
            health = orjson.loads(await resp.read()) if resp.status == 200 else {}
    except (aiohttp.ClientError, TimeoutError, OSError, orjson.JSONDecodeError):
        return Check(
            "plugin", None, f"version {PLUGIN_VERSION} installed: {files}; daemon not reached"
        )
    reports = (health.get("plugin") or {}).get("reports") or []
    here = os.path.realpath(cwd)
    if any(os.path.realpath(str(r.get("directory"))) == here for r in reports):
        return Check(
            "plugin", True, f"version {PLUGIN_VERSION} installed: {files}; loaded for {cwd}"
        )
    return Check(
        "plugin",
        False,
        f"version {PLUGIN_VERSION} installed: {files}, but the daemon has no report of it "
        f"loaded for {cwd} (installed after the server started, --pure, or another config "
        "directory): seats' prompts are hidden by PATCH and context 'recent' is refused",
        "restart opencode serve (with the environment install-tool used), then roundtabled doctor",
    )


async def daemon_check(
    http: aiohttp.ClientSession, settings: cfg.Settings, control_url: str
) -> Check:
    """The daemon at ``control_url``: it answers ``/v1/ping`` as roundtabled, the token of
    ``settings`` is accepted, and its ``/v1/health`` (the event stream's state) is good or says
    why not."""
    timeout = aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S)
    start_hint = "roundtabled serve  (or: systemctl --user start roundtabled; see its journal)"
    try:
        async with http.get(f"{control_url}/v1/ping", timeout=timeout) as resp:
            ping = orjson.loads(await resp.read()) if resp.status == 200 else {}
    except (aiohttp.ClientError, TimeoutError, OSError, orjson.JSONDecodeError) as exc:
        return Check("daemon", False, f"not running at {control_url}: {exc}", start_hint)
    if ping.get("service") != "roundtabled":
        return Check(
            "daemon",
            False,
            f"{control_url} is not roundtabled",
            "another program uses the control port: set control_port",
        )
    try:
        token = settings.token_file.read_text().strip()
    except OSError as exc:
        return Check(
            "daemon",
            False,
            f"running ({ping.get('version')}) but the token file {settings.token_file} cannot be "
            f"read: {exc.strerror}",
            "run the CLI with the same configuration (XDG_CONFIG_HOME, token_file) as the daemon",
        )
    try:
        async with http.get(
            f"{control_url}/v1/health",
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
        ) as resp:
            status = resp.status
            health = orjson.loads(await resp.read())
    except (aiohttp.ClientError, TimeoutError, OSError, orjson.JSONDecodeError) as exc:
        return Check("daemon", False, f"/v1/health failed: {exc}", start_hint)
    if status == 401:
        return Check(
            "daemon",
            False,
            f"running at {control_url} but it rejects the token of {settings.token_file}",
            "the daemon uses another token file: align token_file / XDG_CONFIG_HOME",
        )
    server = health.get("server") or {}
    version = health.get("version")
    active = health.get("active", 0)
    if not health.get("ready"):
        return Check(
            "daemon",
            False,
            f"running ({version}) but not ready: "
            + str(server.get("lastError") or "waiting for the server"),
            "see the checks above and the daemon's log (journalctl --user -u roundtabled)",
        )
    if str(server.get("url", "")).rstrip("/") != settings.server_url:
        return Check(
            "daemon",
            False,
            f"running and ready, but connected to {server.get('url')} while this shell's "
            f"configuration says {settings.server_url}",
            "use the same server_url for the daemon and the CLI",
        )
    since = server.get("reconnectingSince")
    if since and not server.get("connected"):
        # The daemon retries by itself (an `opencode serve` restart is a few seconds of this):
        # a warning, not a failure; the log is no fix for a wait.
        retry = server.get("retryMaxS")
        every = f", retrying every {retry:g} s or sooner" if isinstance(retry, int | float) else ""
        return Check(
            "daemon",
            True,
            f"running ({version}); event stream reconnecting since {since} "
            f"(last error: {server.get('lastError')}{every})",
            warn=True,
        )
    if server.get("lastError") or not server.get("connected"):
        return Check(
            "daemon",
            False,
            f"running ({version}) but its event stream is down: {server.get('lastError')}",
            "see the daemon's log (journalctl --user -u roundtabled)",
        )
    return Check(
        "daemon",
        True,
        f"roundtabled {version} at {control_url}, ready, {active} active roundtable"
        + ("" if active == 1 else "s"),
    )


V2_DOES = "start, extend, dry run, status, result, cancel, list, progress feed, export"
"""What the 2.x shell runs, as doctor's first line on a 2.x server names it."""
V2_REFUSES = "a start without a parent session"
"""What it refuses (:func:`roundtabled.engine.v2run.refusal`), as the same line names it."""


def _files_on_disk(root: Path, env: Mapping[str, str]) -> Check:
    """With the server unreachable (its major unknown): which of roundtabled's files for each
    OpenCode major are in the project's ``.opencode`` and the global config directory
    (:func:`roundtabled.service.install.major_files`), and both install commands when there are
    none. ``ok`` is ``None``: nothing is known until a server answers."""
    targets = (install.tool_targets(root, False, env), install.tool_targets(None, True, env))
    held = [
        f"for OpenCode {major}.x: " + ", ".join(str(p) for p in files)
        for major in (1, 2)
        if (files := [p for t in targets for p in install.major_files(t, major)])
    ]
    if held:
        return Check(
            "files",
            None,
            "not checked against a server (its major is unknown); on disk " + "; ".join(held),
        )
    return Check(
        "files",
        None,
        f"no roundtabled files in the project ({targets[0]}) nor globally ({targets[1]})",
        f"roundtabled install-tool --opencode 1 (OpenCode 1.x) or --opencode 2 (2.x), with "
        f"--project {root} or --global",
    )


def _report(checks: list[Check]) -> int:
    """Print ``checks`` and the summary line; 0 when none failed, else 1."""
    for check in checks:
        print_check(check)
    failed = [c.name for c in checks if c.ok is False]
    print()
    if failed:
        print(f"{len(failed)} problem(s): {', '.join(failed)}")
        return 1
    print("All checks passed.")
    return 0


async def run(
    settings: cfg.Settings,
    control_url: str,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    config_file: Path | None = None,
) -> int:
    """Run every check, print the report; 0 when all passed, else 1.

    Args:
        settings: effective settings.
        control_url: the daemon's control API base URL.
        env: the environment for XDG lookups (default ``os.environ``).
        cwd: the project directory to check (default the current directory).
        config_file: the configuration file the settings were read from (``--config``), named
            on the config line; default :func:`roundtabled.service.config.default_config_file`.
    """

    env = os.environ if env is None else env
    cwd = (cwd or Path.cwd()).resolve()
    conf = config_file if config_file is not None else cfg.default_config_file(env)
    checks = [
        Check(
            "config",
            True,
            f"roundtabled {__version__}; "
            + (f"config file {conf}" if conf.is_file() else f"no config file ({conf}): defaults")
            + f"; server {settings.server_url}; project {cwd} (tools and agents checked for it;"
            " another: --directory DIR)",
        )
    ]
    problem = _url_problem(settings.server_url)
    if problem is None:
        from roundtabled.opencode.detect import detect_server
        from roundtabled.service.server_major import EXIT_REFUSED, refusal

        password = settings.server_password.get_secret_value() if settings.server_password else None
        found = await detect_server(
            settings.server_url,
            password=password,
            username=settings.server_username,
            timeout=HTTP_TIMEOUT_S,
        )
        if not found.reachable:
            # No major to check against: say so, and what is on disk for each major.
            checks += [
                Check(
                    "server",
                    False,
                    f"{settings.server_url} not reachable ({found.detail}): its OpenCode major "
                    "is unknown",
                    _start_server_hint(settings),
                ),
                Check("auth", None, "not checked (server unreachable)"),
                Check("events", None, "not checked (server unreachable)"),
                _files_on_disk(_project_root(cwd), env),
                Check("agents", None, "not checked (server unreachable)"),
            ]
            async with aiohttp.ClientSession() as http:
                checks.append(await daemon_check(http, settings, control_url))
            return _report(checks)
        line = refusal(found, settings.server_url)
        if line is None and found.major == 2:
            from roundtabled.service import doctor_v2

            print(
                f"OpenCode {found.version} at {settings.server_url}: driven by the 2.x shell "
                f"({V2_DOES}; refused on 2.x: {V2_REFUSES}); the checks below are 2.x's"
            )
            other = install.wrong_major_line(_project_root(cwd), env, 2)
            if other is not None:
                print(f"Error: {other}", file=sys.stderr)
                return EXIT_REFUSED  # the other major's files: what to run, exit 2
            checks += await doctor_v2.checks(settings, found, control_url, env, _project_root(cwd))
            return _report(checks)
        if line is None and found.major == 1 and found.auth == "ok":
            # Only the 2.x plugin where 1.x looks: the tools do not exist for the person.
            other = install.wrong_major_line(_project_root(cwd), env, 1)
            if other is not None:
                print(f"Error: {other}", file=sys.stderr)
                return EXIT_REFUSED
        if line is not None:
            print(f"Error: {line}", file=sys.stderr)
            # The files for the major that answers, or the other one's, say the same thing to
            # whoever installs for 2.x before the daemon drives it.
            if found.major == 2:
                other = install.wrong_major_line(_project_root(cwd), env, 2)
                if other is not None:
                    print(other, file=sys.stderr)
            return EXIT_REFUSED
    if problem is not None:
        checks.append(
            Check(
                "server",
                False,
                problem,
                "set server_url in config.toml (or ROUNDTABLED_SERVER_URL, or --server-url) to "
                "the OpenCode server's address, e.g. http://127.0.0.1:4096",
            )
        )
        checks.append(Check("auth", None, "not checked (server_url invalid)"))
        checks.append(Check("events", None, "not checked (server_url invalid)"))
    async with aiohttp.ClientSession() as http:
        if problem is None:
            checks += await _server_checks(http, settings)
        tools = _tools_check(env, cwd, control_url)
        server_ok = all(c.ok for c in checks if c.name in ("server", "auth"))
        if server_ok and tools.ok:
            tools = await _tools_loaded_check(settings, cwd, tools)
        checks.append(tools)
        if server_ok:
            checks.append(await _agents_check(http, settings, cwd))
        else:
            checks.append(Check("agents", None, "not checked (server unreachable or auth failed)"))
        checks.append(await plugin_check(http, settings, control_url, env, cwd))
        checks.append(await daemon_check(http, settings, control_url))
    return _report(checks)
