"""docs/testing.md says ``ROUNDTABLED_TEST_WORKERS=1`` runs the suite in one process; with it
set, every CLI command printed ``warning: ROUNDTABLED_TEST_WORKERS is not a roundtabled setting
and is ignored …``, and the CLI tests that read exactly one line on stderr failed (28 of them
in one run). The same for the variables ``scripts/test --opencode`` and the test harness read,
and for ``ROUNDTABLED_TEST_OPENCODE_MAJOR``, which ``scripts/test`` sets for every pass (49 CLI
tests failed in the clean-clone run that added it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from roundtabled.service.config import unknown_environment


@pytest.mark.parametrize(
    "var",
    [
        "ROUNDTABLED_TEST_WORKERS",
        "ROUNDTABLED_TEST_OPENCODE_MAJOR",
        "ROUNDTABLED_OPENCODE_BIN",
        "ROUNDTABLED_OPENCODE2_BIN",
        "ROUNDTABLED_OPENCODE_VERSION",
    ],
)
def test_a_variable_the_test_suite_reads_gets_no_warning(var: str) -> None:
    assert unknown_environment({var: "1"}) == []


def test_every_variable_the_test_scripts_set_gets_no_warning() -> None:
    """Each ``ROUNDTABLED_*`` name ``scripts/test``, ``.ci/run`` or the tests' conftest files
    spell: a new one can no longer be forgotten."""
    root = Path(__file__).resolve().parents[2]
    files = [root / "scripts" / "test", root / ".ci" / "run", *root.glob("tests/**/conftest.py")]
    names = {n for f in files for n in re.findall(r"\bROUNDTABLED_[A-Z0-9_]+", f.read_text())}
    assert "ROUNDTABLED_TEST_OPENCODE_MAJOR" in names
    assert unknown_environment(dict.fromkeys(sorted(names), "1")) == []


def test_a_typo_still_gets_its_warning() -> None:
    (warning,) = unknown_environment({"ROUNDTABLED_TEST_WORKER": "1"})
    assert "ROUNDTABLED_TEST_WORKER is not a roundtabled setting" in warning
