"""Seen while fixing the no-decision result: dev wrote ``Position: split payments`` in round 1
and, in round 3, ``Position: Dev — …`` (its own name, as a real small model does). The label
counts as no position, yet the verdict recorded ``dev changed its position in round 3 (from
“split payments” to “Dev”)`` and dev's next turn prompt asked what changed its mind. A label that
names no stance (a seat's name, a placeholder, the topic copied) changes nothing, like a turn
without a ``Position:`` line."""

from __future__ import annotations

from typing import Any

from roundtabled.core.positions import unexplained_change
from roundtabled.core.result import build_result
from roundtabled.core.state import EndReason, HistoryEntry, Phase, RoundtableState, VerdictRecord
from roundtabled.core.verdict import no_stance

AGENTS = ["pm", "dev"]


def turn(agent: str, rnd: int, text: str) -> HistoryEntry:
    return HistoryEntry.model_validate(
        {"agent": agent, "round": rnd, "response": text, "kind": "turn", "finish": "stop"}
    )


def state(rounds: int) -> RoundtableState:
    history = [
        turn("pm", 1, "Argue.\nPosition: split payments — fewer deploy conflicts (7/10)"),
        turn("dev", 1, "Argue.\nPosition: split payments — the team wants it (6/10)"),
        turn("pm", 2, "More.\nPosition: split payments — still (7/10)"),
        turn("dev", 2, "More.\nPosition: split payments — still (6/10)"),
        turn("pm", 3, "Again.\nPosition: split payments — yes (7/10)"),
        turn("dev", 3, "As the developer I agree.\nPosition: Dev — I keep my view"),
    ][: rounds * 2]
    data: dict[str, Any] = {
        "session_id": "ses_nostancechange00001",
        "title": "Split?",
        "agents": AGENTS,
        "total_rounds": 4,
        "current_round": rounds,
        "prompt": "Split the payments module out of the monolith?",
        "phase": Phase.DONE,
        "end_reason": EndReason.COMPLETED,
        "history": history,
        "summary": "",
        "verdict": VerdictRecord(error="no fenced block", fallback=True),
    }
    return RoundtableState.model_validate(data)


def test_the_seat_s_own_name_as_a_label_records_no_change() -> None:
    st = state(3)
    result = build_result(st)
    dev = next(p for p in result.verdict.positions if p.agent == "dev")
    assert dev.no_stance is not None and dev.changes == []
    words = " ".join(result.status.notes) + result.summary
    assert "changed its position" not in words, words


def test_the_next_turn_prompt_asks_no_reason_for_it() -> None:
    st = state(3)
    assert unexplained_change(st.history, "dev", lambda lbl: no_stance(st, lbl) is None) is None
