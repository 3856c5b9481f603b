"""Regression: ``until: converged`` that never fired because seats gave no ``Position:`` line
said nothing: the result read like a debate that simply ran its rounds.

Proves, on the pure result (``status.notes``, what ``status``, the CLI and the export show):
a finished 3-round debate with ``until: converged`` whose seats never wrote a ``Position:``
line gets one note naming the rule, the count of turns and the rounds; with positions stated
(and not converged) there is no such note.
"""

from __future__ import annotations

from typing import Any

from roundtabled.core.state import EndReason, HistoryEntry, Options, Phase, RoundtableState
from roundtabled.core.verdict import build_status

AGENTS = ["pm", "dev"]


def turn(agent: str, rnd: int, text: str) -> HistoryEntry:
    return HistoryEntry.model_validate(
        {"agent": agent, "round": rnd, "response": text, "kind": "turn", "finish": "stop"}
    )


def finished(history: list[HistoryEntry], **kw: Any) -> RoundtableState:
    return RoundtableState.model_validate(
        {
            "session_id": "ses_convergednever0001",
            "title": "Split?",
            "agents": AGENTS,
            "total_rounds": 3,
            "current_round": 3,
            "prompt": "Split the monolith?",
            "phase": Phase.DONE,
            "end_reason": EndReason.COMPLETED,
            "options": Options(until="converged"),
            "history": history,
            **kw,
        }
    )


def test_until_converged_without_position_lines_says_it_could_not_judge() -> None:
    """Exact input: pm, dev × 3 rounds, ``until: converged``; every reply is prose without a
    ``Position:`` line; the debate ran all 3 rounds."""
    history = [turn(a, r, f"{a} argues at length in round {r}.") for r in (1, 2, 3) for a in AGENTS]
    notes = build_status(finished(history)).notes
    said = [n for n in notes if "until converged" in n]
    assert said == [
        "until converged never stopped the debate: 6 of 6 seat turns gave no Position: line "
        "(rounds 1, 2, 3), so convergence could not be judged"
    ], notes


def test_positions_stated_but_different_give_no_such_note() -> None:
    history = [
        turn(a, r, f"Argument.\nPosition: {a}-{r} — reasons (confidence 6/10)")
        for r in (1, 2, 3)
        for a in AGENTS
    ]
    notes = build_status(finished(history)).notes
    assert not [n for n in notes if "until converged" in n], notes
