"""The verdict's decisions inside the machine: what a finished turn records, what the observer's
reply leads to (done, one repair turn, or the ledger verdict), and when the observer is skipped.

Pure functions of the state and a history entry, called by :mod:`roundtabled.core.machine` (the
shell only executes). See docs/result.md for the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roundtabled.core.observer_verdict import (
    REPAIR_SEAT,
    TRANSCRIPT_COPIED,
    copies_a_turn,
    has_verdict_block,
    is_repair,
    parse_reply,
    repair_prompt,
)
from roundtabled.core.positions import parse_changed, parse_position, spoke
from roundtabled.core.result import (
    OBSERVER_FAILED_HEADER,
    cancelled_text,
    named_observer_prompt,
    observer_prompt,
)
from roundtabled.core.state import EndReason, HistoryEntry, RoundtableState, VerdictRecord

__all__ = [
    "VerdictStep",
    "annotate",
    "observed",
    "observer_step",
    "observer_turn",
    "skip_observer",
]


def annotate(entry: HistoryEntry, finish: str | None) -> HistoryEntry:
    """``entry`` with the last step's ``finish`` and, for a seat turn that spoke, its stated
    ``Position:`` line and ``Changed:`` reason (``None`` when absent: never guessed)."""
    update: dict[str, object] = {"finish": finish}
    if spoke(entry.model_copy(update={"finish": finish})):
        update["position"] = parse_position(entry.response)
        update["changed"] = parse_changed(entry.response)
    return entry.model_copy(update=update)


def skip_observer(state: RoundtableState) -> bool:
    """True when no seat gave a usable answer: there is nothing to consolidate, so the observer
    is not asked (the result says why and its summary is the digest). A cancel that asked for a
    summary still gets its observer (the person asked for it)."""
    if state.end_reason == EndReason.CANCELLED and state.options.cancel_summarize:
        return False
    return not any(spoke(e) for e in state.history if e.kind == "turn")


@dataclass(frozen=True, slots=True)
class VerdictStep:
    """What an observer reply leads to.

    ``summary``: the observer's prose to keep (``None``: keep the current one); ``verdict``: the
    new record; ``repair``: the text of the one repair prompt to send now, ``None`` when the
    observer's part is over; ``failed``: the observer's (first) turn failed or was empty.
    """

    summary: str | None
    verdict: VerdictRecord
    repair: str | None = None
    failed: bool = False


def observer_step(state: RoundtableState, entry: HistoryEntry) -> VerdictStep:
    """Decide after the observer's turn (or its repair turn) is recorded.

    - first reply failed or empty → ``failed`` (the caller ends with ``observer-failed``);
    - a valid verdict → done (``data`` set; the prose of the first reply is the summary);
    - a verdict block that does not validate, no repair asked yet → one repair turn;
    - no verdict block at all, or still invalid after the repair (its error says so when the
      repair reply was cut at the output limit), or the repair turn failed → the ledger verdict
      (``fallback``); a first reply that starts with a seat's turn header
      (:func:`roundtabled.core.observer_verdict.copies_a_turn`) also leaves no summary.
    """
    record = state.verdict
    repair = is_repair(entry)
    if not repair and (entry.has_error or not entry.response.strip()):
        return VerdictStep(summary=None, verdict=record, failed=True)
    if repair and (entry.has_error or not entry.response.strip()):
        why = f"the repair turn failed: {entry.error or 'empty reply'}"
        return VerdictStep(
            summary=None, verdict=record.model_copy(update={"error": why, "fallback": True})
        )
    prose, verdict, error = parse_reply(entry.response, state.agents)
    if repair and error is not None and entry.finish == "length":
        # The corrected JSON was cut mid-way: the reason, not only the broken JSON it left.
        error = f"the repair reply was cut at the output limit: {error}"
    summary = None if repair else prose
    if verdict is not None:
        data = verdict.capped()
        return VerdictStep(
            summary=summary,
            verdict=record.model_copy(update={"data": data, "error": None, "fallback": False}),
        )
    if not repair and not record.repair_asked and has_verdict_block(entry.response):
        return VerdictStep(
            summary=summary,
            verdict=record.model_copy(update={"error": error, "repair_asked": True}),
            repair=repair_prompt(error or "invalid"),
        )
    if not repair and copies_a_turn(prose, state.agents):
        # Not a consolidation: the summary becomes the digest of the seats' positions, and the
        # result says why (docs/result.md, the observer's verdict).
        return VerdictStep(
            summary=None,
            verdict=record.model_copy(update={"error": TRANSCRIPT_COPIED, "fallback": True}),
        )
    return VerdictStep(
        summary=summary, verdict=record.model_copy(update={"error": error, "fallback": True})
    )


def observer_turn(state: RoundtableState) -> tuple[int, str]:
    """``(seat, prompt text)`` of the observer's next turn: the one repair turn (seat
    ``REPAIR_SEAT``) when the record asks for it and it has not been answered, else the
    consolidation (seat ``-1``; the built-in or the named observer's prompt). Replanning (a
    prompt to send again after a crash) gives the same turn: the record is in the state."""
    v = state.verdict
    if v.repair_asked and v.data is None and not v.fallback:
        return REPAIR_SEAT, repair_prompt(v.error or "invalid")
    if state.observer == "built-in":
        return -1, observer_prompt(state, state.history)
    return -1, named_observer_prompt(state, state.history, observer=state.observer)


def observed(
    state: RoundtableState, entry: HistoryEntry, update: dict[str, Any]
) -> tuple[RoundtableState, bool]:
    """The state after the observer's turn (or its repair turn) is recorded, and whether the
    repair turn comes next. ``update``: the machine's changes of this step (history with
    ``entry``, pending cleared, errors). A cancel without summary keeps its partial history; an
    observer that failed ends ``observer-failed`` (the result's summary is the digest)."""
    new = state.model_copy(update=update)
    if state.end_reason == EndReason.CANCELLED and not state.options.cancel_summarize:
        return new.model_copy(update={"summary": cancelled_text(new)}), False
    step = observer_step(new, entry)
    if step.failed:
        why = entry.error or "empty reply"
        failed: dict[str, Any] = {
            "summary": f"(The observer {entry.agent} failed: {why}.)\n\n"
            + cancelled_text(new, OBSERVER_FAILED_HEADER),
        }
        if not entry.has_error:
            # A failed request is in the errors already, as every failed turn is (the machine).
            failed["errors"] = [*new.errors, f"observer {entry.agent}: {why}"]
        if state.end_reason is None:
            failed["end_reason"] = EndReason.OBSERVER_FAILED
        return new.model_copy(update=failed), False
    done: dict[str, Any] = {"verdict": step.verdict}
    if step.summary is not None:
        done["summary"] = step.summary
    if step.repair is None and state.end_reason is None:
        done["end_reason"] = EndReason.COMPLETED
    return new.model_copy(update=done), step.repair is not None
