"""Stance grouping rules (roundtabled/core/stances.py), property-tested."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core.stances import (
    group,
    no_stance_reason,
    numbers,
    same_stance,
    seat_stances,
    stance_key,
)

_WORDS = ["modular", "monolith", "split", "payments", "services", "keep", "billing", "now",
          "later", "first", "the", "a", "for now", "Postgres", "SQL", "12", "3.5", "A"]  # fmt: skip
_label = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5).map(" ".join) | st.text(
    alphabet="abcxyz 0123-.,'", min_size=1, max_size=20
)
_decorated = st.tuples(_label, st.sampled_from(["", "**", "_"]), st.sampled_from(["", ".", "!"]))
_labels = st.lists(_decorated.map(lambda t: f"{t[1]}{t[0]}{t[1]}{t[2]}"), max_size=8)


def _partition(names: dict[str, str]) -> set[frozenset[str]]:
    by: dict[str, set[str]] = {}
    for label, name in names.items():
        by.setdefault(name, set()).add(label)
    return {frozenset(v) for v in by.values()}


@settings(max_examples=300)
@given(labels=_labels, data=st.data())
def test_grouping_does_not_depend_on_the_order(labels: list[str], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(labels))
    assert group(shuffled) == group(labels)


@settings(max_examples=300)
@given(labels=_labels)
def test_grouping_is_idempotent(labels: list[str]) -> None:
    names = group(labels)
    again = group([names[lbl] for lbl in labels if lbl in names])
    # Each stance's name is its own stance, and no two stances merge when grouped again.
    assert all(again[n] == n for n in names.values())
    assert len(set(again.values())) == len(set(names.values()))


@settings(max_examples=300)
@given(labels=_labels)
def test_a_group_is_linked_and_never_mixes_polarity_or_numbers(labels: list[str]) -> None:
    names = group(labels)
    for part in _partition(names):
        nums = {numbers(lbl) for lbl in part}
        negs = {any(w in {"not", "no", "never"} for w in stance_key(lbl).split()) for lbl in part}
        assert len(nums) == 1 and len(negs) == 1


@given(label=_label)
def test_a_label_never_joins_its_negation(label: str) -> None:
    if not stance_key(label) or "not" in stance_key(label).split():
        return
    for neg in (f"do not {label}", f"don't {label}", f"never {label}", f"no {label}"):
        assert not same_stance(neg, label)
        assert len(set(group([neg, label]).values())) == 2


@given(a=st.integers(-10_000, 10_000), b=st.integers(-10_000, 10_000))
def test_numbers_compare_as_numbers(a: int, b: int) -> None:
    assert same_stance(str(a), f"{a}.0")
    assert same_stance(str(a), f"The answer is {a}")
    assert same_stance(str(a), str(b)) == (a == b)


def test_examples_of_the_rules() -> None:
    assert same_stance("modular monolith", "Modular monolith first")
    assert same_stance("modular monolith", "a modular monolith, for now")
    assert not same_stance("do not split payments", "split payments")
    assert not same_stance("12", "112") and same_stance("12.0", "12")
    assert not same_stance("split now", "split later")
    assert not same_stance("split payments first", "split payments later")  # a qualifier added
    assert not same_stance("option A", "option B")
    assert same_stance("micro-services", "microservices")


@given(a=_label, b=_label)
def test_same_stance_is_symmetric(a: str, b: str) -> None:
    assert same_stance(a, b) == same_stance(b, a)


@given(seat=st.text(alphabet="abcdefgh-_", min_size=1, max_size=12))
def test_a_seat_name_is_no_stance(seat: str) -> None:
    if not stance_key(seat):
        return
    for label in (seat, seat.upper(), f"**{seat}**", f"{seat}'s position"):
        assert no_stance_reason(label, seats=["other", seat]) is not None


def test_slot_words_placeholders_and_the_topic_are_no_stance() -> None:
    topic = "Should we split the payments monolith?"
    for label in (
        "Position",
        "my position",
        "<short label>",
        "Should we split the payments monolith",
    ):
        assert no_stance_reason(label, seats=["pm"], topic=topic) is not None
    assert no_stance_reason("split payments", seats=["pm"], topic=topic) is None


def test_seat_stances_say_why_and_group_with_another_round() -> None:
    got = seat_stances(
        {"pm": "Modular monolith first", "dev": "PM", "rv": None},
        seats=["pm", "dev", "rv"],
        also=["modular monolith"],
    )
    assert got["pm"].stance == "modular monolith"  # named by the shorter label of the pool
    assert got["dev"].stance is None and got["dev"].no_stance == "the seat's name"
    assert got["rv"].stance is None and got["rv"].no_stance is None
