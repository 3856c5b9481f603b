"""Property tests of the protocols' pure rules (docs/deliberation.md, "Protocols"):

- the confidence-weighted tally (:func:`roundtabled.core.protocols.tally.count`): shares sum to 1
  when known and are unknown as soon as one seat stated no confidence or cast no ballot; the
  ballots' order changes nothing; raising a seat's confidence never lowers its stance's share; a
  seat that cast no ballot is named, never counted;
- adaptive's stop rule (:func:`roundtabled.core.protocols.adaptive.decide`): it stops iff the
  leader's share is known and at least the threshold; an unknown share never stops;
- what follows a recorded opening (:func:`roundtabled.core.opening.decide` with each protocol):
  the same decision when it is taken twice (a duplicated wake) or again from the persisted state
  (a crash before the next write), exactly one next prompt (the observer's for a vote and for an
  adaptive stop; round 2's first seat for an adaptive debate).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core import opening
from roundtabled.core.commands import Prompt
from roundtabled.core.opening import OpeningObservation
from roundtabled.core.positions import Position
from roundtabled.core.protocols import adaptive, ballots
from roundtabled.core.protocols.tally import Ballot, count
from roundtabled.core.state import (
    OBSERVER_AGENT,
    HistoryEntry,
    OpeningRound,
    OpeningSeat,
    Options,
    Phase,
    RoundtableState,
)

LABELS = ["keep the monolith", "split now", "modular monolith", "42"]

ballots_st = st.lists(
    st.tuples(
        st.one_of(st.none(), st.sampled_from(LABELS)),
        st.one_of(st.none(), st.integers(0, 10).map(lambda n: n / 10)),
    ),
    min_size=1,
    max_size=7,
)


def make(raw: list[tuple[str | None, float | None]]) -> list[Ballot]:
    return [
        Ballot(f"s{i}", label, conf, None if label else "failed: boom")
        for i, (label, conf) in enumerate(raw)
    ]


@settings(max_examples=300, deadline=None)
@given(raw=ballots_st, perm=st.randoms(use_true_random=False))
def test_the_confidence_weighted_tally(
    raw: list[tuple[str | None, float | None]], perm: Any
) -> None:
    bs = make(raw)
    t = count(bs)
    cast = [b for b in bs if b.label is not None]
    # Every seat is either counted in one stance or named as degraded, never both, never neither.
    counted = [a for s in t.stances for a in s.seats]
    assert sorted(counted + [a for a, _ in t.degraded]) == sorted(b.agent for b in bs)
    assert len(set(counted)) == len(counted)
    every_stated = len(cast) == len(bs) and all(b.confidence is not None for b in cast)
    assert t.weighted == every_stated
    if not t.weighted:
        assert all(s.share is None and s.weight is None for s in t.stances)
        assert t.leader_share is None
    else:
        total = sum(b.confidence or 0.0 for b in cast)
        if total > 0:
            assert abs(sum(s.share or 0.0 for s in t.stances) - 1.0) < 1e-5
    # The order of the ballots changes nothing but the order of seats inside a stance.
    shuffled = list(bs)
    perm.shuffle(shuffled)
    u = count(shuffled)
    assert {s.stance: (sorted(s.seats), s.share) for s in t.stances} == {
        s.stance: (sorted(s.seats), s.share) for s in u.stances
    }
    assert (t.leader is None) == (u.leader is None)


@settings(max_examples=200, deadline=None)
@given(raw=ballots_st, seat=st.integers(0, 6), more=st.integers(1, 10))
def test_more_confidence_never_lowers_a_stance_s_share(
    raw: list[tuple[str | None, float | None]], seat: int, more: int
) -> None:
    raw = [(label or LABELS[0], conf if conf is not None else 0.5) for label, conf in raw]
    i = seat % len(raw)
    label, conf = raw[i]
    before = count(make(raw))
    raised = list(raw)
    raised[i] = (label, min(1.0, (conf or 0.0) + more / 10))
    after = count(make(raised))
    agent = f"s{i}"
    share_before = next(s.share for s in before.stances if agent in s.seats)
    share_after = next(s.share for s in after.stances if agent in s.seats)
    if share_before is not None and share_after is not None:
        assert share_after >= share_before - 1e-9


@settings(max_examples=300, deadline=None)
@given(raw=ballots_st, threshold=st.integers(51, 100).map(lambda n: n / 100))
def test_adaptive_stops_iff_a_known_share_reaches_the_threshold(
    raw: list[tuple[str | None, float | None]], threshold: float
) -> None:
    t = count(make(raw))
    out = adaptive.decide(t, threshold)
    share = t.leader_share
    assert out.stopped == (share is not None and share >= threshold)
    assert out.threshold == threshold
    if share is None:
        assert not out.stopped and out.share is None
    assert ("stopped at the opening" in out.why) == out.stopped


def test_adaptive_refuses_a_threshold_of_half_or_less() -> None:
    t = count(make([("split now", 1.0), ("split now", 1.0)]))
    for bad in (0.5, 0.2, 1.01):
        try:
            adaptive.decide(t, bad)
        except ValueError:
            continue
        raise AssertionError(f"threshold {bad} accepted")


# ── what follows a recorded opening, per protocol ───────────────────────────────────────────────


def entry(agent: str, seat: int, label: str | None, conf: float | None) -> HistoryEntry:
    if label is None:
        return HistoryEntry(
            agent=agent, round=1, response="", seat=seat, has_error=True, error="APIError: boom"
        )
    pos = Position(label=label, position="because", confidence=conf)
    text = f"I hold {label}.\nPosition: {label} — because"
    return HistoryEntry(agent=agent, round=1, response=text, seat=seat, position=pos)


def recorded_state(
    protocol: str, raw: list[tuple[str | None, float | None]], rounds: int, threshold: float
) -> RoundtableState:
    agents = [f"a{i}" for i in range(len(raw))]
    seats = [
        OpeningSeat(
            seat=i,
            agent=a,
            messageID=f"msg_p{i}",
            recordID=f"msg_r{i}",
            sessionID=f"ses_seat{i:012d}",
            entry=entry(a, i, *raw[i]),
            recorded=True,
        )
        for i, a in enumerate(agents)
    ]
    rnd = OpeningRound(seats=seats, topicRecordID="msg_topic", topic_recorded=True)
    opts, total = (
        {
            "vote": lambda: Options(protocol="vote", opening="independent"),
            "adaptive": lambda: Options(
                protocol="adaptive",
                opening="independent",
                until="converged",
                adaptive_threshold=threshold,
            ),
        }[protocol](),
        (1 if protocol == "vote" else rounds),
    )
    return RoundtableState.model_validate(
        {
            "session_id": "ses_roundtable00001",
            "title": "t",
            "agents": agents,
            "total_rounds": total,
            "prompt": "Which architecture?",
            "options": opts,
            "openings": rnd,
        }
    )


@settings(max_examples=150, deadline=None)
@given(
    protocol=st.sampled_from(["vote", "adaptive"]),
    raw=ballots_st.filter(lambda r: len(r) >= 2),
    rounds=st.integers(1, 4),
    threshold=st.integers(51, 100).map(lambda n: n / 100),
)
def test_what_follows_the_opening_is_decided_once_and_the_same_again(
    protocol: str,
    raw: list[tuple[str | None, float | None]],
    rounds: int,
    threshold: float,
) -> None:
    state = recorded_state(protocol, raw, rounds, threshold)
    obs = OpeningObservation(now=2_000_000, status="idle")
    first = opening.decide(state, obs, ids=[], new_id="msg_next00000000000001")
    again = opening.decide(state, obs, ids=[], new_id="msg_next00000000000001")  # a duplicate
    assert first.after is not None and again.after is not None
    assert first.after.state == again.after.state
    prompts = [c for c in first.after.commands if isinstance(c, Prompt)]
    assert len(prompts) <= 1
    after = first.after.state
    entries = state.openings.entries() if state.openings else []
    if all(e.has_error for e in entries):
        return  # every seat failed: the observer runs on nothing (all-failed), as for a debate
    if protocol == "vote":
        assert after.phase == Phase.OBSERVING
        assert prompts and prompts[0].agent == OBSERVER_AGENT
        assert after.adaptive is None
        return
    expected = adaptive.decide(count(ballots(state, entries)), threshold)
    assert after.adaptive == expected
    debates = rounds > 1 and not expected.stopped
    assert (after.phase == Phase.ACTIVE) == debates
    assert prompts
    assert prompts[0].agent == ("a0" if debates else OBSERVER_AGENT)
    if expected.stopped and rounds > 1:
        assert after.end_reason is not None and after.end_reason.value == "converged"
        assert after.stop_detail is not None and after.stop_detail.startswith("adaptive:")
