"""Production code never imports the test harness ``roundtabled.offline``.

Every module of ``roundtabled`` except ``roundtabled.offline.*``, ``roundtabled.service.demo`` (the
demo is a harness for people: it imports the scripted model lazily, when it runs) and
``__main__`` modules (importing one runs the CLI) is imported in a fresh
interpreter; ``roundtabled.offline`` must then be absent from ``sys.modules``.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import roundtabled


def production_modules() -> list[str]:
    """Dotted names of every production module (found on disk, not imported here)."""
    names = [
        info.name
        for info in pkgutil.walk_packages(roundtabled.__path__, prefix="roundtabled.")
        if not info.name.startswith("roundtabled.offline")
        and info.name != "roundtabled.service.demo"
        and not info.name.endswith(".__main__")  # runs the CLI when imported
    ]
    return sorted(names)


def test_the_module_list_covers_the_service_and_the_stream() -> None:
    names = production_modules()
    assert {
        "roundtabled.service",
        "roundtabled.opencode.stream",
        "roundtabled.opencode.binary",
    } <= set(names)


def test_production_modules_do_not_import_the_test_harness() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {production_modules()!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('roundtabled.offline'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
