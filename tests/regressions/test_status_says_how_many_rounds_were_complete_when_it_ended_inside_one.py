"""A new user's demo stopped on repetition after pm's turn of round 2: the result said
``Status: repetition, 1/2 rounds`` while ``roundtabled status`` said ``round: 2/2 (ended)`` —
two counts that read as a contradiction. Status now says the round it ended in and how many
were complete."""

from __future__ import annotations

from typing import Any

from roundtabled.cli.show import status_lines


def status(round_: int, completed: int | None) -> dict[str, Any]:
    result = None if completed is None else {"status": {"roundsCompleted": completed}}
    return {
        "sessionID": "ses_x",
        "title": "Demo",
        "phase": "done",
        "endReason": "repetition",
        "stage": "ended",
        "round": round_,
        "totalRounds": 2,
        "agents": ["pm", "dev", "rv"],
        "observer": "built-in",
        "result": result,
    }


def test_ended_inside_round_two_says_one_complete() -> None:
    lines = status_lines(status(2, 1), tty=False)
    assert any(ln.startswith("  round:    2/2 (ended; 1 complete)") for ln in lines), lines


def test_ended_after_its_last_round_says_ended_only() -> None:
    lines = status_lines(status(2, 2), tty=False)
    assert any(ln.startswith("  round:    2/2 (ended)   ") for ln in lines), lines
