"""With the OpenCode server down, ``roundtabled --config /tmp/x.toml doctor`` printed ``✓ config
… config file <the default path>`` (not the file given), ``✗ tools … the server is OpenCode 1.x
… --opencode 1`` although nothing answered and the 2.x plugin was installed, and ``! plugin the
roundtable plugin is not installed``. Now the config line names the file read, and with the
server unreachable doctor says its major is unknown and names the files found on disk for each
major (or both install commands when there are none)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from roundtabled.offline.opencode_server import free_port
from roundtabled.service import install

pytestmark = pytest.mark.e2e


async def doctor(project: Path, home: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROUNDTABLED_", "XDG_"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_STATE_HOME=str(home / "state"),
        ROUNDTABLED_URL=f"http://127.0.0.1:{free_port()}",  # no daemon there
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "roundtabled",
        *args,
        "doctor",
        cwd=project,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def line_of(out: str, name: str) -> str:
    (line,) = [x for x in out.splitlines() if x.split()[1:2] == [name]]
    return line


async def test_doctor_with_the_server_down_guesses_no_major_and_names_the_config_given(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    project = tmp_path / "proj"
    project.mkdir(parents=True)
    (project / ".git").mkdir()
    dead = f"http://127.0.0.1:{free_port()}"
    config = tmp_path / "x.toml"
    config.write_text(f'server_url = "{dead}"\n')
    install.install_tools(
        project / ".opencode", control_url=dead, token_file=home / "token", major=2
    )

    rc, out, err = await doctor(project, home, "--config", str(config))
    assert rc == 1, (out, err)
    assert f"config file {config};" in line_of(out, "config")
    server = line_of(out, "server")
    assert server.startswith("✗") and f"{dead} not reachable" in server
    assert "major is unknown" in server
    files = line_of(out, "files")
    plugin = project / ".opencode" / install.V2_PLUGIN_DIR / install.V2_PLUGIN_FILE
    assert f"for OpenCode 2.x: {plugin}" in files and "OpenCode 1.x" not in files
    assert "--opencode 1" not in out and "is OpenCode 1.x" not in out
    assert "the roundtable plugin is not installed" not in out

    # nothing installed: both install commands are named
    (project / ".opencode").rename(tmp_path / "moved")
    rc, out, err = await doctor(project, home, "--config", str(config))
    assert rc == 1, (out, err)
    assert "no roundtabled files in the project" in line_of(out, "files")
    assert "--opencode 1 (OpenCode 1.x) or --opencode 2 (2.x)" in out
