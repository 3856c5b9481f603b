"""One session id check and message for every ``SES`` argument of the command line (no daemon
needed). The control-URL, Ctrl-C and mistyped-flag faults of a newcomer's trial have their own
files in tests/regressions/."""

from __future__ import annotations

from pathlib import Path

import pytest

from roundtabled.cli import main
from roundtabled.cli.client import EXIT_USAGE


@pytest.mark.parametrize("command", ["status", "watch", "cancel", "export"])
def test_every_ses_argument_gets_the_same_check_and_message(
    home: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert main([command, "ses_nope"]) == EXIT_USAGE
    assert main(["extend", "ses_nope", "more"]) == EXIT_USAGE
    errs = capsys.readouterr().err.splitlines()
    expected = (
        "Error: SES must be a session id: 'ses_' then 6 to 64 letters or digits "
        "(as printed by start and list), got 'ses_nope'"
    )
    assert errs == [expected, expected]
