"""``roundtabled start --agents pm,dev --side pm=agianst TOPIC`` started a roundtable in which pm
argued the one-line brief "agianst". A brief is a sentence: one word that is not ``for``,
``against`` or ``neutral`` is a typo until shown otherwise, refused (exit 2) with the side it is
closest to, on the command line and on the control API alike."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from roundtabled.core.validation import parse_sides
from roundtabled.errors import ValidationFailed

ALLOWED = (
    "allowed: for, against, neutral, or a one-line brief of two words or more, at most 200 "
    "characters"
)


def test_the_cli_refuses_a_misspelt_side_and_names_the_one_meant(
    cli_without_daemon: Callable[..., tuple[int, str]],
) -> None:
    code, err = cli_without_daemon(
        "start", "--agents", "pm,dev", "--side", "pm=agianst", "Should we ship on Friday?"
    )
    assert code == 2
    assert err == (
        "Error: --side: the side of 'pm' is 'agianst', one word that is no side; "
        f"did you mean 'against'? {ALLOWED}"
    )


def test_the_control_api_refuses_it_too() -> None:
    with pytest.raises(ValidationFailed) as exc:
        parse_sides({"rv": "nuetral"})
    assert exc.value.field == "sides"
    assert "did you mean 'neutral'?" in str(exc.value)
    with pytest.raises(ValidationFailed, match="one word that is no side; allowed"):
        parse_sides({"rv": "optimist"})  # nothing close: no suggestion


def test_named_sides_and_briefs_still_pass() -> None:
    assert parse_sides({"pm": "Against", "dev": "devil's advocate: argue the minority"}) == {
        "pm": "against",
        "dev": "devil's advocate: argue the minority",
    }
