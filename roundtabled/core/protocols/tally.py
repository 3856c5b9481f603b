"""The confidence-weighted tally of independent answers (``vote``'s result, ``adaptive``'s stop).

Pure. Each seat casts a :class:`Ballot`: the label of its closing ``Position:`` line and the
confidence stated on it (0–1), or why it cast none (it failed, stated no position, or its label
names no stance). The ballots are grouped by stance (:func:`roundtabled.core.stances.group`, the
grouping of every other tally) and counted (docs/deliberation.md, "Protocols"):

- a stance's **weight** is the sum of its seats' stated confidences, its **share** that weight
  over the weight of every seat. Both are known only when *every* seat stated a stance and a
  confidence: an unstated confidence is unknown, never a number (the weighting of CISC,
  "Confidence Improves Self-Consistency", 2025, with the seat's own stated confidence as the
  weight); a seat without a stance leaves the whole weighting unknown rather than being dropped
  from it;
- the **leader** is the stance with the most weight when the weighting is known, else the one
  held by the most seats (ties: no leader);
- a seat that cast no ballot is **degraded** and named with its reason, never counted.

Properties (``tests/unit/test_protocol_properties.py``): the shares sum to 1 when known; the
order of the ballots changes nothing; a seat's confidence raised never lowers its stance's share;
a degraded seat makes every share unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from roundtabled.core.stances import group


@dataclass(frozen=True, slots=True)
class Ballot:
    """One seat's answer: ``label`` (``None``: no ballot, ``why`` says why), ``confidence`` 0–1
    or ``None`` (unstated)."""

    agent: str
    label: str | None
    confidence: float | None = None
    why: str | None = None


@dataclass(frozen=True, slots=True)
class StanceCount:
    """One stance: its seats (ballot order), the labels written, ``weight`` (sum of stated
    confidences) and ``share`` (of every seat's weight); both ``None`` when unknown."""

    stance: str
    seats: tuple[str, ...]
    labels: tuple[str, ...]
    weight: float | None
    share: float | None


@dataclass(frozen=True, slots=True)
class Tally:
    """The count: ``stances`` (leader first: most weight when ``weighted``, else most seats),
    ``weighted`` (every seat stated a stance and a confidence), ``leader`` (``None``: no ballot,
    or a tie), ``degraded`` (seat, why) of the seats that cast no ballot, and ``seats`` (how many
    were asked)."""

    stances: tuple[StanceCount, ...]
    weighted: bool
    leader: str | None
    seats: int
    degraded: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def leader_share(self) -> float | None:
        """The leader's confidence-weighted share, or ``None`` (unknown, or no leader)."""
        for s in self.stances:
            if s.stance == self.leader:
                return s.share
        return None


def count(ballots: Sequence[Ballot]) -> Tally:
    """The tally of ``ballots`` (one per seat asked; see the module docstring).

    Raises:
        ValueError: a confidence outside 0–1, or two ballots of one seat.
    """
    agents = [b.agent for b in ballots]
    if len(set(agents)) != len(agents):
        raise ValueError("count: one ballot per seat")
    cast = [b for b in ballots if b.label is not None]
    for b in cast:
        if b.confidence is not None and not 0.0 <= b.confidence <= 1.0:
            raise ValueError(f"count: confidence {b.confidence} of {b.agent} is not in 0–1")
    degraded = tuple((b.agent, b.why or "cast no ballot") for b in ballots if b.label is None)
    names = group(str(b.label) for b in cast)
    by: dict[str, list[Ballot]] = {}
    for b in cast:
        name = names.get(str(b.label))
        if name is None:  # a label of no words: no stance either
            degraded = (*degraded, (b.agent, "its label names no stance"))
            continue
        by.setdefault(name, []).append(b)
    counted = [b for bs in by.values() for b in bs]
    weighted = not degraded and bool(counted) and all(b.confidence is not None for b in counted)
    total = sum(b.confidence or 0.0 for b in counted) if weighted else 0.0
    out: list[StanceCount] = []
    for name, bs in by.items():
        weight = round(sum(b.confidence or 0.0 for b in bs), 6) if weighted else None
        share = None
        if weighted:
            # Every seat stated 0 confidence: no seat claims anything; the seats' count decides.
            share = round(weight / total, 6) if total > 0 and weight is not None else None
        labels = tuple(dict.fromkeys(str(b.label) for b in bs))
        out.append(StanceCount(name, tuple(b.agent for b in bs), labels, weight, share))
    order = {a: i for i, a in enumerate(agents)}

    def key(s: StanceCount) -> tuple[float, int, int]:
        return (-(s.weight or 0.0), -len(s.seats), min(order[a] for a in s.seats))

    def key_seats(s: StanceCount) -> tuple[int, float, int]:
        return (-len(s.seats), -(s.weight or 0.0), min(order[a] for a in s.seats))

    use_weight = weighted and total > 0
    out.sort(key=key if use_weight else key_seats)
    leader: str | None = None
    if out:
        top = out[0]
        tie = len(out) > 1 and (
            (use_weight and out[1].weight == top.weight)
            or (not use_weight and len(out[1].seats) == len(top.seats))
        )
        leader = None if tie else top.stance
    return Tally(tuple(out), weighted, leader, len(ballots), degraded)
