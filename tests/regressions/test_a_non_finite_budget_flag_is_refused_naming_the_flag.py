"""`start --budget-usd nan` (or inf, or `--budget-seconds nan`) used to print "budget must set at
least one of tokens, usd, seconds": JSON has no NaN, so the value reached the daemon as null.
The CLI now refuses it naming the flag; `--until converged --rounds 1` is refused naming rounds."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from roundtabled.core.validation import parse_request
from roundtabled.errors import ValidationFailed


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--budget-usd", "nan"), ("--budget-usd", "inf"), ("--budget-seconds", "nan")],
)
def test_a_non_finite_budget_flag_is_refused_naming_the_flag(
    flag: str, value: str, cli_without_daemon: Callable[..., tuple[int, str]]
) -> None:
    # No daemon is needed: the refusal comes before any call (an unused port proves it).
    code, err = cli_without_daemon("start", "--agents", "pm,dev", flag, value, "t")
    assert code != 0
    assert f"{flag} must be a positive number (finite" in err and f"got {value}" in err
    assert "at least one of" not in err


def test_until_converged_with_one_round_is_refused_naming_rounds() -> None:
    body = {"prompt": "Split?", "agents": ["pm", "dev"], "until": "converged", "rounds": 1}
    with pytest.raises(ValidationFailed) as exc:
        parse_request(body)
    assert exc.value.field == "rounds" and "rounds of at least 2" in str(exc.value)
    assert parse_request({**body, "rounds": 2}).until == "converged"
    # a preset may bring its own rounds; an extend follows earlier rounds
    assert parse_request({**body, "rounds": None, "agents": None, "preset": "p"}).preset == "p"
