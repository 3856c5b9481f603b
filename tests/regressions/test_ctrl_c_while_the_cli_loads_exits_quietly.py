"""Reported by a newcomer's trial: SIGINT to ``roundtabled watch SES`` about 2 s after launch (while
its modules were still loading on a busy machine) printed a ``KeyboardInterrupt`` traceback from
inside ``roundtabled/state.py``. Ctrl-C anywhere now exits 130 quietly."""

from __future__ import annotations

import json

import pytest

from roundtabled.cli import main


def test_ctrl_c_while_the_cli_loads_exits_130_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import roundtabled.cli as cli

    def interrupted(argv: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_main", interrupted)
    assert main(["watch", "ses_abcdef12"]) == 130
    assert "Traceback" not in capsys.readouterr().err


def test_the_entry_module_loads_without_the_heavy_imports() -> None:
    # The console script imports roundtabled.cli before main runs; a Ctrl-C then is outside
    # main's handler, so that import must not load pydantic or aiohttp.
    import subprocess
    import sys

    code = "import sys, roundtabled.cli; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True
    ).stdout
    modules = json.loads(out)
    assert "aiohttp" not in modules and "pydantic" not in modules
