"""Regression: the round counts of a cancelled debate did not add up.

Field failure (a new user's try): cancelled while dev (the middle seat) spoke in round 8 of 50 →
``cancelled, 7/50 rounds``; cancelled while rv (the last seat) spoke in round 9 of 30 →
``9/30 rounds`` although rv's round-9 turn was cut off; the first, extended by 1 round, read
``completed, 7/9 rounds`` although round 9 ran in full, and rv's round-8 turn, which never ran,
was mentioned nowhere.

Proves, on the states those runs left (the pure core builds every count and word from them):
a round counts as completed when every seat's turn in it ended on its own — the same count in
the result's status, the CLI's status line, the export and the observer's prompt — and a round
that did not run in full says which seats' turns never ran, also after an extension.
"""

from __future__ import annotations

from typing import Any

from roundtabled.core.result import build_result, delivery_text, observer_prompt
from roundtabled.core.state import EndReason, Extension, HistoryEntry, Phase, RoundtableState
from roundtabled.service.export import to_data, to_markdown

AGENTS = ["pm", "dev", "rv"]


def turn(agent: str, rnd: int, *, cancelled: bool = False) -> HistoryEntry:
    data: dict[str, Any] = {
        "agent": agent,
        "round": rnd,
        "response": f"{agent} argues, round {rnd}.\nPosition: keep it — it works (confidence 7/10)",
        "kind": "turn",
        "finish": "stop",
    }
    if cancelled:
        data.update(
            response=f"{agent} had begun to", cut_off=True, has_error=True,
            error="cut off by the cancel", finish=None,
        )  # fmt: skip
    return HistoryEntry.model_validate(data)


def rounds(n: int) -> list[HistoryEntry]:
    return [turn(a, r) for r in range(1, n + 1) for a in AGENTS]


def cancelled_state(history: list[HistoryEntry], total: int, **kw: Any) -> RoundtableState:
    data: dict[str, Any] = {
        "session_id": "ses_counts",
        "title": "Counts",
        "agents": AGENTS,
        "total_rounds": total,
        "current_round": max(e.round for e in history) - 1,
        "prompt": "Keep the monolith?",
        "phase": Phase.DONE,
        "end_reason": EndReason.CANCELLED,
        "history": history,
        "errors": ["cancelled: by the user"],
        **kw,
    }
    return RoundtableState.model_validate(data)


def status_line(state: RoundtableState) -> str:
    return next(ln for ln in delivery_text(state).splitlines() if ln.startswith("Status:"))


def test_cancelled_while_the_middle_seat_spoke_in_round_8_of_50() -> None:
    state = cancelled_state([*rounds(7), turn("pm", 8), turn("dev", 8, cancelled=True)], 50)
    result = build_result(state)
    assert result.status.rounds_completed == 7
    assert status_line(state).startswith("Status: cancelled, 7/50 rounds")
    notes = result.status.notes
    assert "round 8 did not run in full: rv's turn never ran" in notes, notes
    assert "dev was cut off by the cancel in round 8" in notes, notes
    assert any("cancelled in round 8 of 50 (while dev spoke)" in n for n in notes), notes


def test_cancelled_while_the_last_seat_spoke_in_round_9_of_30() -> None:
    history = [*rounds(8), turn("pm", 9), turn("dev", 9), turn("rv", 9, cancelled=True)]
    state = cancelled_state(history, 30)
    result = build_result(state)
    # rv's round-9 turn was cut off: round 9 did not run in full.
    assert result.status.rounds_completed == 8
    assert status_line(state).startswith("Status: cancelled, 8/30 rounds")
    rv = next(s for s in result.status.seats if s.agent == "rv")
    assert rv.cancelled == 1
    assert any("cancelled in round 9 of 30 (while rv spoke)" in n for n in result.status.notes)


def test_the_cut_debate_extended_by_one_round_counts_round_9_and_names_rv_s_missing_turn() -> None:
    history = [*rounds(7), turn("pm", 8), turn("dev", 8, cancelled=True)]
    history += [turn(a, 9) for a in AGENTS]
    state = cancelled_state(
        history,
        9,
        end_reason=EndReason.COMPLETED,
        errors=[],
        extensions=[Extension(from_round=8, prompt="Continue", mode="continuation")],
    )
    result = build_result(state)
    assert result.status.rounds_completed == 8, "rounds 1-7 and 9 ran in full"
    assert status_line(state) == "Status: completed, 8/9 rounds, DEGRADED"
    want = "round 8 did not run in full: rv's turn never ran; the debate went on from round 9"
    assert want in result.status.notes, result.status.notes
    assert result.status.degraded
    # The observer is told the same words.
    assert want in observer_prompt(state, state.history)
    # The export: the same count, the same note, and the round the extension began with.
    data = to_data(state)
    assert data["status"]["roundsCompleted"] == 8 and want in data["status"]["notes"]
    assert data["extensions"][0]["firstRound"] == 9
    assert "**Extension from round 9 (continuation):** Continue" in to_markdown(data)
