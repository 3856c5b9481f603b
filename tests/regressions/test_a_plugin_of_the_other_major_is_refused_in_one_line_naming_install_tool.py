"""roundtabled's files for the other OpenCode major than the server's were not bad input:
OpenCode 2.x silently ignores the 1.x tools (``.opencode/tool``) and fails the 1.x plugin, and
1.x never loads the 2.x plugin (``.opencode/plugins/roundtabled/``), so the ``roundtable`` tool
did not exist for the person while ``roundtabled doctor`` exited 1 among other lines (on 2.x)
or only failed its tools check (on 1.x), ``roundtabled start`` started, and ``roundtabled
install-tool --opencode N`` against a server of the other major wrote the wrong files with a
note. Now, on the real servers of both majors, ``doctor`` and ``start`` say it in one line naming
``roundtabled install-tool`` and ``--opencode`` with the server's major, exit 2 and start nothing,
and ``install-tool --opencode N`` contradicting the server's major is refused in one line, exit
2, nothing written (``--force`` installs anyway)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from roundtabled.offline.opencode_server import OpenCodeServer, offline_config
from roundtabled.service import install

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=[1, 2], ids=["1x", "2x"])
async def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[OpenCodeServer]:
    major = request.param
    root = tmp_path_factory.mktemp(f"v{major}")
    srv = OpenCodeServer(root, offline_config("http://127.0.0.1:9/v1"), major=major)
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


async def cli(*args: str, cwd: Path, server: OpenCodeServer, home: Path) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROUNDTABLED_", "XDG_"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_STATE_HOME=str(home / "state"),
        XDG_RUNTIME_DIR=str(home / "run"),
        ROUNDTABLED_SERVER_URL=server.url,
        ROUNDTABLED_SERVER_PASSWORD=server.password or "",
    )
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
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def tree(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


async def test_doctor_start_and_install_tool_name_the_other_major_s_files(
    server: OpenCodeServer, tmp_path: Path
) -> None:
    major = server.major
    other = 3 - major
    project = tmp_path / "proj"
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    install.install_tools(
        project / ".opencode",
        control_url="http://127.0.0.1:9",
        token_file=home / "token",
        major=other,
    )
    expected = (
        f"Error: {project / '.opencode'} holds roundtabled's files for OpenCode {other}.x only, "
        f"but the server is OpenCode {major}.x, which does not load them: run roundtabled "
        f"install-tool --project {project} --opencode {major}"
    )

    rc, out, err = await cli("doctor", cwd=project, server=server, home=home)
    assert rc == 2, (out, err)
    assert err.splitlines() == [expected]
    if major == 1:
        assert out == ""  # no check ran

    before = tree(project)
    rc, out, err = await cli(
        "start", "cats or dogs?", "--agents", "pm,dev", cwd=project, server=server, home=home
    )
    assert (rc, out, err.splitlines()) == (2, "", [expected])
    assert not (home / "state" / "roundtabled").exists()  # no daemon was asked or made

    rc, out, err = await cli(
        "install-tool", "--opencode", str(other), cwd=project, server=server, home=home
    )
    assert (rc, out) == (2, ""), err
    assert err.splitlines() == [
        f"Error: --opencode {other} contradicts the server at {server.url}, which is OpenCode "
        f"{server.version} and would not load these files: run roundtabled install-tool "
        f"--opencode {major} (or without --opencode), or add --force to install for OpenCode "
        f"{other}.x anyway"
    ]
    assert tree(project) == before  # nothing written

    # --force installs anyway, and its first line says which major and that the server won't
    # load it
    rc, out, err = await cli(
        "install-tool", "--opencode", str(other), "--force", cwd=project, server=server, home=home
    )
    assert rc == 0, err
    assert out.splitlines()[0] == (
        f"Installing for OpenCode {other}.x (--opencode {other}); note: the server at "
        f"{server.url} is OpenCode {server.version}, which will not load these files (run "
        "install-tool without --opencode to install for it)"
    )

    # the server's own major: the first line says which and why; doctor and start no longer
    # name the other major's files
    rc, out, err = await cli("install-tool", cwd=project, server=server, home=home)
    assert rc == 0, err
    assert out.splitlines()[0] == (
        f"Installing for OpenCode {major}.x (detected: OpenCode {server.version} at "
        f"{server.url}; for the other major give --opencode {other})"
    )
    rc, out, err = await cli("doctor", cwd=project, server=server, home=home)
    assert "holds roundtabled's files for OpenCode" not in err
