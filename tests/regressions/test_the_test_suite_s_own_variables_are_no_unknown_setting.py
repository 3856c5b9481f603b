"""docs/testing.md says ``ROUNDTABLED_TEST_WORKERS=1`` runs the suite in one process; with it
set, every CLI command printed ``warning: ROUNDTABLED_TEST_WORKERS is not a roundtabled setting
and is ignored …``, and the CLI tests that read exactly one line on stderr failed (28 of them
in one run). The same for the variables ``scripts/test --opencode`` and the test harness read."""

from __future__ import annotations

import pytest

from roundtabled.service.config import unknown_environment


@pytest.mark.parametrize(
    "var",
    [
        "ROUNDTABLED_TEST_WORKERS",
        "ROUNDTABLED_OPENCODE_BIN",
        "ROUNDTABLED_OPENCODE2_BIN",
        "ROUNDTABLED_OPENCODE_VERSION",
    ],
)
def test_a_variable_the_test_suite_reads_gets_no_warning(var: str) -> None:
    assert unknown_environment({var: "1"}) == []


def test_a_typo_still_gets_its_warning() -> None:
    (warning,) = unknown_environment({"ROUNDTABLED_TEST_WORKER": "1"})
    assert "ROUNDTABLED_TEST_WORKER is not a roundtabled setting" in warning
