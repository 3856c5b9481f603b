"""Reported by a newcomer's trial: the verdict line said ``Verdict (ledger)`` and ``extend
--help`` said ``--mode … override the prefix heuristic`` — the project's own words, not a user's.
The verdict now says whom it is from, and ``--mode`` says what each mode does and how the
default is chosen. ``list`` showed the topic where ``--title`` named the roundtable; it shows the
title given (and the topic where none was)."""

from __future__ import annotations

import pytest

from roundtabled.cli import main
from roundtabled.cli.show import list_label
from roundtabled.core.prompts import default_title
from roundtabled.core.result import build_result, verdict_lines
from tests.unit.test_verdict import pos, state, turn


def test_the_verdict_line_says_whom_the_verdict_is_from() -> None:
    history = [turn("pm", 1, pos("a", 5)), turn("dev", 1, pos("a", 6))]
    lines = verdict_lines(build_result(state(history, agents=["pm", "dev"], total_rounds=1)))
    assert lines[0].startswith("Verdict (from the seats' stated positions): consensus ")
    assert "ledger" not in "\n".join(lines)


def test_extend_mode_help_says_what_the_modes_do(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # argparse wraps at hyphens ("new-" / "topic")
    with pytest.raises(SystemExit):
        main(["extend", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "heuristic" not in text
    assert "continuation: the same question, taken further" in text
    assert "new-topic: PROMPT is a new question for the same panel" in text
    assert "'continue', 'dig deeper' or 'keep going'" in text


def test_list_shows_the_title_given_and_the_topic_otherwise() -> None:
    topic = "Our payments service is a 6-year-old Django monolith.\nShould we split it?"
    titled = {"title": "Demo: split the payments monolith?", "prompt": topic}
    untitled = {"title": default_title(topic), "prompt": topic}
    assert list_label(titled) == "Demo: split the payments monolith?"
    assert list_label(untitled) == " ".join(topic.split())
    assert list_label({"title": "Only a title"}) == "Only a title"
