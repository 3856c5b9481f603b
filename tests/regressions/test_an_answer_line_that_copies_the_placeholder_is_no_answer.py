"""A real local model (Qwen2.5-Coder 0.5B on llama.cpp, ``roundtabled eval --level easy
--answer-line answer``, question ``easy-0-1`` "What is the result of 6+6*6?", S2
``ses_db72b2ef6ffeSDz4xvLlUK2PCe``) answered turns of the debate after the opening with the
instruction's own last line, ``Answer: <your final answer>``, and nothing else. The eval read
``<your final answer>`` as the seat's answer (source ``answer``): for a number question it then
scored as no number, but for a text question it was an answer, and the report could not tell a
seat that copied the instruction from one that wrote no answer line. In another question
(``easy-0-4``, S2 ``ses_db725c7aeffejHJQpOXME0scS4``) the seats wrote ``Answer: Answer: 89``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roundtabled.core.scoring import Question, answer_to, read_answer
from roundtabled.eval.options import EvalOptions
from roundtabled.eval.report import build_report, write_reports

COPIED = "Answer: <your final answer>"
"""seat-b's whole reply in round 2 of easy-0-1, as the server stored it."""
TWICE = "Answer: Answer: 89"
"""A seat's whole reply in round 2 of easy-0-4, as the server stored it."""


def test_the_placeholder_written_back_is_no_answer() -> None:
    read = read_answer(COPIED)
    assert (read.text, read.source) == (None, "placeholder")
    text = Question(id="t", question="Capital of France?", answer="<your final answer>")
    assert answer_to(text, read.text) is None


def test_an_answer_before_the_copied_placeholder_is_the_answer() -> None:
    read = read_answer("6*6 = 36, 6 + 36 = 42\nAnswer: 42\n\nAnswer: <final answer>")
    assert (read.text, read.source) == ("42", "answer")


def test_the_answer_label_written_twice_is_read_once() -> None:
    read = read_answer(TWICE)
    assert (read.text, read.source) == ("89", "answer")
    choice = Question(id="c", question="Which?", answer="B", choices=("x", "y"))
    assert answer_to(choice, read_answer("Answer: Answer: B").text) == "B"


def test_the_report_counts_the_turns_that_wrote_the_placeholder_back(tmp_path: Path) -> None:
    # easy-0-1's seat-b as the eval recorded it, each round's reply read again.
    replies = ["Thus, the result of 6 + 6 * 6 is \\boxed{42}.", COPIED, "Answer: 42", COPIED]
    reads = [read_answer(t) for t in replies]
    record: dict[str, Any] = {
        "id": "easy-0-1",
        "sessionID": "ses_db72b2ef6ffeSDz4xvLlUK2PCe",
        "seats": {
            "seat-b": {
                "correct": [r.text == "42" for r in reads],
                "reads": [
                    {"round": i, "answer": r.text, "source": r.source, "turn": True}
                    for i, r in enumerate(reads, 1)
                ],
            }
        },
        "protocols": {"vote": {"correct": True, "finalRound": 0, "calls": 3}},
    }
    opts = EvalOptions(agents=["seat-b"], out=tmp_path, protocols=["vote"])
    report = build_report(opts, {"parentSessionID": "ses_x"}, [record], 1)
    assert report["answerReads"] == {"boxed": 1, "placeholder": 2, "answer": 1}
    write_reports(tmp_path, report)
    md = (tmp_path / "report.md").read_text()
    assert "the instruction's placeholder written back (no answer) 2" in md


def test_records_read_before_say_placeholder_too(tmp_path: Path) -> None:
    # The run's own record of easy-0-1's seat-b, read before the placeholder was recognised.
    reads = [
        {"round": 1, "answer": "42", "source": "boxed", "turn": True},
        {"round": 2, "answer": "<your final answer>", "source": "answer", "turn": True},
        {"round": 3, "answer": "42", "source": "answer", "turn": True},
        {"round": 4, "answer": "<your final answer>", "source": "answer", "turn": True},
    ]
    record: dict[str, Any] = {
        "id": "easy-0-1",
        "sessionID": "ses_db72b2ef6ffeSDz4xvLlUK2PCe",
        "seats": {"seat-b": {"correct": [True, False, True, False], "reads": reads}},
        "protocols": {"vote": {"correct": True, "finalRound": 0, "calls": 3}},
    }
    opts = EvalOptions(agents=["seat-b"], out=tmp_path, protocols=["vote"])
    report = build_report(opts, {"parentSessionID": "ses_x"}, [record], 1)
    assert report["answerReads"] == {"boxed": 1, "placeholder": 2, "answer": 1}
