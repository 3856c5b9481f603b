"""``scripts/local-model``'s arguments: bad input is one line naming what is wrong and the
allowed values, exit 2, before anything is downloaded or built (its installs are for a
development machine and never run here: bench/README.md, "A real model")."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "local-model"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ([], "MODEL is qwen0.5b or qwen1.5b (got '')"),
        (["qwen7b"], "MODEL is qwen0.5b or qwen1.5b (got 'qwen7b')"),
        (["qwen0.5b", "http"], "PORT is a TCP port, 1-65535 (got 'http')"),
        (["qwen1.5b", "70000"], "PORT is a TCP port, 1-65535 (got '70000')"),
        (["qwen0.5b", "18080", "--fast"], "unexpected argument '--fast'"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: list[str], line: str, tmp_path: Path) -> None:
    # a copy in a checkout of its own: the script works in the checkout that holds it
    copy = tmp_path / "scripts" / "local-model"
    copy.parent.mkdir()
    copy.write_bytes(SCRIPT.read_bytes())
    done = subprocess.run(["bash", str(copy), *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [f"usage: scripts/local-model MODEL [PORT]: {line}"]
    # refused before anything is made
    assert not (tmp_path / ".local-model").exists()
