"""The closing ``Position:`` line of a seat's reply (roundtabled/positions.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core.positions import LABEL_MAX, Position, normalise_label, parse_position


@pytest.mark.parametrize(
    ("text", "label", "sentence", "confidence"),
    [
        (
            "We should wait.\nPosition: modular monolith — keep one deploy unit (confidence 7/10)",
            "modular monolith",
            "keep one deploy unit",
            0.7,
        ),
        (
            "**Position:** Split now - the team is ready (confidence: 8/10)",
            "Split now",
            "the team is ready",
            0.8,
        ),
        ("Position: Wait (confidence 0.6)", "Wait", "", 0.6),
        ("Position: x — y (confidence 75%)", "x", "y", 0.75),
        ("position: Modular Monolith – fine.", "Modular Monolith", "fine.", None),
        ("> Position: keep — because (conf 9/10)", "keep", "because", 0.9),
        ("Position: A: because b", "A", "because b", None),
        ("Position: ship it — now (confidence 10/10)", "ship it", "now", 1.0),
    ],
)
def test_closing_lines_parse(
    text: str, label: str, sentence: str, confidence: float | None
) -> None:
    pos = parse_position(text)
    assert pos is not None
    assert (pos.label, pos.position, pos.confidence) == (label, sentence, confidence)
    # Only the first reply argues before its closing line.
    assert pos.only_line is (not text.startswith("We should wait."))
    assert (pos.source, pos.lines) == ("position", 1)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I think we should split.",
        "My position is clear: split.",  # not a Position: line
        "Position:  — (confidence 5/10)",  # no label
        "Position:",
    ],
)
def test_no_closing_line_is_no_position(text: str) -> None:
    assert parse_position(text) is None


def test_the_last_line_wins() -> None:
    text = "Position: split — earlier\nmore text\nPosition: wait — later (confidence 3/10)"
    pos = parse_position(text)
    assert pos is not None and pos.label == "wait" and pos.confidence == 0.3


def test_confidence_out_of_range_is_none_not_guessed() -> None:
    pos = parse_position("Position: split — x (confidence 42/10)")
    assert pos is not None and pos.confidence is None


def test_long_label_is_cut() -> None:
    pos = parse_position("Position: " + "a" * 500)
    assert pos is not None and len(pos.label) == LABEL_MAX


def test_normalise_label_case_space_punctuation() -> None:
    assert normalise_label("  Modular   Monolith. ") == "modular monolith"
    assert normalise_label('"Split NOW"') == "split now"
    assert Position(label="Split  Now!").key == Position(label="split now").key


@given(st.text(max_size=300))
def test_parse_never_raises_and_labels_are_non_empty(text: str) -> None:
    pos = parse_position(text)
    if pos is not None:
        assert normalise_label(pos.label)
        assert pos.confidence is None or 0.0 <= pos.confidence <= 1.0
