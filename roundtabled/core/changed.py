"""What deliberation changed: the opening tally beside the final one (docs/result.md,
"deliberation").

Debate alone does not move a panel toward the right answer on average; the vote carries the gain.
So the result says plainly whether the debate changed the opening majority: each free seat's
opening stance (its stated position of round 1 — the independent opening round when one ran)
beside its final stance, both tallies, their majorities, and the seats that moved.

Rules (property-tested in ``tests/unit/test_changed_properties.py``):

- Opening and final labels are grouped into stances together
  (:func:`roundtabled.core.stances.group` over both rounds' labels, as convergence compares two
  rounds), so a seat moved exactly when its two labels fall in different groups; each group is
  named as the final tally names it (``verdict.tally``), an opening-only group by its own labels.
- Only free seats count: a seat bound to a side (docs/result.md, "Sides") is in neither tally.
- A seat that stated no stance (no ``Position:`` line, a label naming no stance, a turn that did
  not speak) is unknown at that point: in no group, never counted as agreeing, never moved.
- A majority is a stance held by more than half of the free seats (:class:`Majority`); it is
  ``unknown`` while the seats that stated nothing could still make one.
- ``majorityChanged`` compares the two outcomes: the majorities' stances, no majority (none or
  a tie) being one outcome — a tie broken or a majority formed or lost is a change, which the
  verdict's line names as such (a tie is no majority that changed); ``None`` (unknown) with one
  round or when either majority is unknown.

Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from roundtabled.core.result_model import (
    UNKNOWN_CONFIDENCE_WEIGHT,
    Deliberation,
    Majority,
    SeatMove,
    TallyItem,
)
from roundtabled.core.stances import group

__all__ = ["SeatLedger", "compare", "majority_of"]


@dataclass(frozen=True, slots=True)
class SeatLedger:
    """One seat's opening and final stated positions.

    ``opening`` / ``final``: the label as written when it names a stance, else ``None`` (stated
    none); ``*_confidence`` in ``[0, 1]`` or ``None`` (stated none); ``moved_round`` /
    ``why``: the round and reason of the change by which the seat left its opening stance (the
    last such when it came back to it in between; not its last change, which may be a later
    move between two other stances), ``None``: not recorded; ``side``: the assigned side
    (``None``: a free seat)."""

    agent: str
    opening: str | None
    final: str | None
    opening_confidence: float | None = None
    final_confidence: float | None = None
    moved_round: int | None = None
    why: str | None = None
    side: str | None = None


def _names(seats: Sequence[SeatLedger]) -> dict[str, str]:
    """Every opening and final label → its stance's name, grouped over both rounds' labels of
    every seat (side-bound seats' too, as the final tally groups them)."""
    finals = [s.final for s in seats if s.final is not None]
    final_name = group(finals)
    joint = group([*(s.opening for s in seats if s.opening is not None), *finals])
    held: dict[str, Counter[str]] = {}
    for label in finals:
        if label in joint and label in final_name:
            held.setdefault(joint[label], Counter())[final_name[label]] += 1
    name: dict[str, str] = {}
    for label, key in joint.items():
        named = held.get(key)
        # The final tally's name of the group (the most held one when labels of the opening
        # join two final stances), else the joint grouping's own.
        name[label] = min(named, key=lambda n: (-named[n], len(n), n)) if named is not None else key
    return name


def _tally(
    seats: Sequence[SeatLedger],
    stance: dict[str, str | None],
    written: dict[str, str | None],
    conf: dict[str, float | None],
) -> list[TallyItem]:
    """Seats grouped by ``stance`` (seat → stance name, ``None``: unstated), heaviest first,
    weighted and ordered as ``verdict.tally`` is (:func:`roundtabled.core.verdict.tally`);
    ``written``: each seat's label as written."""
    groups: dict[str, TallyItem] = {}
    for s in seats:
        key, label = stance[s.agent], written[s.agent]
        if key is None or label is None:
            continue
        c = conf[s.agent]
        w = c if c is not None else UNKNOWN_CONFIDENCE_WEIGHT
        item = groups.get(key)
        if item is None:
            groups[key] = TallyItem(label=key, seats=[s.agent], weight=round(w, 3), labels=[label])
        else:
            item.seats.append(s.agent)
            item.weight = round(item.weight + w, 3)
            if label not in item.labels:
                item.labels.append(label)
    return sorted(groups.values(), key=lambda t: (-len(t.seats), -t.weight, t.label.casefold()))


def majority_of(
    items: Sequence[TallyItem], counted: int, confidences: Mapping[str, float | None]
) -> Majority:
    """The :class:`Majority` of tally ``items`` over ``counted`` free seats; ``confidences``:
    each counted seat → its stated confidence (``None``: stated none, or no stance)."""
    stated = sum(len(t.seats) for t in items)
    unstated = counted - stated
    top = len(items[0].seats) if items else 0
    base = Majority(seats=top, counted=counted, unstated=unstated)
    if counted == 0 or stated == 0:
        return base
    if top * 2 > counted:
        known = {a: c for a, c in confidences.items() if c is not None}
        total = sum(known.values())
        share = None
        if unstated == 0 and len(known) == counted and total > 0:
            # Every counted seat stated a stance and a confidence: a measured share, of the
            # stated numbers themselves (the tally's weights are rounded).
            share = round(sum(known[a] for a in items[0].seats) / total, 3)
        return base.model_copy(
            update={"kind": "majority", "stance": items[0].label, "weighted_share": share}
        )
    if (top + unstated) * 2 > counted:
        return base  # the seats that stated nothing could still make a majority
    tied = unstated == 0 and len(items) > 1 and len(items[1].seats) == top
    return base.model_copy(update={"kind": "tied" if tied else "none"})


def compare(seats: Sequence[SeatLedger], *, rounds: int, opening: str) -> Deliberation:
    """What deliberation changed among ``seats`` (the module docstring's rules).

    Args:
        seats: every seat, in speaking order.
        rounds: the rounds in which some seat turn ran (``<= 1``: no deliberation).
        opening: ``sequential`` | ``independent`` (how round 1 ran).
    """
    name = _names(seats)
    free = [s for s in seats if s.side is None]
    at_open = {s.agent: name.get(s.opening) if s.opening is not None else None for s in free}
    at_end = {s.agent: name.get(s.final) if s.final is not None else None for s in free}
    open_conf = {
        s.agent: s.opening_confidence if at_open[s.agent] is not None else None for s in free
    }
    end_conf = {s.agent: s.final_confidence if at_end[s.agent] is not None else None for s in free}
    opening_tally = _tally(free, at_open, {s.agent: s.opening for s in free}, open_conf)
    final_tally = _tally(free, at_end, {s.agent: s.final for s in free}, end_conf)
    before = majority_of(opening_tally, len(free), open_conf)
    after = majority_of(final_tally, len(free), end_conf)
    changed: bool | None = None
    if rounds > 1 and "unknown" not in (before.kind, after.kind):
        changed = before.stance != after.stance
    moved = [
        SeatMove(
            agent=s.agent,
            from_=str(at_open[s.agent]),
            to=str(at_end[s.agent]),
            round=s.moved_round,
            why=s.why,
        )
        for s in free
        if at_open[s.agent] is not None
        and at_end[s.agent] is not None
        and at_open[s.agent] != at_end[s.agent]
    ]
    return Deliberation(
        rounds=rounds,
        opening=opening,
        opening_tally=opening_tally,
        final_tally=final_tally,
        opening_majority=before,
        final_majority=after,
        majority_changed=changed,
        moved=moved,
        unstated_at_opening=[a for a, n in at_open.items() if n is None],
        unstated_at_end=[a for a, n in at_end.items() if n is None],
    )
