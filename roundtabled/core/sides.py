"""Sides: a seat bound to an assigned side (docs/result.md, "Sides").

A *side* is given by the caller, per seat: ``for``, ``against``, ``neutral`` (:data:`SIDE_WORDS`)
or a free one-line brief (e.g. ``"devil's advocate: argue against the majority"``). It is not the
seat's *stance* (what the seat holds, read from its ``Position:`` lines): a side-bound seat argues
what it was told to, so its position says nothing about what the panel agrees on.

Rules
- The side reaches the seat in every turn prompt (:func:`side_instruction`) and is shown on the
  card, the turn header (:func:`side_tag`) and the verdict.
- A side-bound seat's position is shown and marked, never counted: the tally and the consensus
  of the verdict and the convergence of ``until: "converged"`` read only the *free* seats
  (:func:`free_agents`, :func:`free_history`).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from roundtabled.core.state import HistoryEntry, RoundtableState

__all__ = [
    "MAX_SIDE_CHARS",
    "SIDE_WORDS",
    "free_agents",
    "free_history",
    "side_instruction",
    "side_tag",
    "turn_header",
    "turn_title",
    "turn_view",
]

SIDE_WORDS: Final = ("for", "against", "neutral")
"""The named sides; anything else is a free brief."""
MAX_SIDE_CHARS: Final = 200
"""Characters of a side (a brief is one line, not a second topic)."""

_INSTRUCTIONS: Final = {
    "for": (
        "Your assigned side: FOR the proposal in the topic. Argue for it in every round, "
        "whatever the others say; your Position line states that side."
    ),
    "against": (
        "Your assigned side: AGAINST the proposal in the topic. Argue against it in every "
        "round, whatever the others say; your Position line states that side."
    ),
    "neutral": (
        "Your assigned side: NEUTRAL. Weigh the arguments of both sides without taking one; "
        "your Position line states your neutral assessment."
    ),
}


def side_instruction(side: str) -> str:
    """The line of a turn prompt that binds a seat to ``side`` (a word of :data:`SIDE_WORDS` or
    a brief, already validated: one line, at most :data:`MAX_SIDE_CHARS` characters)."""
    named = _INSTRUCTIONS.get(side)
    if named is not None:
        return named
    return f"Your assigned side (a brief from the user, hold it in every round): {side}"


def side_tag(side: str | None) -> str:
    """The suffix of a header that shows a seat's side: ``" · side: against"``; ``""`` for a
    free seat (``None``)."""
    return "" if side is None else f" · side: {side}"


def turn_title(
    agent: str, round_number: int, side: str | None = None, *, independent: bool = False
) -> str:
    """The one title of a seat's turn, wherever a person reads it (the TUI's message label, the
    CLI and ``watch``, the export, the independent opening's seat sessions):
    ``rv · round 1 · side: against``; ``round 1 (independent opening)`` for a seat's answer in
    an independent opening; no side part for a free seat (``side`` ``None``).

    Args:
        agent: the seat's agent name (possibly already coloured for a terminal).
        round_number: the 1-based round.
        side: the seat's assigned side (:data:`SIDE_WORDS` or a brief), ``None`` if free.
        independent: the turn is the seat's answer in an independent opening round.
    """
    opening = " (independent opening)" if independent else ""
    return f"{agent} · round {round_number}{opening}{side_tag(side)}"


def turn_header(
    agent: str, round_number: int, side: str | None = None, *, independent: bool = False
) -> str:
    """:func:`turn_title` between rules: ``── rv · round 1 · side: against ──``."""
    return f"── {turn_title(agent, round_number, side, independent=independent)} ──"


def turn_view(entry: HistoryEntry, state: RoundtableState) -> dict[str, Any]:
    """A history entry as the control API shows it (the export's ``turns``, the live feed's
    ``turn`` events): its fields, and ``side`` when it is the turn of a side-bound seat, so that
    every client renders the same :func:`turn_header`."""
    d = entry.dump()
    side = state.options.sides.get(entry.agent) if entry.kind == "turn" else None
    if side is not None:
        d["side"] = side
    return d


def free_agents(agents: Sequence[str], sides: Mapping[str, str]) -> list[str]:
    """The seats of ``agents`` without an assigned side, in speaking order."""
    return [a for a in agents if a not in sides]


def free_history(history: Iterable[HistoryEntry], sides: Mapping[str, str]) -> list[HistoryEntry]:
    """``history`` without the turns of side-bound seats: what convergence reads (other kinds
    of entry are kept)."""
    return [e for e in history if not (e.kind == "turn" and e.agent in sides)]
