"""The demo lived among the service layers (``roundtabled.service.demo``) and needed an
``ignore_imports`` exception to reach the offline model. It is a program that uses the layers,
so it is its own top layer (``roundtabled.demo``) and the contracts hold with no exception."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_contract_has_an_exception_and_the_demo_is_on_top() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    assert [c["id"] for c in contracts if c.get("ignore_imports")] == []
    layers = next(c for c in contracts if c["id"] == "layers")["layers"]
    assert layers[0] == "demo"
    assert importlib.util.find_spec("roundtabled.demo") is not None
    assert importlib.util.find_spec("roundtabled.service.demo") is None


def test_the_contracts_hold() -> None:
    run = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout
