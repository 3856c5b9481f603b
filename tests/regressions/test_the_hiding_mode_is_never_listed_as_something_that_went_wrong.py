"""The hiding mode (the roundtable plugin, or a PATCH per turn) is information, not a fault: a
degraded result listed it under "⚠ DEGRADED ROUNDTABLE RESULT — tell the user:" and the CLI
printed it as a warning (seen in `scripts/demo --degraded`, whose seats ran first in patch mode,
then in plugin mode). The header and the warnings list only what went wrong; the mode stays a
plain note."""

from __future__ import annotations

from roundtabled.cli.verdict import degraded_line, render_verdict
from roundtabled.core.result import honesty_header
from roundtabled.core.result_model import Status
from roundtabled.core.state import MODE_NOTES

FAULT = "dev failed in rounds 1, 2 (APIError: dev's provider is down)"
NOTES = [FAULT, MODE_NOTES["patch"], MODE_NOTES["plugin"]]


def _status() -> Status:
    return Status(
        end_reason="completed",
        degraded=True,
        rounds_completed=2,
        rounds_planned=2,
        observer="ok",
        seats=[],
        notes=NOTES,
    )


def test_the_honesty_header_lists_only_what_went_wrong() -> None:
    header = honesty_header(_status())
    assert FAULT in header
    assert MODE_NOTES["patch"] not in header and MODE_NOTES["plugin"] not in header


def test_the_cli_warns_about_faults_and_notes_the_mode() -> None:
    result = {"status": {"degraded": True, "notes": NOTES}, "verdict": {"positions": []}}
    line = degraded_line(result, tty=False)
    assert FAULT in line and MODE_NOTES["patch"] not in line
    text = render_verdict(result, tty=False)
    assert f"  - {FAULT}" in text
    assert f"  - {MODE_NOTES['patch']}" not in text
    assert f"  note: {MODE_NOTES['patch']}" in text
