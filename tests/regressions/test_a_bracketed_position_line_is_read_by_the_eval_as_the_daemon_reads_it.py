"""Field fault (a mixed panel's smoke run: Qwen2.5-Coder 1.5B as seat-b on llama.cpp's server):
the seat's whole reply was one closing line wrapped in an opening bracket. The daemon read its
position (``37``) and counted it in the vote, but the eval read "no answer" for the seat alone —
its own line reader wanted the line to start with ``Position``. On the 40-question arithmetic
run the two readers disagreed this way on 20 of 1,082 seat replies. Now a Position line the
daemon reads is the eval's answer too. The exact input: that reply."""

from __future__ import annotations

from roundtabled.core.positions import parse_position
from roundtabled.core.scoring import read_answer

REPLY = (
    "[Position: 37 — The result of 3 + 11 * 7 is 37. The reasoning is straightforward: first, we "
    "multiply 11 by 7 (which equals 77), then we add 3 to 77 (which equals 80). The final result "
    "of the expression is 37. The confidence in this answer is 10/10 because there are no known "
    "errors in the calculation or the reasoning process."
)


def test_a_bracketed_position_line_is_the_eval_s_answer_as_it_is_the_daemon_s() -> None:
    pos = parse_position(REPLY)
    assert pos is not None and pos.label == "37"
    got = read_answer(REPLY)
    assert (got.text, got.source) == ("37", "position")


def test_a_closing_line_after_a_concluding_word_is_read_too() -> None:
    reply = (
        "3 + 11*7 = 80.\n\nTherefore, **Position: 80 — seven elevens and three** (confidence 9/10)"
    )
    got = read_answer(reply)
    assert (got.text, got.source) == ("80", "position") and got.confidence == 0.9
