"""A short topic is a proposal its own words answer: asked "Ship?", a seat whose label is
"ship" holds a stance, and so do two seats answering "Keep the monolith?" with "keep the
monolith". The topic-copy rule (a seat that pastes a long question as its label names the
question, not an answer) had counted these as no position, which emptied the tally of a
healthy debate (the CLI's positions table read "(no …" instead of the seat's confidence)."""

from __future__ import annotations

import pytest

from roundtabled.core.stances import no_stance_reason

SEATS = ["pm", "dev", "rv"]


@pytest.mark.parametrize(
    ("label", "topic"),
    [
        ("ship", "Ship?"),
        ("keep the monolith", "Keep the monolith?"),
        ("split now", "Split now?"),
    ],
)
def test_a_short_topic_answered_in_its_own_words_is_a_stance(label: str, topic: str) -> None:
    assert no_stance_reason(label, seats=SEATS, topic=topic) is None


def test_a_long_topic_copied_as_the_label_is_still_no_position() -> None:
    topic = "Should we split the payments monolith into services?"
    label = "Should we split the payments monolith into services"
    assert no_stance_reason(label, seats=SEATS, topic=topic) == "the topic copied"
