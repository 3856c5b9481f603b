"""A real local model (Qwen2.5-Coder 0.5B, the eval's ``answer`` form) closed with
``Answer: The result of 10*4+12*13 is 132``: the line names the question's numbers and then its
result, and the eval read no number from it (several different ones), so the seat counted as
answering a sentence, and a right result written that way would have been scored wrong."""

from __future__ import annotations

import pytest

from roundtabled.core.scoring import canonical, read_answer


def test_the_real_model_s_line_is_read_as_the_number_it_ends_on() -> None:
    read = read_answer("Step 1: 10*4 = 40.\n\nAnswer: The result of 10*4+12*13 is 132")
    assert read.source == "answer"
    assert canonical(read.text) == "132"


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("The result of 10*4+12*13 is 196.", "196"),
        ("10*4 + 12*13 = 40 + 156 = 196", "196"),
        ("2+2 equals **4**", "4"),
    ],
)
def test_a_restated_question_ending_on_its_result(text: str, number: str) -> None:
    assert canonical(text) == number


@pytest.mark.parametrize("text", ["12 or 13", "x is 12 or 13", "12 is not 13"])
def test_several_numbers_without_a_result_at_the_end_stay_no_number(text: str) -> None:
    assert canonical(text) == text.casefold()
