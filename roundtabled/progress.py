"""What a person is told about a roundtable's progress: which round it is in, and the words of
the progress toasts. Pure functions of the state (no I/O), used by the status, the CLI and the
toasts, so that every place names the same round.

Rounds are 1-based here (what people read: "round 2/3"); the state's ``current_round`` is
0-indexed and names the *next* seat turn, which is why it cannot be shown as is: after the last
seat of round 1 it already says round 2, also when no round 2 will follow (a cancel, the
observer of a 1-round debate). See docs/design.md (state format).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from roundtabled.state import HistoryEntry, Phase, RoundtableState

Stage = Literal["turn", "observer", "ended"]
"""``turn``: a seat's turn runs or is next; ``observer``: the observer consolidates;
``ended``: no further turn (done, aborted, or stopping after a cancel)."""


@dataclass(frozen=True, slots=True)
class RoundPosition:
    """Where a roundtable is: ``round`` of ``total`` (1-based; 0 = no seat has spoken yet and
    none is due), at ``stage``."""

    round: int
    total: int
    stage: Stage

    def text(self) -> str:
        """``round 2/3``; ``observer after round 1/1``; ``ended in round 1/3``."""
        where = f"round {self.round}/{self.total}"
        if self.stage == "observer":
            return f"observer after {where}"
        if self.stage == "ended":
            return f"ended in {where}" if self.round else f"ended before round 1/{self.total}"
        return where


def last_spoken_round(history: list[HistoryEntry]) -> int:
    """The highest 1-based round in which a seat's turn was recorded (0 when none was)."""
    return max((e.round for e in history if e.kind == "turn"), default=0)


def round_position(state: RoundtableState) -> RoundPosition:
    """Which round ``state`` is in.

    - A seat's turn in flight: its round.
    - Active with no turn in flight: the round of the next seat turn, unless the debate is
      stopping (an end reason is set, e.g. a cancel): then the last round a seat spoke in.
    - Observing or finished: the last round a seat spoke in, never one that did not start.
    """
    total = state.total_rounds
    pend = state.pending
    if state.phase == Phase.ACTIVE:
        if pend is not None and pend.kind == "turn":
            return RoundPosition(pend.round + 1, total, "turn")
        if state.end_reason is None:
            return RoundPosition(min(state.current_round + 1, total), total, "turn")
        return RoundPosition(last_spoken_round(state.history), total, "ended")
    spoken = last_spoken_round(state.history)
    if state.phase == Phase.OBSERVING:
        return RoundPosition(spoken, total, "observer")
    return RoundPosition(spoken, total, "ended")
