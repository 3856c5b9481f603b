"""On OpenCode 2.x (2.1.2) ``roundtabled doctor`` checked nothing but the plugin: with the daemon
not running it printed one line ("… the checks below are for 1.x and were not run") and exit 0.
Now it runs the checks that apply to 2.x, one line each (server, auth, events, plugin, agents,
daemon) with what to do, and exits 1 when one fails, as on 1.x. Real 2.1.2 server, no LLM
needed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from roundtabled.engine.plugins import PLUGIN_VERSION_V2
from roundtabled.offline.opencode_server import OpenCodeServer, free_port, offline_config
from roundtabled.service import config as cfg
from roundtabled.service import doctor, install
from roundtabled.service.daemon import Daemon

pytestmark = pytest.mark.e2e


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[OpenCodeServer, cfg.Settings, str]]:
    port = free_port()
    control_url = f"http://127.0.0.1:{port}"
    home = tmp_path / "home"
    server = OpenCodeServer(tmp_path / "v2", offline_config("http://127.0.0.1:9/v1"), major=2)
    install.install_tools(
        server.project_dir / ".opencode",
        control_url=control_url,
        token_file=home / "token",
        major=2,
    )
    await server.start()
    settings = cfg.Settings().model_copy(
        update={
            "server_url": server.url,
            "server_password": SecretStr(str(server.password)),
            "token_file": home / "token",
            "key_file": home / "key",
            "control_port": port,
            "state_dir": home / "state",
        }
    )
    try:
        yield server, settings, control_url
    finally:
        await server.stop()


def lines_of(out: str) -> dict[str, str]:
    """``{check name: its line}`` of doctor's report."""
    found = {}
    for line in out.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) == 3 and parts[0] in ("✓", "✗", "-", "!", "OK", "FAIL"):
            found[parts[1]] = line
    return found


async def test_doctor_on_opencode_2_checks_server_events_plugin_agents_and_daemon(
    setup: tuple[OpenCodeServer, cfg.Settings, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server, settings, control_url = setup
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "HOME": str(tmp_path)}

    # the daemon is not running: every server check passes, the daemon's fails, exit 1
    assert await doctor.run(settings, control_url, env=env, cwd=server.project_dir) == 1
    out = capsys.readouterr().out
    got = lines_of(out)
    assert list(got) == ["config", "server", "auth", "events", "plugin", "agents", "daemon"], out
    assert got["server"].startswith("✓") and "OpenCode 2.1.2" in got["server"], out
    assert got["auth"].startswith("✓") and "password accepted" in got["auth"]
    assert got["events"].startswith("✓") and "/api/event" in got["events"]
    assert got["plugin"].startswith("✓") and f"version {PLUGIN_VERSION_V2}" in got["plugin"]
    assert f"loaded for {server.project_dir}" in got["plugin"]
    assert got["agents"].startswith(("✓", "!")) and "roundtable-observer present" in got["agents"]
    assert got["daemon"].startswith("✗") and f"not running at {control_url}" in got["daemon"]
    assert "1 problem(s): daemon" in out
    assert str(server.password) not in out

    # a project without the plugin: the plugin line fails and names the 2.x install command
    bare = tmp_path / "bare"
    bare.mkdir()
    assert await doctor.run(settings, control_url, env=env, cwd=bare) == 1
    got = lines_of(capsys.readouterr().out)
    assert got["plugin"].startswith("✗") and "not loaded by OpenCode 2.x" in got["plugin"]
    assert got["agents"].startswith("✗") and "'roundtable-observer' is missing" in got["agents"]

    # the daemon drives this server: all pass, exit 0
    daemon = Daemon(settings)
    run = asyncio.create_task(daemon.run())
    try:
        await asyncio.wait_for(daemon.engine.ready.wait(), 60)
        assert await doctor.run(settings, control_url, env=env, cwd=server.project_dir) == 0
        out = capsys.readouterr().out
        got = lines_of(out)
        assert got["daemon"].startswith(("✓", "!")), out
        assert f"at {control_url}, ready" in got["daemon"]
        assert "All checks passed." in out
        daemon.request_stop()
        assert await asyncio.wait_for(run, 30) == 0
    finally:
        run.cancel()
