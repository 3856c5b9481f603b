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
from typing import Final

from roundtabled.core.state import HistoryEntry

__all__ = [
    "MAX_SIDE_CHARS",
    "SIDE_WORDS",
    "free_agents",
    "free_history",
    "side_instruction",
    "side_tag",
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


def free_agents(agents: Sequence[str], sides: Mapping[str, str]) -> list[str]:
    """The seats of ``agents`` without an assigned side, in speaking order."""
    return [a for a in agents if a not in sides]


def free_history(history: Iterable[HistoryEntry], sides: Mapping[str, str]) -> list[HistoryEntry]:
    """``history`` without the turns of side-bound seats: what convergence reads (other kinds
    of entry are kept)."""
    return [e for e in history if not (e.kind == "turn" and e.agent in sides)]
