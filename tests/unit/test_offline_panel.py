"""The offline panel (roundtabled/offline/panel.py): what the demo's scripted model answers a seat
and the observer. Its replies must read as the daemon reads a real model's: a position on every
turn, never a loop, the same reply to the same prompt, and a verdict the observer rule accepts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core.observer_verdict import parse_reply
from roundtabled.core.positions import parse_position
from roundtabled.core.prompts import turn_prompt
from roundtabled.core.scoring import evaluate_expression, read_answer
from roundtabled.core.similarity import is_loop
from roundtabled.core.stances import group, no_stance_reason
from roundtabled.core.state import RoundtableState
from roundtabled.offline.panel import SeatPrompt, observer_reply, parse_seat_prompt, seat_reply

SEATS = ("pm", "dev", "rv")
topics = st.text(
    st.characters(codec="ascii", categories=("L", "N", "Zs")), min_size=3, max_size=60
).map(lambda t: f"Should we {t.strip() or 'ship'}?")


def _replies(topic: str, rounds: int, side: str | None = None) -> list[tuple[str, int, str]]:
    return [
        (a, r, seat_reply(SeatPrompt(a, r, rounds, SEATS, topic, side if a == "rv" else None)))
        for r in range(1, rounds + 1)
        for a in SEATS
    ]


@settings(max_examples=60, deadline=None)
@given(topic=topics, side=st.sampled_from([None, "for", "against", "neutral"]))
def test_every_turn_states_a_position_and_none_repeats_the_last(
    topic: str, side: str | None
) -> None:
    replies = _replies(topic, 5, side)
    for _, _, text in replies:
        pos = parse_position(text)
        assert pos is not None and pos.confidence is not None, text
        assert no_stance_reason(pos.label, seats=SEATS, topic=topic) is None, pos.label
    texts = [t for _, _, t in replies]
    # The daemon ends a debate whose reply repeats the last reply of the round before
    # (docs/behaviour.md, "Loops"): no reply is that close to any of the three before it.
    assert not any(
        is_loop(text, earlier, 0.85)
        for i, text in enumerate(texts)
        for earlier in texts[max(0, i - 3) : i]
    )
    assert replies == _replies(topic, 5, side)  # deterministic


@settings(max_examples=40, deadline=None)
@given(topic=topics)
def test_free_seats_come_to_one_stance_in_their_own_words(topic: str) -> None:
    last = {a: parse_position(t) for a, r, t in _replies(topic, 3) if r == 3}
    labels = [p.label for p in last.values() if p is not None]
    assert len(set(labels)) > 1  # their own words
    assert len(set(group(labels).values())) == 1  # one stance
    changed = [t for _, r, t in _replies(topic, 3) if t.startswith("Changed:")]
    assert len(changed) == 1  # one seat changed its mind, and said why


def test_a_real_turn_prompt_is_read() -> None:
    state = RoundtableState.model_validate(
        {
            "session_id": "ses_abc",
            "title": "t",
            "agents": list(SEATS),
            "total_rounds": 3,
            "prompt": "Should we adopt trunk-based development?",
            "options": {"sides": {"rv": "against"}},
        }
    )
    text = turn_prompt(state, round_index=1, seat=2, since=(), opening=False)
    seat = parse_seat_prompt(text)
    assert seat == SeatPrompt(
        "rv", 2, 3, SEATS, "Should we adopt trunk-based development?", side="against"
    )
    assert parse_seat_prompt("a person's message") is None


def test_arithmetic_answers_are_numbers_some_wrong_at_first_and_corrected() -> None:
    expr = "3+11*7"
    right = str(evaluate_expression(expr))
    answers = {
        (a, r): read_answer(
            seat_reply(SeatPrompt(a, r, 3, SEATS, f"What is the result of {expr}?"))
        ).text
        for a in SEATS
        for r in (1, 2, 3)
    }
    assert {answers[(a, 3)] for a in SEATS} == {right}  # the debate ends right
    assert any(answers[(a, 1)] != right for a in SEATS)  # someone erred in the opening


def test_the_observer_decides_what_the_tally_puts_first() -> None:
    prompt = (
        "Topic: Should we ship?\nParticipants in speaking order: pm, dev, rv\n"
        "Stances (the daemon groups labels …):\n"
        "- “a staged rollout”: pm, dev (their labels: “a staged rollout”)\n"
        "- “go all in”: rv (their labels: “go all in”)\n"
    )
    _, verdict, error = parse_reply(observer_reply(prompt), SEATS)
    assert error is None and verdict is not None
    assert verdict.decision == "a staged rollout" and verdict.consensus == "majority"
