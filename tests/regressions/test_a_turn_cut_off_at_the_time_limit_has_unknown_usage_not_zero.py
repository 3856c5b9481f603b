"""Field failure (`scripts/demo --base-url http://127.0.0.1:18080/v1 --model local`, a real
Qwen2.5-Coder 0.5B on llama.cpp's server): pm's turn looped until the 300 s turn limit and was cut
off with its text kept; the server recorded no usage for the aborted step, and the result read
``usage pm 0 in 0 out $0.0000`` with ``unreportedTurns: 0`` — a model that worked 300 s shown as
having cost nothing. A turn that wrote text and recorded no usage has unknown usage, whether it
ended normally, timed out or errored; a turn that failed without writing anything is not counted.
"""

from __future__ import annotations

from roundtabled.core.result import build_result
from roundtabled.core.state import HistoryEntry, Usage
from tests.states import finished as state_of
from tests.states import seat_turn as turn

LOOPED = (
    "The argument presented is as follows:\n"
    "Position: 9 — This argument is based on the team's experience and the current situation. "
    "The team is facing slow deployment times due to dependencies and other factors."
)
"""The start of the cut-off reply (the model went on repeating it until the limit)."""


def cut_off(agent: str, rnd: int) -> HistoryEntry:
    return HistoryEntry.model_validate(
        {
            "agent": agent,
            "round": rnd,
            "response": LOOPED,
            "kind": "turn",
            "cut_off": True,
            "has_error": True,
            "error": "timed out after 300 s",
            "usage": Usage(),
        }
    )


def test_a_cut_off_turn_without_usage_is_unknown_not_zero() -> None:
    reported = Usage(input=1200, output=16)
    history = [cut_off("pm", 1), turn("dev", 1, reported), turn("pm", 2, reported)]
    usage = build_result(state_of(history)).dump()["usage"]
    assert usage["unreportedTurns"] == 1, usage
    assert usage["perAgent"]["pm"]["unreportedTurns"] == 1
    assert usage["perAgent"]["dev"]["unreportedTurns"] == 0


def test_a_cut_off_turn_alone_is_unknown_usage() -> None:
    usage = build_result(state_of([cut_off("pm", 1)])).dump()["usage"]
    assert usage["perAgent"]["pm"] == {
        "input": None,
        "output": None,
        "cost": None,
        "unreportedTurns": 1,
    }


def test_a_failed_turn_without_text_is_still_not_counted() -> None:
    usage = build_result(state_of([turn("pm", 1, failed=True)])).dump()["usage"]
    assert usage["unreportedTurns"] == 0
