"""``progress.round_position``: the round a person is shown (status, CLI progress, toasts).

The two cases found in a trial: a cancel during round 1 of 3 showed ``round: 2/3``; the
observer of a 1-round debate showed ``round 2/1``. Plus a property: the round shown is never
above the planned rounds and, once no seat turn is due, never one in which no seat spoke.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core.progress import RoundPosition, round_position
from roundtabled.core.state import EndReason, HistoryEntry, PendingTurn, Phase, RoundtableState

S2 = "ses_progress0000000001"


def state(rounds: int, agents: list[str], **kw: object) -> RoundtableState:
    return RoundtableState(
        sessionID=S2, title="t", agents=agents, total_rounds=rounds, prompt="p", **kw
    )


def turn(agent: str, rnd: int, seat: int) -> HistoryEntry:
    return HistoryEntry(agent=agent, round=rnd, seat=seat, response=f"{agent} {rnd}")


def after_round_1(rounds: int, **kw: object) -> RoundtableState:
    """A debate of pm and dev over ``rounds`` rounds in which both spoke in round 1."""
    return state(rounds, ["pm", "dev"], history=[turn("pm", 1, 0), turn("dev", 1, 1)], **kw)


def test_cancel_after_the_last_seat_of_round_1_shows_round_1_not_2() -> None:
    # Both seats of round 1 recorded: current_round already names round 2 (0-indexed 1).
    st_ = after_round_1(3, current_round=1, phase=Phase.DONE, end_reason=EndReason.CANCELLED)
    pos = round_position(st_)
    assert pos == RoundPosition(1, 3, "ended")
    assert pos.text() == "ended in round 1/3"


def test_cancel_requested_while_active_shows_the_last_spoken_round() -> None:
    st_ = after_round_1(3, current_round=1, end_reason=EndReason.CANCELLED)
    assert round_position(st_) == RoundPosition(1, 3, "ended")


def test_the_observer_of_a_1_round_debate_is_after_round_1_of_1() -> None:
    st_ = after_round_1(
        1,
        current_round=1,
        phase=Phase.OBSERVING,
        pending=PendingTurn(kind="observer", round=1, seat=-1, agent="obs", messageID="msg_1"),
    )
    pos = round_position(st_)
    assert pos == RoundPosition(1, 1, "observer")
    assert pos.text() == "observer after round 1/1"


def test_a_turn_in_flight_names_its_own_round() -> None:
    st_ = after_round_1(
        3,
        current_round=1,
        pending=PendingTurn(kind="turn", round=1, seat=0, agent="pm", messageID="msg_2"),
    )
    assert round_position(st_).text() == "round 2/3"


def test_a_debate_ended_before_anyone_spoke() -> None:
    st_ = state(2, ["pm"], phase=Phase.ABORTED, end_reason=EndReason.SESSION_DELETED)
    assert round_position(st_).text() == "ended before round 1/2"


@given(
    rounds=st.integers(1, 6),
    seats=st.integers(1, 4),
    spoken=st.integers(0, 24),
    phase=st.sampled_from(list(Phase)),
    ended=st.booleans(),
    in_flight=st.booleans(),
)
def test_the_round_shown_is_planned_and_spoken(
    rounds: int, seats: int, spoken: int, phase: Phase, ended: bool, in_flight: bool
) -> None:
    agents = [f"a{i}" for i in range(seats)]
    spoken = min(spoken, rounds * seats)
    history = [turn(agents[i % seats], i // seats + 1, i % seats) for i in range(spoken)]
    cur_round, cur_seat = divmod(spoken, seats)
    pending = None
    if in_flight and phase == Phase.ACTIVE and cur_round < rounds:
        pending = PendingTurn(
            kind="turn", round=cur_round, seat=cur_seat, agent=agents[cur_seat], messageID="m"
        )
    st_ = state(
        rounds,
        agents,
        history=history,
        current_round=cur_round,
        current_agent_index=cur_seat,
        phase=phase,
        pending=pending,
        end_reason=EndReason.CANCELLED if ended else None,
    )
    pos = round_position(st_)
    assert 0 <= pos.round <= rounds
    last = max((e.round for e in history), default=0)
    if pos.stage != "turn":
        assert pos.round == last
    else:
        assert pos.round >= 1


# ── progress toasts ────────────────────────────────────────────────────────────────────────────


def test_turn_toast_names_the_seat_the_round_and_the_count() -> None:
    from roundtabled.core.progress import turn_toast

    st_ = state(3, ["pm", "dev", "rv"], history=[turn("pm", 1, 0), turn("dev", 1, 1)])
    assert turn_toast(st_, st_.history[-1]) == "dev · round 1/3 done — 2 of 9 turns"


def test_observing_toast_says_how_far_and_why() -> None:
    from roundtabled.core.progress import observing_toast

    st_ = after_round_1(
        3,
        phase=Phase.OBSERVING,
        end_reason=EndReason.REPETITION,
    )
    assert observing_toast(st_).startswith(
        "Debate over after round 1/3 (repetition): the observer consolidates"
    )


def test_the_throttle_lets_one_toast_through_per_gap() -> None:
    from roundtabled.core.progress import ToastThrottle

    t = ToastThrottle(gap_s=2.0)
    shown = [now for now in (0.0, 0.5, 1.9, 2.0, 2.1, 4.5, 4.6) if t.allow(now)]
    assert shown == [0.0, 2.0, 4.5]


@given(st.lists(st.floats(0, 1000, allow_nan=False), max_size=40))
def test_throttled_toasts_are_never_closer_than_the_gap(times: list[float]) -> None:
    from roundtabled.core.progress import ToastThrottle

    t = ToastThrottle(gap_s=2.0)
    shown = [now for now in sorted(times) if t.allow(now)]
    assert all(b - a >= 2.0 for a, b in itertools.pairwise(shown))
    if times:
        assert shown and shown[0] == min(times)
