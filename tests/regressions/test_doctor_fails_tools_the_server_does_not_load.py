"""`doctor` passed "✓ tools installed: global (/tmp/pipcfg/opencode)" when the OpenCode server could
not see those tools (the shell's XDG_CONFIG_HOME differed from the server's), then suggested a fix
that did not help. The tools check now asks the server what it loaded for the directory
(``GET /experimental/tool/ids``) and names the server's own config directory (``GET /path``)."""

from __future__ import annotations

import os

from tests.e2e.cli_helpers import cli, cli_env
from tests.e2e.conftest import RT


async def test_doctor_fails_tools_the_server_does_not_load(rt: RT) -> None:
    """Exact failing input: the tools installed --global under another XDG_CONFIG_HOME, doctor
    run from a directory outside the project (no .opencode there)."""
    other = rt.tmp / "pipcfg"
    outside = rt.tmp / "elsewhere"
    outside.mkdir()
    env = cli_env(rt, XDG_CONFIG_HOME=str(other))
    run = await cli(rt, "install-tool", "--global", env=env, cwd=str(outside))
    assert run.code == 0, run.out + run.err
    assert os.path.isfile(other / "opencode" / "tool" / "roundtable.ts")
    run = await cli(rt, "doctor", env=env, cwd=str(outside))
    tools = [line for line in run.out.splitlines() if line.split()[1:2] == ["tools"]]
    assert tools and tools[0].startswith("✗"), run.out
    assert f"installed in global ({other / 'opencode'})" in run.out, run.out
    assert "which this OpenCode server does not read" in run.out
    assert "its config directory is " in run.out and "restart opencode serve" in run.out
    assert run.code == 1


async def test_doctor_still_passes_tools_the_server_loaded(rt: RT) -> None:
    run = await cli(rt, "doctor")
    assert "the server loaded roundtable, available_agents" in run.out, run.out
    assert run.code == 0, run.out + run.err
