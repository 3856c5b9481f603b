"""The result the caller receives: the contract assembled, its words, and its size kept in bounds.

:func:`build_result` turns a finished (or running) roundtable's state into the
:class:`~roundtabled.core.result_model.RoundtableResult` of docs/result.md; :func:`result_json` is
the text the ``roundtable`` tool returns; :func:`delivery_text` is what S1 gets as a ``noReply``
message when no tool call waits — both carry the same honesty header.

Size (docs/result.md, "Size"): OpenCode cuts a custom tool's output at 2000 lines or 50 KB and
hands the model only the head. The result therefore puts ``status`` first, then ``verdict``,
then the ``summary``; every list and item is capped and the summary gets what is left of
:data:`RESULT_MAX_BYTES`. The transcript is never pasted: ``transcript`` says where it is.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any

import orjson

from roundtabled.core.positions import position_of, spoke
from roundtabled.core.result_model import RoundtableResult, SeatPosition, Status, Verdict
from roundtabled.core.result_text import _collapse, _end_line, _usage_footer, interruption_text
from roundtabled.core.state import EndReason, RoundtableState
from roundtabled.core.verdict import build_status, build_usage, build_verdict

RESULT_MAX_BYTES = 40_000
"""Upper bound of :func:`result_json` in UTF-8 bytes (OpenCode keeps 50 KB of a tool's output)."""
RESULT_MAX_LINES = 1_000
"""Upper bound of :func:`result_json` in lines (OpenCode keeps 2000)."""
NOTE_MAX = 300
"""Characters of each note kept."""
NOTES_MAX = 30
"""Notes kept in ``status.notes`` (the rest are counted in a last note)."""
SEAT_NOTES_MAX = 10
"""Notes kept per seat."""
CHANGES_MAX = 10
"""Position changes kept per seat (the latest)."""
DIGEST_WORDS_CHARS = 300
"""Characters of a seat's last answer quoted in the digest when it stated no position."""

HEADER_TITLE = "⚠ DEGRADED ROUNDTABLE RESULT — tell the user:"
"""First line of the honesty header (a healthy debate has none)."""


def transcript_ref(session_id: str) -> str:
    """Where the full debate is (never pasted into the result)."""
    return (
        f"Full transcript: the roundtable session {session_id}; "
        f"`roundtabled export {session_id} --format md` (or --format json)."
    )


def honesty_header(status: Status) -> str:
    """The words that precede the observer's text when the result is degraded ('' otherwise):
    one line per note of ``status`` (the same sentences as ``status.notes``)."""
    if not status.degraded:
        return ""
    lines = [HEADER_TITLE, *(f"- {n}" for n in status.notes)]
    return "\n".join(lines)


def _conf(c: float | None) -> str:
    return f" (confidence {round(c * 10):d}/10)" if c is not None else ""


def digest(state: RoundtableState) -> str:
    """A deterministic digest of the debate: each seat's last stated position (the summary when
    the observer failed or never ran). Never invents a position: a seat without a ``Position:``
    line is quoted, a silent seat is named as such."""
    lines = ["Digest (not a consolidation): each seat's last stated position."]
    for agent in state.agents:
        turns = [e for e in state.history if e.kind == "turn" and e.agent == agent and spoke(e)]
        if not turns:
            lines.append(f"- {agent}: gave no usable answer")
            continue
        last = turns[-1]
        pos = position_of(last)
        if pos is None:
            words = _collapse(last.response)
            if len(words) > DIGEST_WORDS_CHARS:
                words = words[: DIGEST_WORDS_CHARS - 1].rstrip() + "…"
            lines.append(f"- {agent} (round {last.round}): no Position line; last words: “{words}”")
            continue
        sentence = f" — {pos.position}" if pos.position else ""
        lines.append(
            f"- {agent} (round {last.round}): {pos.label}{sentence}{_conf(pos.confidence)}"
        )
    return "\n".join(lines)


def _observer_text(state: RoundtableState) -> str:
    """The observer's prose (its JSON verdict is in ``verdict``), or the digest when there is
    none (failed, skipped, cancelled without a summary)."""
    summary = (state.summary or "").strip()
    if state.end_reason == EndReason.OBSERVER_FAILED or not summary:
        return digest(state)
    return summary


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _cap_lists(status: Status, verdict: Verdict) -> tuple[Status, Verdict]:
    notes = [_cut(n, NOTE_MAX) for n in status.notes]
    if len(notes) > NOTES_MAX:
        notes = [*notes[: NOTES_MAX - 1], f"… and {len(notes) - NOTES_MAX + 1} more notes"]
    seats = []
    for s in status.seats:
        sn = [_cut(n, NOTE_MAX) for n in s.notes]
        if len(sn) > SEAT_NOTES_MAX:
            sn = [*sn[: SEAT_NOTES_MAX - 1], f"… and {len(sn) - SEAT_NOTES_MAX + 1} more"]
        seats.append(s.model_copy(update={"notes": sn}))
    positions: list[SeatPosition] = []
    for p in verdict.positions:
        changes = [
            c.model_copy(update={"why": _cut(c.why, NOTE_MAX) if c.why else c.why})
            for c in p.changes[-CHANGES_MAX:]
        ]
        positions.append(p.model_copy(update={"changes": changes}))
    return (
        status.model_copy(update={"notes": notes, "seats": seats}),
        verdict.model_copy(update={"positions": positions}),
    )


def build_result(state: RoundtableState) -> RoundtableResult:
    """The contract of docs/result.md for ``state`` (pure; the summary not yet size-capped:
    :func:`result_json` does that)."""
    verdict, verdict_notes = build_verdict(state)
    status = build_status(state, verdict_notes)
    status, verdict = _cap_lists(status, verdict)
    header = honesty_header(status)
    body = _observer_text(state)
    summary = f"{header}\n\n{body}" if header else body
    return RoundtableResult(
        session_id=state.session_id,
        title=state.title,
        status=status,
        verdict=verdict,
        summary=summary,
        usage=build_usage(state),
        transcript=transcript_ref(state.session_id),
    )


def _dumps(data: dict[str, Any]) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_INDENT_2)


