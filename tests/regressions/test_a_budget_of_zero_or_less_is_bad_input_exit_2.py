"""Regression: ``start --budget-tokens 0`` / ``-1`` and ``--budget-seconds 0`` exited 1 (a
failure) although bad input exits 2 (README, "exit codes"); the message named the flag already.

Proves, through the CLI's entry point (no daemon: an unused port shows the refusal comes before
any call): each of those exact inputs is one ``Error:`` line naming its flag, exit code 2.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--budget-tokens", "0"), ("--budget-tokens", "-1"), ("--budget-seconds", "0")],
)
def test_a_budget_of_zero_or_less_exits_2_naming_the_flag(
    flag: str, value: str, cli_without_daemon: Callable[..., tuple[int, str]]
) -> None:
    code, err = cli_without_daemon("start", "--agents", "pm,dev", flag, value, "t")
    assert code == 2, err
    assert err.startswith(f"Error: {flag}"), err
    assert len(err.splitlines()) == 1, err
