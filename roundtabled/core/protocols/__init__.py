"""Protocols: how the seats of a roundtable reach an answer (docs/deliberation.md, "Protocols").

One module per protocol, each a :class:`Protocol` named :data:`PROTOCOL`: :mod:`.debate` (rounds
of turns in S2, the default), :mod:`.vote` (every seat answers once, independently, and the
answers are counted) and :mod:`.adaptive` (the independent opening, debated only when no stance
holds the threshold's confidence-weighted share). A protocol says

- which fields of a call it uses: every other one it :attr:`~Protocol.refuses`, with the reason
  (:func:`refused`, called by :func:`roundtabled.core.validation.parse_request`);
- the options a roundtable of it runs with (:attr:`~Protocol.options`: ``vote`` and ``adaptive``
  run round 1 as the independent opening);
- what follows the independent opening (:attr:`~Protocol.after_opening`, asked by
  :func:`roundtabled.core.opening.decide` once every opening is recorded): the observer, or a
  debate from round 2 on.

The turns themselves are routed by the machine and the opening round, one command vocabulary
(:mod:`roundtabled.core.commands`, :mod:`roundtabled.core.opening`); a protocol only decides.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import get_args

from roundtabled.core.deliberation import Stop
from roundtabled.core.positions import position_of
from roundtabled.core.protocols.tally import Ballot
from roundtabled.core.stances import no_stance_reason
from roundtabled.core.state import (
    HistoryEntry,
    Options,
    ProtocolName,
    RoundtableState,
    SeatEntryKind,
)


@dataclass(frozen=True, slots=True)
class Opened:
    """What follows a recorded independent opening: ``observer`` (no more seat turns), ``stop``
    (an early stop's reason and note, ``None`` for the natural end) and the state with the
    protocol's own record of its decision."""

    state: RoundtableState
    observer: bool
    stop: Stop | None = None


AfterOpening = Callable[
    [RoundtableState, Sequence[HistoryEntry], int, Sequence[object]], Opened | None
]
"""``(state with round 1 in its history and at round 2, round 1's entries, now (epoch ms), the
message views of S2) -> Opened``, or ``None``: the debate's own rules decide
(:func:`roundtabled.core.deliberation.stop_after_seat_turn`)."""


@dataclass(frozen=True, slots=True)
class SecondRound:
    """A protocol's second independent round, run after the opening in the seats' own sessions
    on the opening's rules (:mod:`roundtabled.core.opening`: each seat prompted once, no seat
    sees another's reply, the replies recorded in S2 once all are settled): ``name`` (its
    headers: ``pm · ranking``), ``kind`` (its entries' kind), one prompt per seat (``""``: the
    seat sits it out) and the text of the record that precedes the seats' records."""

    name: str
    kind: SeatEntryKind
    prompts: tuple[str, ...]
    topic_text: str


def _no_second_round(state: RoundtableState) -> SecondRound | None:
    return None


def _no_lines(state: RoundtableState) -> list[str]:
    return []


@dataclass(frozen=True, slots=True)
class Protocol:
    """One protocol's rules.

    ``name``; ``summary`` (one line for the help texts); ``refuses``: call field → why this
    protocol does not use it; ``options``: the roundtable's options and rounds as the call and
    the defaults gave them → the ones it runs with; ``after_opening``: see :data:`AfterOpening`;
    ``extendable``: whether a finished roundtable of it may be extended; ``default_rounds``:
    the rounds when the call gives none (``None``: the call's default, 1); ``second_round``:
    the independent round that follows the opening before :attr:`after_opening` is asked
    (``None``: none; a pure function of the state, so a restart finds the same); and
    ``observer_lines``: what the observer's prompt says of the protocol's own count.
    """

    name: ProtocolName
    summary: str
    refuses: Mapping[str, str]
    options: Callable[[Options, int], tuple[Options, int]]
    after_opening: AfterOpening
    extendable: bool = False
    default_rounds: int | None = None
    second_round: Callable[[RoundtableState], SecondRound | None] = _no_second_round
    observer_lines: Callable[[RoundtableState], list[str]] = _no_lines


def registry() -> dict[ProtocolName, Protocol]:
    """Every protocol by name, in the order of :data:`roundtabled.core.state.ProtocolName`."""
    from roundtabled.core.protocols import adaptive, council, debate, vote

    every = (debate.PROTOCOL, vote.PROTOCOL, adaptive.PROTOCOL, council.PROTOCOL)
    found = {p.name: p for p in every}
    return {n: found[n] for n in get_args(ProtocolName)}


NAMES: tuple[ProtocolName, ...] = get_args(ProtocolName)
"""The protocol names, the default first: the one list the parser, the configuration and the
tool's option lists are checked against (``tests/unit/test_protocols.py``)."""


def of(name: ProtocolName) -> Protocol:
    """The protocol called ``name``."""
    return registry()[name]


def running(state: RoundtableState) -> Protocol:
    """The protocol ``state`` runs (a state written before protocols ran a debate)."""
    return of(state.options.protocol)


def refused(name: ProtocolName, given: Mapping[str, object]) -> tuple[str, str] | None:
    """The first field of ``given`` (call field → value, ``None`` values left out) that protocol
    ``name`` does not use, and the one line saying so, or ``None``."""
    rules = of(name).refuses
    for key in rules:
        if given.get(key) is not None:
            return key, f"{key} is not used by protocol '{name}' ({rules[key]}); omit it"
    return None


def ballots(state: RoundtableState, entries: Sequence[HistoryEntry]) -> list[Ballot]:
    """One :class:`Ballot` per seat from its turn among ``entries`` (round 1 of the independent
    opening): its stated label and confidence, else why it cast none (failed, no ``Position:``
    line, a label that names no stance: :func:`roundtabled.core.stances.no_stance_reason`)."""
    by_seat = {e.agent: e for e in entries if e.kind == "turn"}
    out: list[Ballot] = []
    for agent in state.agents:
        e = by_seat.get(agent)
        if e is None:
            out.append(Ballot(agent, None, why="no turn"))
            continue
        if e.has_error:
            out.append(Ballot(agent, None, why=f"failed: {e.error or 'no reply'}"))
            continue
        pos = position_of(e)
        if pos is None:
            out.append(Ballot(agent, None, why="stated no position"))
            continue
        reason = no_stance_reason(pos.label, seats=state.agents, topic=state.prompt)
        if reason is not None:
            out.append(Ballot(agent, None, why=f"its label names no stance ({reason})"))
            continue
        out.append(Ballot(agent, pos.label, pos.confidence))
    return out