SUMMARY_CUT_MARK = "\n… [summary cut to fit the tool output limit; the full text: {ref}]"


def capped(result: RoundtableResult) -> RoundtableResult:
    """``result`` with its summary cut so that :func:`result_json` stays within
    :data:`RESULT_MAX_BYTES` and :data:`RESULT_MAX_LINES` (the honesty header, at the start of
    the summary, is kept whole)."""
    data = result.dump()
    size = len(_dumps(data))
    lines = _dumps(data).count(b"\n") + 1
    if size <= RESULT_MAX_BYTES and lines <= RESULT_MAX_LINES:
        return result
    summary = result.summary
    mark = SUMMARY_CUT_MARK.format(ref=f"roundtabled export {result.session_id}")
    without = len(_dumps({**data, "summary": ""}))
    room = RESULT_MAX_BYTES - without - len(orjson.dumps(mark)) - 16
    # JSON escapes newlines and quotes: measure the encoded form, shrink until it fits.
    cut = max(room, 0)
    text = summary
    while cut > 0:
        text = summary.encode()[:cut].decode("utf-8", errors="ignore").rstrip()
        if len(orjson.dumps(text)) <= room:
            break
        cut -= max((len(orjson.dumps(text)) - room), 64)
    return result.model_copy(update={"summary": (text if cut > 0 else "") + mark})


def result_json(result: RoundtableResult) -> str:
    """The tool's output: the contract as indented JSON, status first, size-capped."""
    return _dumps(capped(result).dump()).decode()


def _position_line(p: SeatPosition) -> str:
    if p.label is None:
        return f"{p.agent}: no stated position" if p.round else f"{p.agent}: did not speak"
    changed = " (changed)" if p.changes else ""
    return f"{p.agent}: {p.label}{_conf(p.confidence)}{changed}"


def verdict_lines(result: RoundtableResult) -> list[str]:
    """The verdict in a few plain lines (noReply text, CLI fallbacks)."""
    v = result.verdict
    lines = [
        f"Verdict ({v.source}): consensus {v.consensus}"
        + (f", tally {v.tally_consensus}" if v.tally_consensus != v.consensus else "")
        + (f" · decision: {v.decision}" if v.decision else " · no decision")
        + (f" · confidence {v.confidence:g}" if v.confidence is not None else ""),
        "Positions: " + " · ".join(_position_line(p) for p in v.positions),
    ]
    for d in v.disagreements[:3]:
        lines.append(f"Minority ({', '.join(d.minority) or '—'}): {d.point}: {d.view}")
    return lines


def delivery_text(state: RoundtableState, result: RoundtableResult | None = None) -> str:
    """What S1 receives as a ``noReply`` message when no tool call waits: the title line, the
    end line when it did not complete (the exact texts of ``result_text._end_line``), the
    summary (honesty header first, the same words as the tool result), the verdict lines, the
    usage footer and where the transcript is. ``result``: :func:`capped` of
    :func:`build_result` of ``state`` when the caller has it."""
    result = result or capped(build_result(state))
    s = result.status
    end = _end_line(state)
    lines = [
        f"Roundtable {state.session_id} — {_collapse(state.title)}",
        *([end] if end else []),
        f"Status: {s.end_reason}, {s.rounds_completed}/{s.rounds_planned} rounds"
        + (", DEGRADED" if s.degraded else ""),
        "",
        result.summary,
        "",
        *verdict_lines(result),
    ]
    if state.options.usage_footer:
        footer = _usage_footer(state.history)
        if footer:
            lines.append(footer)
    lines.append(result.transcript)
    return "\n".join(lines)


def payload(state: RoundtableState, deliver: str) -> dict[str, Any]:
    """The finished result as the control API hands it out (docs/control-api.md): ``result`` =
    the contract, ``output`` = its JSON text (what the tool returns), ``text`` = what S1 gets
    by noReply (for a closed S2, ``deliver == "interruption"``: the interruption text with the
    honesty header after its first line, also the contract's summary), ``summary`` = the
    observer's own text (older callers).
    """
    result = capped(build_result(state))
    if deliver == "interruption":
        # The exact interruption header first, then the honesty header, then the partial
        # history: the tool's summary and S1's text alike.
        head, _, rest = interruption_text(state).partition("\n")
        header = honesty_header(result.status)
        text = f"{head}\n{header}\n\n{rest}" if header else f"{head}\n{rest}"
        result = capped(result.model_copy(update={"summary": text}))
    else:
        text = delivery_text(state, result)
    return {
        "done": True,
        "sessionID": state.session_id,
        "summary": state.summary or text,
        "text": text,
        "phase": state.phase.value,
        "endReason": state.end_reason.value if state.end_reason is not None else None,
        "title": state.title,
        "result": result.dump(),
        "output": result_json(result),
    }
