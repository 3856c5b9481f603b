"""The rule of what a 2.x model request leaves out (core/hiding.py), property-tested: the same
rounds as the 1.x plugin's ``hide`` span (deliberation.rounds_to_hide), never the opening prompt
or the pending one, the observer's request keeps every reply."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core import deliberation, hiding
from roundtabled.core.server_records import PromptRecord, TurnKey
from roundtabled.core.state import Extension, PendingTurn, Phase, RoundtableState

S2 = "ses_hiding0000000000001"


def prompt_id(rnd: int, seat: int) -> str:
    return f"msg_p{rnd}_{seat}".replace("-", "m")


def debate(rounds: int, seats: int, *, observed: bool = True) -> list[PromptRecord]:
    """S2's prompts of ``rounds`` complete rounds of ``seats`` seats, each with one reply, a
    person's message, and (``observed``: an extended roundtable) the observer after round 1."""
    out = [
        PromptRecord(prompt_id(r, s), TurnKey(S2, r, s), (f"msg_r{r}_{s}",), "reply")
        for r in range(rounds)
        for s in range(seats)
    ]
    if observed:
        obs = TurnKey(S2, 0, TurnKey.OBSERVER)
        out.append(PromptRecord(prompt_id(0, -1), obs, ("msg_verdict",), "verdict"))
    out.append(PromptRecord("msg_person", None, ("msg_interjection",), "hello"))
    return out


def state_at(
    rnd: int, seat: int, *, context: str, kind: str = "turn", extended: bool = False
) -> RoundtableState:
    agents = ["pm", "dev", "rv"]
    pend = PendingTurn(
        kind=kind,
        round=rnd,
        seat=seat,
        agent=agents[seat] if seat >= 0 else "roundtable-observer",
        message_id=prompt_id(rnd, seat),
    )
    return RoundtableState.model_validate(
        {
            "session_id": S2,
            "title": "Q",
            "agents": agents,
            "total_rounds": 20,
            "current_round": rnd,
            "prompt": "Q?",
            "phase": Phase.ACTIVE,
            "pending": pend,
            "options": {"context": context},
            "unhidden": ["msg_answered"],
            "extensions": [Extension(from_round=1, prompt="more", mode="continuation")]
            if extended
            else [],
        }
    )


@settings(max_examples=200, deadline=None)
@given(
    rnd=st.integers(0, 12),
    seat=st.integers(0, 2),
    context=st.sampled_from(["full", "recent"]),
    extended=st.booleans(),
)
def test_a_seat_s_request_leaves_out_the_recent_span_and_earlier_verdicts_only(
    rnd: int, seat: int, context: str, extended: bool
) -> None:
    state = state_at(rnd, seat, context=context, extended=extended)
    assert state.pending is not None
    pending = state.pending.message_id
    prompts = [p for p in debate(max(1, rnd), 3, observed=extended) if p.id != pending]
    hidden = hiding.hidden_ids(state, prompts)
    assert len(hidden) == len(set(hidden))
    assert prompt_id(0, 0) not in hidden, "the opening prompt carries the topic"
    assert state.pending is not None and state.pending.message_id not in hidden
    assert hidden[: len(state.unhidden)] == state.unhidden
    # the rounds hidden are exactly the 1.x marker's span (1-based rounds, 0-indexed keys)
    span = set(deliberation.rounds_to_hide(rnd)) if context == "recent" else set()
    for p in prompts:
        if p.key is None:
            assert p.id not in hidden and "msg_interjection" not in hidden
            continue
        listed = p.id in hidden and all(r in hidden for r in p.replies)
        if p.key.seat < 0:
            assert listed, "a seat never sees an earlier verdict"
        elif p.key.round + 1 in span:
            assert listed, (p.key, span)
        else:
            assert not any(r in hidden for r in p.replies), (p.key, span)
    # S2 is read only when the rule needs it
    if not hiding.needs_prompts(state):
        assert hiding.hidden_ids(state) == hidden


@settings(max_examples=100, deadline=None)
@given(rnd=st.integers(0, 12), context=st.sampled_from(["full", "recent"]))
def test_the_observer_s_request_keeps_every_reply(rnd: int, context: str) -> None:
    state = state_at(rnd, -1, context=context, kind="observer", extended=True)
    assert hiding.recent_span(state) is None
    assert hiding.hidden_ids(state, debate(rnd + 1, 3)) == state.unhidden


def test_the_span_is_the_one_the_1x_marker_carries() -> None:
    assert hiding.recent_span(state_at(2, 0, context="recent")) is None
    assert hiding.recent_span(state_at(3, 0, context="recent")) == (1, 1)
    assert hiding.recent_span(state_at(6, 1, context="recent")) == (1, 4)
    assert hiding.recent_span(state_at(6, 1, context="full")) is None
