"""Reported by a trial after ``pip install .`` alone: with no daemon ever started, ``list``,
``agents`` and ``start`` said "cannot read the token file …/token: No such file or directory"
— true, but not what a person needs. They now say that roundtabled is not running and how to
start it (the token file is named too, for whoever runs the daemon with another
configuration)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RT_BIN = Path(sys.executable).parent / "roundtabled"


@pytest.mark.parametrize(
    "argv", [["list"], ["agents"], ["start", "--agents", "pm,dev", "Split the monolith?"]]
)
def test_without_a_daemon_the_cli_says_it_is_not_running(tmp_path: Path, argv: list[str]) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ROUNDTABLED_", "OPENCODE_", "XDG_"))
    }
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"))
    proc = subprocess.run([str(RT_BIN), *argv], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("Error: roundtabled is not running"), proc.stderr
    assert "Start it with: roundtabled serve" in lines[0]
    assert "cannot read" not in lines[0]
    assert str(tmp_path / "config" / "roundtabled" / "token") in lines[0]
