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


def test_every_service_module_but_the_daemon_and_doctor_is_kept_from_the_1x_client() -> None:
    """The contract lists the service's modules instead of excepting two of them: a module
    added to the service must be listed too, or it would escape the contract."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    listed = set(
        next(c for c in contracts if c["id"] == "service-without-the-client")["source_modules"]
    )
    modules = {
        f"roundtabled.service.{p.stem}"
        for p in (ROOT / "roundtabled" / "service").glob("*.py")
        if p.stem not in ("__init__", "daemon", "doctor")
    }
    assert listed == modules
