"""`roundtabled serve` against an OpenCode 2.x server waited forever: 2.x answers 1.x's
`GET /global/health` with its web app (200 text/html), which the daemon read as "not reachable"
and retried; `roundtabled doctor` said "reachable, OpenCode ?" and failed later checks with
unrelated fixes; `roundtabled start` said the daemon was not running. Now all three ask which
major answers first and, for a 2.x server without the right password or something that is no
OpenCode, print one line saying what they found and what to do, exit 2, and start nothing. A 2.x
server with the password is driven by the 2.x shell (tests/e2e/test_v2_roundtable.py): doctor
says so in one line and runs 2.x's checks, none of 1.x's; a daemon waiting for its server drives
it."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from pydantic import SecretStr

from roundtabled.offline.opencode_server import OpenCodeServer, free_port, offline_config
from roundtabled.service import config as cfg
from roundtabled.service import daemon, doctor
from roundtabled.service.daemon import Daemon

pytestmark = pytest.mark.e2e


@pytest.fixture
async def v2_server(tmp_path: Path) -> AsyncIterator[OpenCodeServer]:
    server = OpenCodeServer(tmp_path / "v2", offline_config("http://127.0.0.1:9/v1"), major=2)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def settings_for(home: Path, url: str, password: str | None) -> cfg.Settings:
    return cfg.Settings().model_copy(
        update={
            "server_url": url,
            "server_password": SecretStr(password) if password else None,
            "token_file": home / "state" / "token",
            "key_file": home / "state" / "key",
        }
    )


async def refused(
    settings: cfg.Settings, home: Path, capsys: pytest.CaptureFixture[str]
) -> list[str]:
    """Run doctor and serve; both exit 2 with one line on stderr and nothing started."""
    lines = []
    env = {"XDG_CONFIG_HOME": str(home / "cfg"), "HOME": str(home)}
    assert await doctor.run(settings, "http://127.0.0.1:9", env=env, cwd=home) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    lines.append(err.strip())
    assert await asyncio.wait_for(daemon.serve(settings), 30) == 2
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1
    lines.append(err.strip())
    assert not settings.token_file.exists() and not settings.key_file.exists()
    assert lines[0] == lines[1]
    return lines


async def test_doctor_names_the_2x_shell_and_runs_no_1x_check(
    v2_server: OpenCodeServer, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = settings_for(home, v2_server.url, v2_server.password)
    env = {"XDG_CONFIG_HOME": str(home / "cfg"), "HOME": str(home)}
    # no roundtabled plugin in `home`: the plugin check fails naming install-tool, exit 1
    assert await doctor.run(settings, "http://127.0.0.1:9", env=env, cwd=home) == 1
    out, err = capsys.readouterr()
    line, *checks = out.splitlines()
    assert line.startswith(f"OpenCode 2.1.2 at {v2_server.url}: driven by the 2.x shell")
    assert "a start without a parent session" in line and str(v2_server.password) not in out
    assert "/global/" not in out  # none of 1.x's routes
    (missing,) = [c for c in checks if c.split()[1:2] == ["plugin"]]
    assert f"the roundtabled plugin is not loaded by OpenCode 2.x for {home}:" in missing
    assert "fix: roundtabled install-tool --opencode 2" in out
    assert err == ""


async def test_an_opencode_2_server_without_a_password_given_is_refused(
    v2_server: OpenCodeServer, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = (await refused(settings_for(home, v2_server.url, None), home, capsys))[0]
    assert f"OpenCode 2.x at {v2_server.url} asks for a password and none is given" in line
    wrong = settings_for(home, v2_server.url, "not-the-password")
    line = (await refused(wrong, home, capsys))[0]
    assert "rejected the password given" in line and "not-the-password" not in line


async def test_a_server_of_neither_major_is_refused(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = web.Application()

    async def page(request: web.Request) -> web.Response:
        return web.Response(
            text="<!doctype html><p>some other web app</p>", content_type="text/html"
        )

    app.router.add_get("/{tail:.*}", page)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        line = (await refused(settings_for(home, url, None), home, capsys))[0]
    finally:
        await runner.cleanup()
    assert line.startswith(f"Error: {url} answers, but not as OpenCode 1.x or 2.x (")
    assert "HTTP 200, HTML" in line


async def test_start_names_the_2x_server_s_missing_password_not_a_missing_daemon(
    v2_server: OpenCodeServer, home: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROUNDTABLED_", "OPENCODE_"))}
    env.update(
        XDG_CONFIG_HOME=str(home / "cfg"),
        XDG_STATE_HOME=str(home / "state"),
        XDG_RUNTIME_DIR=str(home / "run"),
        ROUNDTABLED_SERVER_URL=v2_server.url,
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "roundtabled",
        "start",
        "cats or dogs?",
        "--agents",
        "pm,dev",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2, err
    assert out == b""
    (line,) = err.decode().splitlines()
    assert line.startswith(f"Error: OpenCode 2.x at {v2_server.url} asks for a password")


async def test_a_daemon_waiting_for_its_server_drives_it_when_it_comes_up_as_opencode_2(
    tmp_path: Path, home: Path
) -> None:
    # Nothing answers at start-up (the daemon waits, as for a server still starting); then an
    # OpenCode 2.x server comes up at that address: the daemon drives it with the 2.x shell.
    server = OpenCodeServer(tmp_path / "late", offline_config("http://127.0.0.1:9/v1"), major=2)
    server._port = free_port()
    settings = settings_for(home, server.url, server.password).model_copy(
        update={"control_port": 0}
    )
    waiting = Daemon(settings)
    run = asyncio.create_task(waiting.run())
    try:
        # its first health check failed: it waits for the server
        while waiting.engine.last_error is None:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        await server.start()
        await asyncio.wait_for(waiting.engine.ready.wait(), 60)
        assert waiting.major == 2 and waiting.refused is None and waiting.v2 is not None
        waiting.request_stop()
        assert await asyncio.wait_for(run, 30) == 0
    finally:
        run.cancel()
        await server.stop()
