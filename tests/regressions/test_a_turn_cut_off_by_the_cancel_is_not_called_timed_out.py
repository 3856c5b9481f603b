"""A turn cut off by a cancel is not told to the next seat as cut off "at the time limit".

Field failure (found reading the code while removing repeats): the observer's prompt and the
export said "CUT OFF by the cancel" for a turn a cancel aborted, but the "Since your last turn"
line of the next seat's prompt (an extension of a cancelled debate) said "was cut off at the time
limit": the seat was told a reason that was not true.

Exact input: pm's round-2 turn cut off by the cancel (``cut_off=True``, ``has_error=True``,
``error="cut off by the cancel"``, partial text "partial answer"), then dev's turn in round 3.
"""

from __future__ import annotations

from roundtabled.core.prompts import turn_prompt
from roundtabled.core.state import HistoryEntry, RoundtableState


def pm_cut_off(error: str) -> HistoryEntry:
    """pm's round-2 turn, cut off with ``error`` after writing "partial answer"."""
    return HistoryEntry(
        agent="pm", round=2, response="partial answer", has_error=True, error=error, cut_off=True
    )


def test_the_next_seat_is_told_the_cancel_cut_the_turn_off() -> None:
    state = RoundtableState.model_validate(
        {
            "session_id": "ses_abc",
            "title": "(Roundtable) - ORM",
            "agents": ["pm", "dev"],
            "total_rounds": 3,
            "prompt": "Which ORM should we use?",
        }
    )
    cancelled, timed_out = (pm_cut_off(e) for e in ("cut off by the cancel", "timed out after 3 s"))
    text = turn_prompt(state, round_index=2, seat=1, since=[cancelled], opening=False)
    assert "- pm (round 2) was cut off by the cancel: “partial answer”" in text
    assert "time limit" not in text
    text = turn_prompt(state, round_index=2, seat=1, since=[timed_out], opening=False)
    assert "- pm (round 2) was cut off at the time limit: “partial answer”" in text
