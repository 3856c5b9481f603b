"""A new user's tries, each a message that did not say what was wrong as typed:
``scripts/demo --turn-timeout 0`` said "got 0.0"; ``roundtabled eval --turn-timeout 0`` said only
"must be a positive number" (no range) and let 100000 through to the daemon; ``eval --protocols
''`` said "unknown empty list"; ``start --directory /etc/passwd`` said the file "does not exist".
Each is now one line in the rule every command shares."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from roundtabled.demo import BadArgument, checked_turn_timeout
from roundtabled.engine.launch import check_directory_exists
from roundtabled.errors import ValidationFailed

RULE = "--turn-timeout must be a number of seconds from 1 to 86400, got "


@pytest.mark.parametrize(("typed", "shown"), [("0", "0"), ("0.5", "0.5"), ("100000", "100000")])
def test_the_demo_names_the_turn_timeout_as_typed(typed: str, shown: str) -> None:
    with pytest.raises(BadArgument) as err:
        checked_turn_timeout(typed)
    assert str(err.value) == RULE + shown


@pytest.mark.parametrize(("typed", "shown"), [("0", "0"), ("100000", "100000"), ("x", "'x'")])
def test_eval_checks_the_turn_timeout_by_the_start_s_rule(
    typed: str, shown: str, cli_without_daemon: Callable[..., tuple[int, str]]
) -> None:
    code, err = cli_without_daemon("eval", "--agents", "a,b", "--turn-timeout", typed)
    assert (code, err) == (2, "Error: " + RULE + shown)


def test_eval_with_no_protocols_says_none_were_given(
    cli_without_daemon: Callable[..., tuple[int, str]],
) -> None:
    code, err = cli_without_daemon("eval", "--agents", "a,b", "--protocols", "")
    assert code == 2 and err.startswith("Error: --protocols: none given; allowed single"), err


def test_a_directory_that_is_a_file_is_named_a_file(tmp_path: Path) -> None:
    file = tmp_path / "passwd"
    file.write_text("x")
    with pytest.raises(ValidationFailed) as err:
        check_directory_exists(str(file))
    assert f"directory '{file}' is not a directory" in str(err.value)
