"""Reported by a newcomer's trial: ``roundtabled start --agnets pm,dev x`` printed the top-level
usage and ``unrecognized arguments: --agnets x``. It now prints ``start``'s usage and
``did you mean --agents?``."""

from __future__ import annotations

import pytest

from roundtabled.cli import main
from roundtabled.cli.client import EXIT_USAGE


def test_a_mistyped_flag_gets_the_command_usage_and_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["start", "--agnets", "pm,dev", "x"])
    assert exc.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("usage: roundtabled start")
    assert "unrecognized arguments: --agnets; did you mean --agents?" in err
