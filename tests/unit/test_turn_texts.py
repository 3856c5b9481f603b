"""How one turn reads in the texts of a roundtable (observer prompt, cancellation text): a
cut-off turn says whether text was kept, and only points at "partial text above" when there
is some."""

from __future__ import annotations

from roundtabled.core.result import cancelled_text
from roundtabled.core.state import EndReason, HistoryEntry, Phase, RoundtableState


def _state(*history: HistoryEntry) -> RoundtableState:
    return RoundtableState(
        sessionID="ses_turntexts000000001",
        title="t",
        agents=["pm", "dev"],
        total_rounds=2,
        prompt="p",
        history=list(history),
        phase=Phase.DONE,
        end_reason=EndReason.CANCELLED,
    )


def _cut(agent: str, seat: int, text: str) -> HistoryEntry:
    return HistoryEntry(
        agent=agent,
        round=1,
        seat=seat,
        response=text,
        has_error=True,
        cut_off=True,
        error="cut off by the cancel",
    )


def test_a_cut_off_turn_without_text_does_not_point_at_text_above() -> None:
    text = cancelled_text(_state(_cut("pm", 0, "")))
    assert "partial text above" not in text
    assert "it had written no text yet" in text


def test_a_cut_off_turn_with_text_keeps_it_and_says_so() -> None:
    text = cancelled_text(_state(_cut("pm", 0, "half an answer")))
    assert "half an answer" in text and "partial text above" in text
