"""The code-reading task family (docs/eval.md, "Code reading"): the generator is pure and
deterministic per seed, every program runs within the bounds and prints one line, its recorded
answer is what a fresh run prints, and printed outputs compare exactly but for whitespace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.cli import main
from roundtabled.cli.evaluate import options_from
from roundtabled.cli.parser import build_parser
from roundtabled.core import code_reading
from roundtabled.core.scoring import (
    Question,
    answer_to,
    gold_canonical,
    parse_task_lines,
    read_answer,
)
from roundtabled.eval import code
from roundtabled.eval.options import EvalOptions, load_questions

seeds = st.text(alphabet="0123456789:abc", min_size=1, max_size=12)


levels = st.sampled_from(sorted(code_reading.LEVELS))


@given(seeds, levels)
def test_a_seed_gives_one_program(seed: str, level: str) -> None:
    first = code_reading.program(seed, level)
    assert first == code_reading.program(seed, level)
    assert "import" not in first and "open(" not in first and "set(" not in first
    assert first.rstrip().splitlines()[-1].startswith("print(")
    if level == "easy":  # one operation on literals: at most a loop of two lines and a print
        assert len(first.rstrip().splitlines()) <= 4


def test_medium_is_the_set_generated_before_levels() -> None:
    assert code_reading.program("0:0:0") == code_reading.program("0:0:0", "medium")
    assert code_reading.program("0:0:0", "easy") != code_reading.program("0:0:0")
    assert [q.id for q in code.code_questions(2, 5, "easy")] == ["code-easy-5-0", "code-easy-5-1"]
    with pytest.raises(KeyError):
        code_reading.program("0", "hard")


@settings(max_examples=12, deadline=None)
@given(seeds, levels)
def test_every_program_runs_within_the_bound_and_prints_the_same_line_twice(
    seed: str, level: str
) -> None:
    source = code_reading.program(seed, level)
    once = code.run_program(source)
    assert code_reading.one_line(once)
    assert code.run_program(source) == once
    # A seat that states the printed line on its answer line, in either form, is right.
    q = Question("q", code_reading.question_text(source), once, compare="output")
    for line in (
        f"Position: {once.strip()} — it prints this (confidence 8/10)",
        f"Answer: `{once}`",
    ):
        assert answer_to(q, read_answer(line).text) == gold_canonical(q)


def test_the_recorded_answer_is_what_a_fresh_run_prints() -> None:
    qs = code.code_questions(6, 3)
    assert [q.id for q in qs] == [f"code-3-{i}" for i in range(6)]
    assert qs == code.code_questions(6, 3)
    assert code.code_questions(2, 3) == qs[:2]
    for q in qs:
        source = q.question.split("```python\n", 1)[1].split("\n```", 1)[0]
        assert code_reading.output_form(code.run_program(source + "\n")) == q.answer
        assert q.compare == "output" and gold_canonical(q) == q.answer


def test_a_program_that_errors_loops_or_prints_nothing_is_refused() -> None:
    with pytest.raises(code.ProgramFailed, match="exited 1: ZeroDivisionError"):
        code.run_program("print(1 // 0)\n")
    with pytest.raises(code.ProgramFailed, match="not one line"):
        code.run_program("x = 1\n")
    with pytest.raises(code.ProgramFailed, match="not one line"):
        code.run_program("print(1)\nprint(2)\n")
    with pytest.raises(code.ProgramFailed):  # the CPU limit or the wall clock, whichever first
        code.run_program("while True:\n    pass\n")
    with pytest.raises(code.ProgramFailed, match="MemoryError"):
        code.run_program("x = bytearray(1024 * 1024 * 1024)\nprint(len(x))\n")
    with pytest.raises(code.ProgramFailed, match="File too large"):  # RLIMIT_FSIZE 0
        code.run_program("with open('f', 'w') as f:\n    f.write('x')\nprint(1)\n")


@given(st.text(max_size=40), st.sampled_from(["", " ", "\t", "  \n"]))
def test_outputs_compare_exactly_but_for_surrounding_and_trailing_whitespace(
    out: str, pad: str
) -> None:
    q = Question("q", "What does this print?", out, compare="output")
    padded = "\n".join(line + pad.strip("\n") for line in out.splitlines()) + pad
    assert answer_to(q, padded) == gold_canonical(q)


def test_case_punctuation_and_inner_spaces_count() -> None:
    q = Question("q", "?", "[1, 2] ab 3", compare="output")
    assert answer_to(q, "  [1, 2] ab 3  ") == gold_canonical(q)
    for wrong in ("[1,2] ab 3", "[1, 2] AB 3", "[1, 2] ab  3", "1, 2 ab 3", "", None):
        assert answer_to(q, wrong) != gold_canonical(q)


def test_the_set_round_trips_through_a_task_file(tmp_path: Path) -> None:
    qs = code.code_questions(3, 7)
    path = tmp_path / code.QUESTIONS_FILE
    code.write_questions(path, qs)
    assert parse_task_lines(path.read_text().splitlines()) == qs
    line = json.loads(path.read_text().splitlines()[0])
    assert line["compare"] == "output"
    assert load_questions(EvalOptions(agents=["a", "b"], out=tmp_path, tasks=str(path))) == qs


def test_load_questions_generates_only_what_limit_runs(tmp_path: Path) -> None:
    opts = EvalOptions(agents=["a", "b"], out=tmp_path, tasks="code", seed=1, limit=2)
    assert load_questions(opts) == code.code_questions(2, 1)


def test_a_task_file_with_an_unknown_compare_names_it() -> None:
    line = json.dumps({"id": 1, "question": "q", "answer": "a", "compare": "exact"})
    with pytest.raises(ValueError, match="f:1: compare must be one of answer, output"):
        parse_task_lines([line], "f")


def test_an_unknown_tasks_value_names_the_flag_and_the_allowed_values(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    code_ = main(["eval", "--agents", "a,b", "--tasks", "cod", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code_ == 2 and len(err) == 1, err
    assert err[0] == "Error: --tasks must be 'arithmetic', 'code' or a JSONL file, got 'cod'"
    assert not out.exists()


def test_the_code_set_names_its_run_directory_and_records_its_level(tmp_path: Path) -> None:
    args = build_parser().parse_args(["eval", "--agents", "a,b", "--tasks", "code", "--seed", "4"])
    opts = options_from(args)
    assert opts.tasks == "code" and opts.out == Path("eval-code-medium-4")
    assert opts.identity()["level"] == "medium"
    args = build_parser().parse_args(
        ["eval", "--agents", "a,b", "--tasks", "code", "--level", "easy", "--limit", "3"]
    )
    opts = options_from(args)
    assert opts.out == Path("eval-code-easy-0") and opts.identity()["level"] == "easy"
    assert [q.id for q in load_questions(opts)] == [f"code-easy-0-{i}" for i in range(3)]


def test_an_arithmetic_level_for_code_names_the_flag_and_the_code_levels(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    code_ = main(["eval", "--agents", "a,b", "--tasks", "code", "--level", "du", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code_ == 2 and len(err) == 1, err
    assert err[0] == "Error: --level must be one of easy, medium for --tasks code, got 'du'"
    assert not out.exists()
