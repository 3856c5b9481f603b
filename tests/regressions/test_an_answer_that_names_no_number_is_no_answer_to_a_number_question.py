"""A real local model (Qwen2.5-Coder 0.5B, ``roundtabled eval --level easy``, question
``easy-0-2`` "What is the result of 6+5*8?", in the debate after the opening) closed its turn
with the observer's verdict JSON after ``Answer:``. The eval took the folded JSON as the seat's
answer; all three seats copied it, so the vote of the debate's last round was that text, shown
as the debate's answer. To a question whose answer is a number, an answer that names no number
is no answer."""

from __future__ import annotations

from roundtabled.core.scoring import Question, answer_to, majority, read_answer

COPIED = (
    'Answer: {"decision": "seat-b\'s label in its last answer (round 1), \'The result o'
    'f 6 + 5*8 is 48.\'", "confidence": 0.0, "consensus": "majority", "agreements": ["'
    'seat-a", "seat-b", "seat-c"], "disagreements": [{"point": "seat-b\'s label in its'
    ' last answer (round 1), \'The result of 6 + 5*8 is 48.\'", "minority": ["seat-a", '
    '"seat-b", "seat-c"], "view": "seat-a, seat-b, seat-c"}], "openQuestions": ["seat'
    "-a's label in its last answer (round 1), 'The result of 6 + 5*8 is 48.'\", \"nextS"
    "teps\": [\"seat-a, seat-b's label in its last answer (round 1), 'The result of 6 +"
    ' 5*8 is 48.\'", "stances": [{"action": "merge", "stances": ["seat-a", "seat-b", "'
    'seat-c"], "why": "seat-a, seat-b, seat-c name the same position, so the debate i'
    "s one voice several times, seat agents on different models or give them distinct"
    ' roles"}]}]}'
)
"""seat-b's whole reply in round 2 (S2 ``ses_dbdb36353ffeJFoplI890R1DDG``), as the server stored
it; seat-a and seat-c wrote the same line in later rounds."""
QUESTION = Question(id="easy-0-2", question="What is the result of 6+5*8?", answer="46")


def test_a_copied_verdict_is_no_answer_to_a_number_question() -> None:
    read = read_answer(COPIED)
    assert read.source == "answer" and read.text is not None
    assert answer_to(QUESTION, read.text) is None


def test_three_copies_do_not_win_the_vote_over_one_number() -> None:
    answers = [answer_to(QUESTION, read_answer(t).text) for t in (COPIED, COPIED, "Answer: 46")]
    assert majority([(a, None) for a in answers]) == "46"


def test_a_number_and_a_text_question_are_read_as_before() -> None:
    assert answer_to(QUESTION, "46.0") == "46"
    assert answer_to(QUESTION, "The result of 6+5*8 is 46") == "46"
    text = Question(id="t", question="Capital of France?", answer="Paris")
    assert answer_to(text, "paris.") == "paris"
