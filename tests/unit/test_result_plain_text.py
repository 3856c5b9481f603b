"""The tool's output reads as plain text (roundtabled.core.result.plain_text): the TUI shows a
tool's output as it is, so the observer's markdown emphasis (``**Executive summary.**``) was
shown raw in the parent session."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core.result import build_result, plain_text, result_json
from tests.unit.test_verdict import observer, pos, state, turn

MARKUP = re.compile(r"[*_#\-\s]")


def test_emphasis_headings_and_star_bullets_become_plain_text() -> None:
    md = (
        "**Executive summary.** The panel *rejects* a big-bang split.\n\n"
        "## Key points\n* *pm*: release speed\n* __dev__: 2 * 3 = 6 joins\n`a*b*c`"
    )
    assert plain_text(md) == (
        "Executive summary. The panel rejects a big-bang split.\n\n"
        "Key points\n- pm: release speed\n- dev: 2 * 3 = 6 joins\n`a*b*c`"
    )


@given(st.text(alphabet=st.sampled_from(list("ab *_#-\n.:1")), max_size=60))
def test_only_markup_characters_are_touched(text: str) -> None:
    out = plain_text(text)
    assert MARKUP.sub("", out) == MARKUP.sub("", text)


@given(st.text().filter(lambda t: not set(t) & set("*_#")))
def test_text_without_markup_is_unchanged(text: str) -> None:
    assert plain_text(text) == text


def test_the_result_and_the_tool_output_carry_the_summary_as_plain_text() -> None:
    history = [
        turn("pm", 1, pos("a", 5)),
        turn("dev", 1, pos("a", 6)),
        observer("**Executive summary.** Both agree.\n\n**Key points.** *pm*: a."),
    ]
    st_ = state(history, agents=["pm", "dev"], total_rounds=1, summary=history[-1].response)
    result = build_result(st_)
    data = json.loads(result_json(result))
    assert data["summary"] == result.summary
    assert "**" not in data["summary"]
    assert "Executive summary. Both agree." in data["summary"]
    assert "Key points. pm: a." in data["summary"]
