"""``roundtabled doctor``'s checks for an OpenCode 2.x server (docs/opencode-server.md, "2.x";
docs/design.md, "The 2.x shell"), with the same :class:`~roundtabled.service.doctor.Check` lines
as 1.x's and the same exit code (0 all passed, 1 otherwise):

1. **server** — the major detection found 2.x at ``server_url``: its version.
2. **auth** — ``GET /api/info`` answered with the configured password (a 2.x server always asks
   for one; one refusing it stops doctor before the checks, exit 2).
3. **events** — ``GET /api/event`` delivers its first ``server.connected`` within
   :data:`~roundtabled.service.doctor.STREAM_TIMEOUT_S`.
4. **plugin** — the roundtabled plugin for 2.x (``plugins/roundtabled/index.ts``) is installed
   for the project or globally with the daemon's
   :data:`~roundtabled.engine.plugins.PLUGIN_VERSION_V2`, and ``GET /api/plugin`` of the project
   lists it active (docs/plugin.md, "OpenCode 2.x").
5. **agents** — ``GET /api/agent`` of the project lists the agents a roundtable can seat and the
   hidden observer agent ``roundtable-observer``.
6. **daemon** — the control API answers (:func:`~roundtabled.service.doctor.daemon_check`),
   drives this 2.x server (its ``/v1/health`` names the 2.x plugin version) and shows whether it
   trusts a plugin report from the project (``plugin.reports``).

The 2.x JSON is read by the adapter (:mod:`roundtabled.opencode.v2`, :class:`~roundtabled.
opencode.port.V2Port`); this module only words what it says.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from roundtabled.engine.plugins import PLUGIN_VERSION_V2
from roundtabled.engine.v2_features import INSTALL, plugin_loaded, plugin_missing_note
from roundtabled.errors import RoundtableError
from roundtabled.opencode.detect import ServerFound
from roundtabled.opencode.port import V2Port
from roundtabled.opencode.v2 import V2Client, parse_v2_event
from roundtabled.service import config as cfg
from roundtabled.service import install
from roundtabled.service.doctor import (
    HTTP_TIMEOUT_S,
    OBSERVER_AGENT,
    Check,
    daemon_check,
    events_check,
)

__all__ = ["checks"]


def _v2_connected(data: bytes) -> bool:
    """Whether a 2.x event's ``data`` is ``server.connected``."""
    event = parse_v2_event(data)
    return event is not None and event.type == "server.connected"


async def _events_check(settings: cfg.Settings, password: str | None) -> Check:
    """``GET /api/event`` answers and sends ``server.connected`` (its first data event)."""
    headers = (
        {"Authorization": aiohttp.encode_basic_auth(settings.server_username, password)}
        if password
        else {}
    )
    async with aiohttp.ClientSession() as http:
        return await events_check(http, settings.server_url, "/api/event", headers, _v2_connected)


async def _plugin_check(port: V2Port, root: Path, env: Mapping[str, str]) -> Check:
    """The 2.x plugin file installed with the daemon's version, and loaded for ``root``."""
    fix = f"{INSTALL} --project {root} (or --global), then restart opencode"
    project_dir = install.tool_targets(root, False, env)
    global_dir = install.tool_targets(None, True, env)
    found = install.v2_plugin_versions(root, env)
    if not found:
        return Check(
            "plugin",
            False,
            f"{plugin_missing_note(str(root))} (no plugin file in the project, {project_dir}, "
            f"nor globally, {global_dir}; context 'recent' is refused)",
            fix,
        )
    stale = [
        f"{path} is {'an earlier version' if v is None else f'version {v!r}'}"
        for path, v in found
        if v != PLUGIN_VERSION_V2
    ]
    if stale:
        return Check(
            "plugin",
            False,
            f"{'; '.join(stale)}, the daemon speaks {PLUGIN_VERSION_V2!r}: until then each seat "
            "turn's state is written before its prompt",
            fix,
        )
    files = ", ".join(str(path) for path, _ in found)
    try:
        loaded = await plugin_loaded(port, str(root))
    except RoundtableError as exc:
        return Check(
            "plugin",
            False,
            f"version {PLUGIN_VERSION_V2} installed: {files}; GET /api/plugin failed: {exc}",
        )
    if not loaded:
        return Check(
            "plugin",
            False,
            f"version {PLUGIN_VERSION_V2} installed: {files}, but the server does not list it "
            f"active for {root} (GET /api/plugin: installed after the server started, another "
            "config directory, or a failed duplicate)",
            "restart opencode (with the environment install-tool used), then roundtabled doctor",
        )
    return Check(
        "plugin", True, f"version {PLUGIN_VERSION_V2} installed: {files}; loaded for {root}"
    )


