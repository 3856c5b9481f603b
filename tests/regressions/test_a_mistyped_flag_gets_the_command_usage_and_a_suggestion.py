"""Reported by newcomers' trials: ``roundtabled start --agnets pm,dev x`` printed the top-level
usage and ``unrecognized arguments: --agnets x``; later, every usage error (``--frobnicate``,
``--rounds 2.5``, ``--until forever``, ``--budget-usd abc``) printed ten lines of usage before the
one line that mattered. A usage error is now one line, like git's: ``Error:``, the flag as typed,
what it takes, ``did you mean`` where a close spelling exists, and ``see roundtabled start
--help``; exit code 2 (a typo exits 2, the run of the real console script below)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from roundtabled.cli import main
from roundtabled.cli.client import EXIT_USAGE

HINT = " (see roundtabled start --help)\n"


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """stderr of ``roundtabled ARGV``, which must end in a usage error (exit 2, no stdout)."""
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    assert exc.value.code == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    return err


def test_a_mistyped_flag_gets_the_command_usage_and_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(capsys, "start", "--agnets", "pm,dev", "x")
    assert err == "Error: unknown flag --agnets; did you mean --agents?" + HINT


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["start", "--frobnicate", "x"], "Error: unknown flag --frobnicate"),
        (["start", "--rounds", "2.5", "x"], "Error: --rounds must be a whole number, not '2.5'"),
        (
            ["start", "--until", "forever", "x"],
            "Error: --until must be rounds or converged, not 'forever'",
        ),
        (
            ["start", "--until", "converge", "x"],
            "Error: --until must be rounds or converged, not 'converge'; did you mean converged?",
        ),
        (["start", "--budget-usd", "abc", "x"], "Error: --budget-usd must be a number, not 'abc'"),
        (["start", "--agents", "pm"], "Error: missing PROMPT"),
        (["start", "x", "--rounds"], "Error: --rounds needs a value"),
    ],
)
def test_a_usage_error_is_one_line_naming_the_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    err = usage_error(capsys, *argv)
    assert err == line + HINT
    assert "usage:" not in err


def test_a_mistyped_command_is_named_with_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(capsys, "strat", "x")
    assert err.startswith("Error: 'strat' is not a roundtabled command; did you mean start?")
    assert err.endswith(" (see roundtabled --help)\n")
    assert err.count("\n") == 1


def test_the_console_script_prints_the_one_line_and_exits_2() -> None:
    rt = Path(sys.executable).parent / "roundtabled"
    proc = subprocess.run(
        [str(rt), "start", "--rounds", "2.5", "x"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == EXIT_USAGE
    assert proc.stdout == ""
    assert proc.stderr == "Error: --rounds must be a whole number, not '2.5'" + HINT
