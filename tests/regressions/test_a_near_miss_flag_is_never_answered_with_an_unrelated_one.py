"""Reported by a user trying near-miss flags: ``roundtabled extend SES --agents pm x`` answered
"did you mean --budget-usd?", ``roundtabled list --round 2`` "did you mean --json?" and
``roundtabled eval --round 2`` "did you mean --count?": the suggestion compared the flags with
their shared ``--`` and took anything 60% alike. A suggestion now keeps the typo's first letter
and is closer; a flag this command lacks but another takes says which command takes it; a typo
of a real flag still gets its suggestion (``--turn-timout``)."""

from __future__ import annotations

import pytest

from roundtabled.cli import main
from roundtabled.cli.client import EXIT_USAGE


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one stderr line of ``roundtabled ARGV``, which must be a usage error (exit 2)."""
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    assert exc.value.code == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    return err.rstrip("\n")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["extend", "ses_abcdefgh", "--agents", "pm", "x"],
            "Error: unknown flag --agents; --agents is a flag of start and eval "
            "(see roundtabled extend --help)",
        ),
        (
            ["extend", "ses_abcdefgh", "--agent", "pm", "x"],
            "Error: unknown flag --agent; --agents is a flag of start and eval "
            "(see roundtabled extend --help)",
        ),
        (
            ["list", "--round", "2"],
            "Error: unknown flag --round; --rounds is a flag of start and extend "
            "(see roundtabled list --help)",
        ),
        (
            ["eval", "--round", "2"],
            "Error: unknown flag --round; --rounds is a flag of start and extend "
            "(see roundtabled eval --help)",
        ),
        (
            ["start", "--turn-timout", "3", "x"],
            "Error: unknown flag --turn-timout; did you mean --turn-timeout? "
            "(see roundtabled start --help)",
        ),
        (
            ["serve", "--port", "4747"],
            "Error: unknown flag --port; did you mean --control-port? "
            "(see roundtabled serve --help)",
        ),
        (["start", "-r", "2", "x"], "Error: unknown flag -r (see roundtabled start --help)"),
    ],
)
def test_a_near_miss_flag_is_never_answered_with_an_unrelated_one(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    assert usage_error(capsys, *argv) == line


def test_a_command_typed_short_is_suggested_by_its_beginning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(capsys, "stat", "ses_abcdefgh")
    assert err == (
        "Error: 'stat' is not a roundtabled command; did you mean status? (see roundtabled --help)"
    )
