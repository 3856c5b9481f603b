"""Regression: the JSON export of a running debate showed an empty digest line (`- pm (round 9): `).

Field failure (a new user's try, not reproduced by hand): a running debate's summary is the digest
of each seat's last position. A closing line whose label is made only of invisible characters —
``Position:`` followed by a zero-width space, which a model's tokenizer can emit — parsed as a
position with the label ``"\\u200b"``, which prints as nothing.

Proves: such a label is no position (the digest quotes the seat's last words instead), for the
exact input and, property-tested, for any closing line made of markup, punctuation, digits and
invisible characters: no digest line ends with an empty position.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core.positions import parse_position
from roundtabled.core.result import digest
from roundtabled.core.state import HistoryEntry, Phase, RoundtableState


def running(reply: str) -> RoundtableState:
    pm = HistoryEntry.model_validate(
        {"agent": "pm", "round": 9, "response": reply, "kind": "turn", "finish": "stop"}
    )
    return RoundtableState.model_validate(
        {
            "session_id": "ses_digest",
            "title": "Digest",
            "agents": ["pm", "dev"],
            "total_rounds": 10,
            "current_round": 8,
            "current_agent_index": 1,
            "prompt": "Keep the monolith?",
            "phase": Phase.ACTIVE,
            "history": [pm],
        }
    )


def test_a_zero_width_label_is_no_position() -> None:
    reply = "The monolith serves us well.\nPosition:\u200b"
    assert parse_position(reply) is None
    line = digest(running(reply)).splitlines()[1]
    assert line.startswith("- pm (round 9): no Position line; last words:"), line


_CLOSING = st.text(
    alphabet=st.sampled_from(list(" *_—–-.:()/%0123456789`'\"\u200b\u200c\u200d\ufeff\u00ad")),
    max_size=20,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["Position:", "**Position:**", "Final position:", "Answer:"]), _CLOSING)
def test_no_digest_line_ends_with_an_empty_position(head: str, rest: str) -> None:
    line = digest(running(f"An argument.\n{head}{rest}")).splitlines()[1]
    shown = line.split("): ", 1)[1]
    assert "".join(c for c in shown if c.isprintable() and not c.isspace()), repr(line)
