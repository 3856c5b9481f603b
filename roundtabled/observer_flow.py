"""The verdict's decisions inside the machine: what a finished turn records, what the observer's
reply leads to (done, one repair turn, or the ledger verdict), and when the observer is skipped.

Pure functions of the state and a history entry, called by :mod:`roundtabled.machine` (the shell
only executes). See docs/result.md for the rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from roundtabled.observer_verdict import has_verdict_block, parse_reply, repair_prompt
from roundtabled.positions import parse_changed, parse_position, spoke
from roundtabled.state import HistoryEntry, RoundtableState, VerdictRecord

REPAIR_SEAT = -2
"""``seat`` of the observer's repair turn (its marker and history entry); the first observer turn
has seat ``-1`` (marker) / ``None`` (entry)."""


def annotate(entry: HistoryEntry, finish: str | None) -> HistoryEntry:
    """``entry`` with the last step's ``finish`` and, for a seat turn that spoke, its stated
    ``Position:`` line and ``Changed:`` reason (``None`` when absent: never guessed)."""
    update: dict[str, object] = {"finish": finish}
    if spoke(entry.model_copy(update={"finish": finish})):
        update["position"] = parse_position(entry.response)
        update["changed"] = parse_changed(entry.response)
    return entry.model_copy(update=update)


def is_repair(entry: HistoryEntry) -> bool:
    """True for the observer's repair reply."""
    return entry.kind == "observer" and entry.seat == REPAIR_SEAT


def skip_observer(state: RoundtableState) -> bool:
    """True when no seat gave a usable answer: there is nothing to consolidate, so the observer
    is not asked (the result says why and its summary is the digest)."""
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
    - no verdict block at all, or still invalid after the repair, or the repair turn failed →
      the ledger verdict (``fallback``).
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
    return VerdictStep(
        summary=summary, verdict=record.model_copy(update={"error": error, "fallback": True})
    )
