"""The pure rules of ``roundtabled eval`` (roundtabled/core/scoring.py, docs/eval.md)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core import scoring
from roundtabled.core.scoring import (
    Question,
    arithmetic_questions,
    canonical,
    evaluate_expression,
    majority,
    mcnemar_exact,
    paired,
    parse_task_lines,
    read_answer,
    wilson,
)


def test_wilson_matches_known_values() -> None:
    lo, hi = wilson(7, 10) or (0, 0)
    assert (round(lo, 4), round(hi, 4)) == (0.3968, 0.8922)
    assert wilson(0, 0) is None
    lo, hi = wilson(0, 12) or (1, 1)
    assert lo == pytest.approx(0, abs=1e-12) and round(hi, 4) == 0.2425


@given(st.integers(0, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_the_estimate_and_stays_in_0_1(kn: tuple[int, int]) -> None:
    k, n = kn
    got = wilson(k, n)
    if n == 0:
        assert got is None
        return
    assert got is not None
    lo, hi = got
    assert 0 <= lo <= k / n + 1e-12 and k / n - 1e-12 <= hi <= 1


def test_mcnemar_exact_known_values() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(1, 6) == pytest.approx(0.125)
    assert mcnemar_exact(0, 10) == pytest.approx(2 / 1024)
    assert mcnemar_exact(5, 5) == 1.0


@given(st.integers(0, 60), st.integers(0, 60))
def test_mcnemar_is_symmetric_and_a_probability(b: int, c: int) -> None:
    p = mcnemar_exact(b, c)
    assert p == mcnemar_exact(c, b)
    assert 0 < p <= 1
    # Against a brute-force two-sided binomial sum at 1/2.
    n, k = b + c, min(b, c)
    brute = 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)
    assert p == pytest.approx(brute)


def test_paired_counts_discordant_pairs() -> None:
    got = paired([True, True, False, False, True], [True, False, True, False, False])
    assert (got.only_a, got.only_b, got.n) == (2, 1, 5)
    assert got.diff == pytest.approx(0.2)
    with pytest.raises(ValueError):
        paired([True], [])


def test_majority_ties_go_to_confidence_then_seat_order() -> None:
    assert majority([("1", 0.5), ("2", 0.5), ("2", 0.1)]) == "2"
    assert majority([("1", 0.4), ("2", 0.9)]) == "2"
    assert majority([("1", None), ("2", None)]) == "1"
    assert majority([("1", 0.5), ("2", 0.5)]) == "1"
    assert majority([(None, 0.9), ("3", None)]) == "3"
    assert majority([(None, None)]) is None


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.none() | st.floats(0, 1))))
def test_majority_is_a_most_voted_answer(votes: list[tuple[str | None, float | None]]) -> None:
    got = majority(votes)
    counts = {a: sum(1 for x, _ in votes if x == a) for a, _ in votes if a is not None}
    if not counts:
        assert got is None
    else:
        assert got is not None and counts[got] == max(counts.values())


@pytest.mark.parametrize(
    ("reply", "text", "source"),
    [
        ("work\nPosition: 42 — the sum (confidence 8/10)", "42", "position"),
        ("**Position:** 42 – because (confidence 7/10)", "42", "position"),
        ("steps...\nAnswer: **1,024**.", "1,024", "answer"),
        ("Final answer: B", "B", "answer"),
        ("so \\boxed{17} it is", "17", "boxed"),
        ("the result is 17", None, "none"),
        ("Position: 3\nlater\nAnswer: 5", "5", "answer"),
    ],
)
def test_read_answer(reply: str, text: str | None, source: str) -> None:
    got = read_answer(reply)
    assert (got.text, got.source) == (text, source)


def test_read_answer_confidence() -> None:
    assert read_answer("Position: 4 — x (confidence 7/10)").confidence == pytest.approx(0.7)
    assert read_answer("Position: 4 — x (confidence 70%)").confidence == pytest.approx(0.7)
    assert read_answer("Position: 4 — x").confidence is None


def test_canonical_numbers_compare_as_numbers() -> None:
    assert canonical("12.0") == canonical("12") == "12"
    assert canonical("112") != canonical("12")
    assert canonical("1,024") == "1024"
    assert canonical("= -487") == "-487"
    assert canonical("The result is 196") == "196"
    assert canonical("3 or 4") not in ("3", "4")  # two numbers: not read as either
    assert canonical(None) is None


def test_canonical_choices_by_letter_or_text() -> None:
    choices = ("Rome", "Paris")
    assert canonical("B", choices) == canonical("(b)", choices) == "B"
    assert canonical("Paris", choices) == canonical("b. Paris", choices) == "B"
    assert canonical("Madrid", choices) == "madrid"
    q = Question("1", "Capital?", "Paris", choices)
    assert scoring.gold_canonical(q) == "B"


def test_arithmetic_sets_are_seeded_and_exact() -> None:
    a = arithmetic_questions("du", 10, 3)
    assert a == arithmetic_questions("du", 10, 3)
    assert arithmetic_questions("du", 4, 3) == a[:4]
    assert a != arithmetic_questions("du", 10, 4)
    for q in a:
        expr = q.question.removeprefix("What is the result of ").removesuffix("?")
        nums = [int(x) for x in expr.replace("*", "+").replace("-", "+").split("+")]
        assert len(nums) == 6 and all(0 <= x <= 30 for x in nums)
        assert int(q.answer) == evaluate_expression(expr)
    for q in arithmetic_questions("easy", 20, 0):
        assert q.question.count("*") == 1 and q.question.count("+") == 1
    with pytest.raises(ValueError):
        arithmetic_questions("hard", 1, 0)


@given(st.lists(st.integers(0, 50), min_size=1, max_size=6), st.data())
def test_evaluate_expression_matches_python(nums: list[int], data: st.DataObject) -> None:
    ops = [data.draw(st.sampled_from("+-*")) for _ in nums[1:]]
    expr = str(nums[0]) + "".join(o + str(n) for o, n in zip(ops, nums[1:], strict=True))
    assert evaluate_expression(expr) == eval(expr)


def test_task_lines_are_checked_naming_line_and_field() -> None:
    qs = parse_task_lines(
        [
            '{"id": 1, "question": "2+2?", "answer": 4}',
            "",
            '{"id": "b", "question": "Q", "answer": "A", "choices": ["A", "B"]}',
        ]
    )
    assert [q.id for q in qs] == ["1", "b"] and qs[1].choices == ("A", "B")
    bad = [
        ("nope", "t:1: not JSON"),
        ('{"question": "q", "answer": 1}', "t:1: id"),
        ('{"id": 1, "answer": 1}', "t:1: question"),
        ('{"id": 1, "question": "q", "answer": 1, "extra": 2}', "t:1: unknown key(s) extra"),
        ('{"id": 1, "question": "q", "answer": 1, "choices": [1]}', "t:1: choices"),
    ]
    for line, message in bad:
        with pytest.raises(
            scoring.TaskFileError, match=message.replace("(", r"\(").replace(")", r"\)")
        ):
            parse_task_lines([line], "t")
    with pytest.raises(scoring.TaskFileError, match="given twice"):
        parse_task_lines(['{"id": 1, "question": "q", "answer": 1}'] * 2, "t")


def test_summary_of_no_records_is_unknown_not_zero() -> None:
    got = scoring.summarise([], ["single:a", "vote"])
    assert got["bestSingle"] is None
    assert all(p.accuracy is None and p.wilson95 is None for p in got["protocols"])
