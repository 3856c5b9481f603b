"""What deliberation changed, as rules (core/changed.py; docs/result.md, "deliberation").

Properties over random panels: the opening tally uses only opening positions (changing a final
label never changes it); the seats that moved are exactly the free seats whose opening and final
stances differ; ``majorityChanged`` is ``None`` when either majority is unknown or only one round
ran; a seat bound to a side is in neither tally; a seat that stated nothing is in no group and a
majority it could still make is unknown; the confidence-weighted share exists only when every
counted seat stated a confidence.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from roundtabled.core.changed import SeatLedger, compare, majority_of
from roundtabled.core.result_model import Deliberation, TallyItem
from roundtabled.core.stances import group

LABELS = [
    "modular monolith",
    "Modular monolith first",
    "split now",
    "do not split",
    "microservices",
    "micro-services",
    "12",
    "12.0",
    "112",
]
NAMES = ["pm", "dev", "qa", "sec", "ops"]

label = st.one_of(st.none(), st.sampled_from(LABELS))
confidence = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.0))
side = st.one_of(st.none(), st.none(), st.sampled_from(["for", "against"]))


@st.composite
def panels(draw: st.DrawFn) -> list[SeatLedger]:
    n = draw(st.integers(min_value=1, max_value=len(NAMES)))
    return [
        SeatLedger(
            agent=NAMES[i],
            opening=draw(label),
            final=draw(label),
            opening_confidence=draw(confidence),
            final_confidence=draw(confidence),
            moved_round=draw(st.one_of(st.none(), st.integers(min_value=2, max_value=5))),
            side=draw(side),
        )
        for i in range(n)
    ]


rounds = st.integers(min_value=0, max_value=4)


def _seats(tally: list[TallyItem]) -> list[str]:
    return sorted(a for t in tally for a in t.seats)


def _run(seats: list[SeatLedger], n_rounds: int = 3) -> Deliberation:
    return compare(seats, rounds=n_rounds, opening="sequential")


@settings(max_examples=150, deadline=None)
@given(panels(), st.lists(label, min_size=5, max_size=5))
def test_the_opening_tally_uses_only_opening_positions(
    seats: list[SeatLedger], other_finals: list[str | None]
) -> None:
    d = _run(seats)
    # The finals changed, the openings kept: the opening tally groups the same seats together.
    moved = [replace(s, final=f) for s, f in zip(seats, other_finals, strict=False)]
    e = _run(moved)
    assert {frozenset(t.seats) for t in d.opening_tally} == {
        frozenset(t.seats) for t in e.opening_tally
    } or _bridged(seats, moved)
    assert _seats(d.opening_tally) == sorted(
        s.agent for s in seats if s.side is None and s.opening is not None
    )
    for t in d.opening_tally:
        assert set(t.labels) <= {s.opening for s in seats if s.agent in t.seats}


def _bridged(a: list[SeatLedger], b: list[SeatLedger]) -> bool:
    """True when the final labels join opening groups (grouping is over both rounds' labels)."""

    def parts(seats: list[SeatLedger]) -> set[frozenset[str]]:
        names = group(
            [*(s.opening for s in seats if s.opening), *(s.final for s in seats if s.final)]
        )
        out: dict[str, set[str]] = {}
        for s in seats:
            if s.opening is not None and s.side is None:
                out.setdefault(names[s.opening], set()).add(s.opening)
        return {frozenset(v) for v in out.values()}

    return parts(a) != parts(b)


@settings(max_examples=200, deadline=None)
@given(panels(), rounds)
def test_moved_seats_are_exactly_those_whose_stance_differs(
    seats: list[SeatLedger], n_rounds: int
) -> None:
    d = _run(seats, n_rounds)
    names = group([*(s.opening for s in seats if s.opening), *(s.final for s in seats if s.final)])
    expected = [
        s.agent
        for s in seats
        if s.side is None
        and s.opening is not None
        and s.final is not None
        and names[s.opening] != names[s.final]
    ]
    assert [m.agent for m in d.moved] == expected
    opening_of = {a: t.label for t in d.opening_tally for a in t.seats}
    final_of = {a: t.label for t in d.final_tally for a in t.seats}
    for m in d.moved:
        assert (m.from_, m.to) == (opening_of[m.agent], final_of[m.agent])
        assert m.from_ != m.to


@settings(max_examples=200, deadline=None)
@given(panels(), rounds)
def test_majority_changed_is_null_when_either_majority_is_unknown(
    seats: list[SeatLedger], n_rounds: int
) -> None:
    d = _run(seats, n_rounds)
    kinds = (d.opening_majority.kind, d.final_majority.kind)
    if "unknown" in kinds or n_rounds <= 1:
        assert d.majority_changed is None
    else:
        assert d.majority_changed == (d.opening_majority.stance != d.final_majority.stance)


@settings(max_examples=200, deadline=None)
@given(panels(), rounds)
def test_sided_seats_are_never_counted(seats: list[SeatLedger], n_rounds: int) -> None:
    d = _run(seats, n_rounds)
    sided = {s.agent for s in seats if s.side is not None}
    counted = [s.agent for s in seats if s.side is None]
    for t in [*d.opening_tally, *d.final_tally]:
        assert not sided & set(t.seats)
    assert not sided & {m.agent for m in d.moved}
    assert not sided & {*d.unstated_at_opening, *d.unstated_at_end}
    assert d.opening_majority.counted == d.final_majority.counted == len(counted)


@settings(max_examples=200, deadline=None)
@given(panels(), rounds)
def test_unstated_seats_are_unknown_never_agreeing(seats: list[SeatLedger], n_rounds: int) -> None:
    d = _run(seats, n_rounds)
    free = [s for s in seats if s.side is None]
    assert d.unstated_at_opening == [s.agent for s in free if s.opening is None]
    assert d.unstated_at_end == [s.agent for s in free if s.final is None]
    for m, tally, unstated in (
        (d.opening_majority, d.opening_tally, d.unstated_at_opening),
        (d.final_majority, d.final_tally, d.unstated_at_end),
    ):
        assert m.unstated == len(unstated)
        top = len(tally[0].seats) if tally else 0
        if m.kind == "majority":
            assert top * 2 > len(free) and m.stance == tally[0].label
        elif m.kind in ("none", "tied"):
            # No stance could reach a majority even if every silent seat joined it.
            assert (top + m.unstated) * 2 <= len(free) and m.stance is None
        else:
            assert m.stance is None and (not tally or (top + m.unstated) * 2 > len(free))


@settings(max_examples=200, deadline=None)
@given(panels())
# A tally weight is rounded: a share of the rounded weight read 1.001 for a lone seat.
@example([SeatLedger("pm", None, "modular monolith", final_confidence=0.6875)])
def test_the_weighted_share_needs_every_confidence(seats: list[SeatLedger]) -> None:
    d = _run(seats)
    free = [s for s in seats if s.side is None]
    for m, conf, stated in (
        (d.final_majority, [s.final_confidence for s in free], [s.final for s in free]),
        (d.opening_majority, [s.opening_confidence for s in free], [s.opening for s in free]),
    ):
        if m.weighted_share is not None:
            assert m.kind == "majority"
            assert all(c is not None for c in conf) and all(x is not None for x in stated)
            assert 0.0 <= m.weighted_share <= 1.0


def test_one_round_is_no_deliberation() -> None:
    seats = [SeatLedger("pm", "ship", "ship"), SeatLedger("dev", "wait", "wait")]
    d = compare(seats, rounds=1, opening="independent")
    assert d.majority_changed is None and d.moved == [] and d.opening == "independent"


def test_a_flip_changes_the_majority_and_names_the_mover() -> None:
    seats = [
        SeatLedger("pm", "split now", "modular monolith", 0.6, 0.8, moved_round=2, why="cost"),
        SeatLedger("dev", "split now", "split now", 0.7, 0.5),
        SeatLedger("qa", "modular monolith", "Modular monolith first", 0.9, 0.9),
    ]
    d = _run(seats)
    assert d.opening_majority.model_dump() == {
        "kind": "majority",
        "stance": "split now",
        "seats": 2,
        "counted": 3,
        "unstated": 0,
        "weighted_share": round(1.3 / 2.2, 3),
    }
    assert (d.final_majority.kind, d.final_majority.stance, d.final_majority.seats) == (
        "majority",
        "modular monolith",
        2,
    )
    assert d.majority_changed is True
    assert [m.dump() for m in d.moved] == [
        {"agent": "pm", "from": "split now", "to": "modular monolith", "round": 2, "why": "cost"}
    ]


def test_a_silent_opening_seat_makes_a_close_opening_unknown() -> None:
    seats = [
        SeatLedger("pm", "ship", "ship"),
        SeatLedger("dev", "wait", "ship"),
        SeatLedger("qa", None, "ship"),
    ]
    d = _run(seats)
    assert d.opening_majority.kind == "unknown" and d.unstated_at_opening == ["qa"]
    assert d.final_majority.kind == "majority" and d.majority_changed is None


def test_a_tie_is_no_majority() -> None:
    items = [
        TallyItem(label="a", seats=["pm"], weight=0.5),
        TallyItem(label="b", seats=["dev"], weight=0.5),
    ]
    m = majority_of(items, 2, {"pm": None, "dev": None})
    assert (m.kind, m.stance, m.weighted_share) == ("tied", None, None)
