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
from typing import Any, Literal

from roundtabled.core.commands import PromptSeat, Toast
from roundtabled.core.state import EndReason, HistoryEntry, Phase, RoundtableState

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


# ---------------------------------------------------------------------------------------------
# Progress toasts: which words (the machine decides when; the shell throttles and may be told
# not to show them, setting ``progress_toasts``)
# ---------------------------------------------------------------------------------------------

PROGRESS_TOAST_GAP_S = 2.0
"""At most one progress toast per this many seconds per roundtable (a fast debate would
otherwise flood the TUI)."""


def planned_turns(state: RoundtableState) -> int:
    """Seat turns of the whole debate as planned: seats × rounds (all extensions included)."""
    return len(state.agents) * state.total_rounds


def turn_toast(state: RoundtableState, entry: HistoryEntry) -> str:
    """``pm · round 1/3 done — 2 of 9 turns``: ``entry`` (a seat turn just recorded) and the
    count of seat turns recorded in ``state`` (which already holds ``entry``)."""
    done = sum(1 for e in state.history if e.kind == "turn")
    return (
        f"{entry.agent} · round {entry.round}/{state.total_rounds} done — "
        f"{done} of {planned_turns(state)} turns"
    )


def observing_toast(state: RoundtableState, end: EndReason | None = None) -> str:
    """The toast of the phase change to observing: how far the debate went, why it stopped
    (``end``, else ``state``'s end reason), and what follows."""
    spoken = last_spoken_round(state.history)
    reason = end or state.end_reason
    why = f" ({reason.value})" if reason is not None else ""
    return (
        f"Debate over after round {spoken}/{state.total_rounds}{why}: the observer "
        f"consolidates — {state.title}"
    )


def turn_toasts(
    state: RoundtableState, entry: HistoryEntry, end: EndReason | None, next_round: int
) -> list[Toast]:
    """The progress toasts of a seat turn just recorded (``state`` holds ``entry``; ``end``: why
    the debate stops now, if it does; ``next_round``: 0-indexed round of the next seat turn).

    A turn that answered gets its ``turn`` toast (a failed one has its warning toast already);
    when the observer follows (the last round is over, or the debate stops early other than by
    a cancel without summary) the ``phase`` toast says so.
    """
    out: list[Toast] = []
    if not entry.has_error:
        out.append(Toast(turn_toast(state, entry), "info", progress="turn"))
    silent_stop = end == EndReason.CANCELLED and not state.options.cancel_summarize
    if (end is not None and not silent_stop) or (end is None and next_round >= state.total_rounds):
        out.append(Toast(observing_toast(state, end), "info", progress="phase"))
    return out


@dataclass(slots=True)
class ToastThrottle:
    """Lets a progress toast through at most once per ``gap_s`` seconds (monotonic time).

    The first is always let through; a toast refused is dropped, not queued (the next one, or the
    phase change's, says more).
    """

    gap_s: float = PROGRESS_TOAST_GAP_S
    last_s: float | None = None

    def allow(self, now_s: float) -> bool:
        """True when a toast at ``now_s`` may be shown (and then counts as shown)."""
        if self.last_s is not None and now_s - self.last_s < self.gap_s:
            return False
        self.last_s = now_s
        return True


def seat_prompt_item(cmd: PromptSeat) -> dict[str, Any]:
    """The progress feed's ``prompt`` item (docs/control-api.md, ``…/events``) for a seat prompted
    in a session of its own — an independent opening's round 1, a protocol's second round (the
    council's ranking: round 2) —: its round is 1-based from the command's marker, on either
    major."""
    return {"type": "prompt", "agent": cmd.agent, "round": cmd.marker.round + 1, "kind": "turn"}