async def _agents_check(port: V2Port, root: Path) -> Check:
    """The project's agents as the server lists them, the observer agent among them."""
    try:
        agents = await port.agents(str(root))
    except RoundtableError as exc:
        return Check("agents", False, f"GET /api/agent failed: {exc}")
    names = sorted(a.id for a in agents if not a.hidden)
    detail = f"{len(names)} seatable for {root}: {', '.join(names) or 'none'}"
    if not any(a.id == OBSERVER_AGENT for a in agents):
        return Check(
            "agents",
            False,
            f"{detail}; the observer agent {OBSERVER_AGENT!r} is missing",
            f"{INSTALL} (installs the observer agent with the plugin), then restart opencode",
        )
    custom = [a.id for a in agents if not a.hidden and not a.native]
    if len(custom) < 2:
        return Check(
            "agents",
            True,
            f"{detail}; observer {OBSERVER_AGENT} present (only the built-ins: add debaters such "
            "as pm, dev, rv from examples/opencode.json)",
            warn=True,
        )
    return Check("agents", True, f"{detail}; observer {OBSERVER_AGENT} present")


async def _daemon_check(settings: cfg.Settings, control_url: str, root: Path) -> Check:
    """:func:`~roundtabled.service.doctor.daemon_check`, then: the daemon drives 2.x (its health
    names :data:`PLUGIN_VERSION_V2`) and trusts a plugin report from ``root``."""
    async with aiohttp.ClientSession() as http:
        base = await daemon_check(http, settings, control_url)
        if not base.ok:
            return base
        try:
            token = settings.token_file.read_text().strip()
            async with http.get(
                f"{control_url}/v1/health",
                headers={"Authorization": f"Bearer {token}"},
                timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S),
            ) as resp:
                health: Any = orjson.loads(await resp.read())
        except (aiohttp.ClientError, TimeoutError, OSError, orjson.JSONDecodeError) as exc:
            return Check("daemon", False, f"/v1/health failed: {exc}")
    plugin = health.get("plugin") if isinstance(health, dict) else None
    plugin = plugin if isinstance(plugin, dict) else {}
    if plugin.get("version") != PLUGIN_VERSION_V2:
        return Check(
            "daemon",
            False,
            f"{base.detail}, but it drives the server as OpenCode 1.x (plugin version "
            f"{plugin.get('version')!r})",
            "restart the daemon (roundtabled serve, or systemctl --user restart roundtabled): "
            "it asks the server's major when it connects",
        )
    here = os.path.realpath(root)
    reports = plugin.get("reports") or []
    if any(os.path.realpath(str(r.get("directory"))) == here for r in reports):
        return Check("daemon", base.ok, f"{base.detail}; trusts the plugin's report for {root}")
    return Check(
        "daemon",
        True,
        f"{base.detail}; no plugin report from {root} yet (the plugin reports when the server "
        "first loads the project; until then each seat turn's state is written before its "
        "prompt)",
        warn=True,
    )


async def checks(
    settings: cfg.Settings,
    found: ServerFound,
    control_url: str,
    env: Mapping[str, str],
    root: Path,
) -> list[Check]:
    """Every 2.x check (module docstring) for the project ``root``, in order.

    Args:
        settings: effective settings (``server_url``, the password, ``token_file``).
        found: what :func:`~roundtabled.opencode.detect.detect_server` found: 2.x, answering.
        control_url: the daemon's control API base URL.
        env: the environment for the global config directory (``XDG_CONFIG_HOME``/``HOME``).
        root: the project whose ``.opencode`` the server loads.
    """
    password = settings.server_password.get_secret_value() if settings.server_password else None
    out = [
        Check("server", True, f"{settings.server_url} reachable, OpenCode {found.version} (2.x)"),
        Check(
            "auth",
            True,
            "password accepted" if password else "the server answered without a password",
        ),
        await _events_check(settings, password),
    ]
    port = V2Port(
        V2Client(
            settings.server_url,
            username=settings.server_username,
            password=password,
            timeout=HTTP_TIMEOUT_S * 6,  # the first call in a directory loads its plugins
        )
    )
    try:
        out.append(await _plugin_check(port, root, env))
        out.append(await _agents_check(port, root))
    finally:
        await port.close()
    out.append(await _daemon_check(settings, control_url, root))
    return out
