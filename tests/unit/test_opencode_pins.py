"""The OpenCode versions the code names are the ones the repository pins and locks: 1.x in
package.json / package-lock.json, 2.x in opencode-v2/ (docs/testing.md, "OpenCode 2.x")."""

from __future__ import annotations

import json
from pathlib import Path

from roundtabled.opencode.binary import OPENCODE2_VERSION, OPENCODE_VERSION

ROOT = Path(__file__).resolve().parents[2]


def _pin(folder: Path, package: str) -> tuple[str, str]:
    wanted = json.loads((folder / "package.json").read_text())["dependencies"][package]
    lock = json.loads((folder / "package-lock.json").read_text())
    return wanted, lock["packages"][f"node_modules/{package}"]["version"]


def test_the_1x_pin_and_lock_match_the_code() -> None:
    assert _pin(ROOT, "opencode-ai") == (OPENCODE_VERSION, OPENCODE_VERSION)


def test_the_2x_pin_and_lock_match_the_code_apart_from_the_1x_one() -> None:
    folder = ROOT / "opencode-v2"
    assert _pin(folder, "@opencode/cli") == (OPENCODE2_VERSION, OPENCODE2_VERSION)
    # its own folder: its `opencode` bin must not replace 1.x's in the root node_modules
    assert "@opencode/cli" not in json.loads((ROOT / "package.json").read_text())["dependencies"]
