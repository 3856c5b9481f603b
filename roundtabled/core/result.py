"""The texts built from a debate's history, and the result the caller receives assembled from them.

The texts: the attributed history (``── pm · round 1 ──`` blocks), the built-in and named
observer prompts (with every degradation and the stated positions, docs/result.md), the texts
delivered to S1 (interruption, cancellation), the usage table. The result: :func:`build_result`
turns a finished (or running) roundtable's state into the
:class:`~roundtabled.core.result_model.RoundtableResult` of docs/result.md; :func:`result_json` is
the text the ``roundtable`` tool returns; :func:`delivery_text` is what S1 gets as a ``noReply``
message when no tool call waits — both carry the same honesty header.

Size (docs/result.md, "Size"): OpenCode cuts a custom tool's output at 2000 lines or 50 KB and
hands the model only the head. The result therefore puts ``status`` first, then ``verdict``,
then the ``summary``; every list and item is capped and the summary gets what is left of
:data:`RESULT_MAX_BYTES`. The transcript is never pasted: ``transcript`` says where it is.

Pure and deterministic: no I/O, no clock. Rounds in texts are 1-based."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any, TypedDict

import orjson

from roundtabled.core import protocols
from roundtabled.core.observer_verdict import VERDICT_INSTRUCTION
from roundtabled.core.positions import position_of, spoke
from roundtabled.core.result_model import RoundtableResult, SeatPosition, Status, Verdict
from roundtabled.core.state import (
    TOOL_OUTPUT_PREVIEW_MAX,
    EndReason,
    HistoryEntry,
    RoundtableState,
    UsageTotal,
    shown_title,
    tokens_in_out,
    went_wrong,
)
from roundtabled.core.verdict import (
    build_status,
    build_usage,
    build_verdict,
    consensus_text,
    counted,
    deliberation_line,
    extension_note,
    positions,
    protocol_line,
    tally,
    unstated_words,
)

# ── fixed texts and text helpers (also the prompts') ────────────────────────────────────────────

INTERRUPTION_HEADER = (
    "[Roundtable interrupted — session closed. Partial history up to interruption:]"
)
"""Header of the text injected into S1 when S2 is deleted (docs/behaviour.md, 'S2 deleted',
exact)."""
CANCELLED_HEADER = "[Roundtable cancelled — partial history up to cancellation:]"
"""Header of the text delivered when a cancel stops the debate without an observer."""
OBSERVER_FAILED_HEADER = "[No verdict: the observer failed — the debate's history as it stands:]"
"""Header of the history an observer that failed leaves as the summary (nobody cancelled)."""
REPETITION_TEXT = "Roundtable ended due to repetition — agents reached an impasse"
"""What S1 is told when loop detection ended the debate (docs/behaviour.md, 'Loops', exact)."""

PARTIAL_ENTRY_CHARS = 2000
"""Characters of each response in an interruption/cancellation text."""
TRUNCATED_MARK = "… [truncated, full text above in this session]"
"""Appended to a response cut in the observer prompt (the full text stays in S2)."""
TRUNCATED_MARK_S2 = "… [truncated, full text in the roundtable session]"
"""Appended to a response cut in a text delivered to S1 (the full text is in S2, not S1)."""


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) replaced by one space."""
    return " ".join(text.split())


def cut_text(text: str, max_chars: int, mark: str) -> str:
    """``text`` cut to ``max_chars`` characters with ``mark`` appended when it was cut."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars].rstrip() + mark


# ── attributed history (observer, interruption, cancellation) ───────────────────────────────────


def _entry_block(entry: HistoryEntry, per_entry_chars: int, mark: str) -> str:
    """One ``── agent · round N ──`` block: header, response (capped), tools, files, error."""
    who = one_line(entry.agent)
    if entry.kind == "user":
        header = "── the user ──"
    elif entry.kind == "interjection":
        header = f"── {who} · reply to the user ──"
    elif entry.kind == "observer":
        header = f"── observer · summary after round {entry.round} ──"
    elif entry.kind != "turn":  # a protocol's second independent round (council's ranking)
        header = f"── {who} · {entry.kind}" + (" · FAILED ──" if entry.has_error else " ──")
    else:
        header = f"── {who} · round {entry.round} ──"
        if entry.cut_off:  # a cut-off turn also has has_error; its partial text is kept
            why = "by the cancel" if entry.cut_by_cancel else "at the time limit"
            header = f"── {who} · round {entry.round} · CUT OFF {why} ──"
        elif entry.has_error:
            header = f"── {who} · round {entry.round} · FAILED ──"
    lines = [header]
    response = entry.response.strip()
    if response:
        lines.append(cut_text(response, per_entry_chars, mark))
    for tool in entry.tool_calls:
        preview = cut_text(tool.output_preview.strip(), TOOL_OUTPUT_PREVIEW_MAX, "…")
        preview = preview.replace("\n", "\n    ")  # keep multi-line output inside the block
        lines.append(f"  [tool {tool.tool_name}] {preview}")
    lines.extend(f"  [file] {f}" for f in entry.files)
    if entry.cut_off:
        reason = (
            "the roundtable was cancelled"
            if entry.cut_by_cancel
            else "the turn reached the time limit"
        )
        kept = "partial text above" if response else "it had written no text yet"
        lines.append(f"  [cut off: {reason}; {kept}]")
    elif entry.has_error:
        lines.append(f"  [error] {cut_text(entry.error or 'the turn failed', 500, '…')}")
    if len(lines) == 1:
        lines.append("(no response)")
    return "\n".join(lines)


def _history_text(history: Sequence[HistoryEntry], per_entry_chars: int, mark: str) -> str:
    if not history:
        return "(nothing was said)"
    return "\n\n".join(_entry_block(e, per_entry_chars, mark) for e in history)


def _failed_round(state: RoundtableState) -> int:
    """The 1-based round in which every agent failed (the last round with a failed turn)."""
    failed = [e.round for e in state.history if e.kind == "turn" and e.has_error]
    return max(failed) if failed else state.current_round + 1


def _position_text(state: RoundtableState) -> list[str]:
    """One line per seat: its last stated position, as the daemon parsed it."""
    out = []
    seats = positions(state)
    for p in seats:
        who = p.agent + (f" [assigned side: {p.side}; not counted]" if p.side is not None else "")
        if p.label is None:
            what = "no Position line in its last answer" if p.round else "never gave an answer"
            out.append(f"- {who}: {what}")
            continue
        if p.no_stance is not None:
            out.append(
                f"- {who} (round {p.round}): its label “{p.label}” is {p.no_stance}: no position"
            )
            continue
        conf = f" (confidence {round(p.confidence * 10)}/10)" if p.confidence is not None else ""
        sentence = f" — {p.position}" if p.position else ""
        changed = f"; changed {len(p.changes)} time(s)" if p.changes else ""
        kept = " (kept from before the extension)" if p.carried else ""
        out.append(f"- {who} (round {p.round}): {p.label}{sentence}{conf}{changed}{kept}")
    items = tally(counted(seats))
    if items:
        out.append(
            "Stances (the daemon groups labels that name the same position; the tally and "
            "convergence use this grouping — if you read it differently, say so in `stances`):"
        )
        for t in items:
            words = "; ".join(f"“{lbl}”" for lbl in t.labels)
            out.append(f"- “{t.label}”: {', '.join(t.seats)} (their labels: {words})")
    return out


def _observer_context(state: RoundtableState) -> list[str]:
    """Topic, participants, everything that went wrong (the result's status notes, the same
    words) and the stated positions: the observer is told all of it (docs/result.md)."""
    lines = [f"Topic: {state.prompt}"]
    for ext in sorted(state.extensions, key=lambda e: e.from_round):
        kind = "continuation" if ext.mode == "continuation" else "new topic"
        lines.append(f"From round {ext.from_round + 1} ({kind}): {ext.prompt}")
    lines.append(f"Participants in speaking order: {', '.join(state.agents)}")
    if state.options.sides:
        bound = ", ".join(f"{a} ({s})" for a, s in state.options.sides.items())
        lines.append(
            f"Seats bound to an assigned side (they argued what they were told to): {bound}. "
            "Report their arguments, but never count them toward a consensus or a majority."
        )
    notes = [n for n in went_wrong(build_status(state).notes) if "Position line" not in n]
    if notes:
        lines.append(
            "What went wrong or was cut short (say so in the executive summary; a seat that "
            "failed, was empty, timed out or was cut off did not speak in that turn and agrees "
            "with nobody):"
        )
        lines.extend(f"- {n}" for n in notes)
    lines.append("Stated positions (each seat's last `Position:` line, parsed by the daemon):")
    lines.extend(_position_text(state))
    # What the protocol counted beyond the positions (docs/deliberation.md, "Protocols").
    lines.extend(protocols.running(state).observer_lines(state))
    return lines


_SECTIONS = (
    "1. **Executive summary** (2-3 sentences)\n"
    "2. **Key points** raised by each participant\n"
    "3. **Decisions or convergences** reached\n"
    "4. **Remaining open questions**\n"
    "5. **Suggested next steps**\n" + VERDICT_INSTRUCTION
)


def _observer_text(
    intro: Sequence[str],
    state: RoundtableState,
    history: Sequence[HistoryEntry],
    per_entry_chars: int,
) -> str:
    """An observer's prompt: the ``intro`` lines, the sections to write, the debate's context
    (:func:`_observer_context`) and ``Debate:`` with one block per entry of ``history``, each
    response capped at ``per_entry_chars`` characters (marked :data:`TRUNCATED_MARK`); parts
    separated by blank lines."""
    parts = [
        *intro,
        "",
        _SECTIONS,
        "",
        *_observer_context(state),
        "",
        "Debate:",
        _history_text(history, per_entry_chars, TRUNCATED_MARK),
    ]
    return "\n".join(parts)


def observer_prompt(
    state: RoundtableState, history: Sequence[HistoryEntry], *, per_entry_chars: int = 4000
) -> str:
    """The built-in observer's prompt: the five parts of docs/behaviour.md, 'The
    observer', and the debate.

    Args:
        state: the roundtable (topic, extensions, agents, end reason).
        history: the entries to consolidate, oldest first.
        per_entry_chars: characters of each response kept; longer ones end with
            ``"… [truncated, full text above in this session]"``.

    The five sections are the spec's; "Debate:" is followed by one block per entry
    (``── pm · round 1 ──`` + response, tool previews, files, failures and cut-offs marked,
    ``── the user ──`` for a person's messages). When the debate did not complete, a line says why.
    """
    intro = ["You are an impartial roundtable observer.", "Consolidate the debate below into:"]
    return _observer_text(intro, state, history, per_entry_chars)


def named_observer_prompt(
    state: RoundtableState,
    history: Sequence[HistoryEntry],
    *,
    observer: str,
    per_entry_chars: int = 4000,
) -> str:
    """The prompt for an explicit observer agent (docs/behaviour.md, 'The
    observer').

    Args:
        observer: the observing agent's name (``state.observer``).
        Other arguments as :func:`observer_prompt`.
    """
    intro = [
        f"Your role: {one_line(observer)}. Provide an executive summary of the roundtable debate "
        "below as its observer: you do not debate, you consolidate. Structure it as:"
    ]
    return _observer_text(intro, state, history, per_entry_chars)


# ── texts for S1 and toasts ─────────────────────────────────────────────────────────────────────


class UsageTable(TypedDict):
    """Totals of :func:`usage_table`."""

    perAgent: dict[str, UsageTotal]
    perRound: dict[int, UsageTotal]
    total: UsageTotal


def usage_table(history: Sequence[HistoryEntry], unpriced: Collection[str] = ()) -> UsageTable:
    """Total the ``usage`` of ``history`` per agent name, per (1-based) round and overall; the
    turns of ``unpriced`` agents (:attr:`RoundtableState.unpriced`) make a total's cost unknown.

    Returns:
        ``{"perAgent": {agent: UsageTotal}, "perRound": {round: UsageTotal}, "total":
        UsageTotal}``; keys in order of first appearance. A person's messages (kind ``user``) are
        not counted.
    """
    per_agent: dict[str, UsageTotal] = {}
    per_round: dict[int, UsageTotal] = {}
    total = UsageTotal()
    for e in history:
        if e.kind == "user":
            continue
        per_agent[e.agent] = per_agent.get(e.agent, UsageTotal()).plus(e, unpriced)
        per_round[e.round] = per_round.get(e.round, UsageTotal()).plus(e, unpriced)
        total = total.plus(e, unpriced)
    return {"perAgent": per_agent, "perRound": per_round, "total": total}


def usage_words(total: UsageTotal, line: str) -> str:
    """``line`` (a total already in words) as far as it is known: ``unknown (the server reported
    no usage)`` when nothing was recorded, ``at least <line> (usage of N turn(s) unknown)`` when
    some answered turns reported none."""
    if total.unknown:
        return "unknown (the server reported no usage)"
    if total.unreported:
        return f"at least {line} (usage of {total.unreported} turn(s) unknown)"
    return line


def _tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1_000:
        return f"{n / 1_000:.1f}k"
    return str(n)


def _cost(c: float) -> str:
    if c == 0:
        return "$0"
    if c < 0.01:
        return f"${c:.4f}"
    return f"${c:.2f}"


def _usage_label(t: UsageTotal) -> str:
    """``1.2k in / 340 out · $0.0012``: in = input + cache read/write, out = output + reasoning;
    ``cost unknown (no price listed)`` for a model without a price."""
    u = t.usage
    tokens_in, tokens_out = tokens_in_out(u.dump())
    cost = "cost unknown (no price listed)" if t.unpriced else _cost(u.cost)
    return f"{_tokens(tokens_in)} in / {_tokens(tokens_out)} out · {cost}"


def _usage_footer(history: Sequence[HistoryEntry], unpriced: Collection[str]) -> str | None:
    groups: dict[str, UsageTotal] = {}
    total = UsageTotal()
    for e in history:
        if e.kind == "user":
            continue
        label = "observer" if e.kind == "observer" else one_line(e.agent)
        groups[label] = groups.get(label, UsageTotal()).plus(e, unpriced)
        total = total.plus(e, unpriced)
    if not total.usage.recorded and not total.unreported:
        return None
    items = [
        f"{name}: {usage_words(u, _usage_label(u))}"
        for name, u in groups.items()
        if u.usage.recorded or u.unreported
    ]
    items.append(f"total: {usage_words(total, _usage_label(total))}")
    return "Usage — " + " | ".join(items)


def _end_line(state: RoundtableState) -> str | None:
    """The S1 line stating why the roundtable did not complete (docs/behaviour.md, 'Loops', for
    repetition)."""
    reason = state.end_reason
    if reason is None or reason == EndReason.COMPLETED:
        return None
    texts = {
        EndReason.REPETITION: REPETITION_TEXT,
        EndReason.ALL_FAILED: f"Roundtable aborted: every agent failed in round "
        f"{_failed_round(state)}",
        EndReason.CANCELLED: "Roundtable cancelled by the user",
        EndReason.SESSION_DELETED: "Roundtable interrupted — session closed",
        EndReason.PARENT_DELETED: "Roundtable aborted: the main session was closed",
        EndReason.OBSERVER_FAILED: "Roundtable observer failed — no consolidated summary",
        EndReason.FAILED: "Roundtable failed: "
        + (state.errors[-1] if state.errors else "see roundtabled's log"),
    }
    return texts.get(reason, f"Roundtable ended: {reason}")


def interruption_text(state: RoundtableState) -> str:
    """The text injected into S1 when S2 is closed mid-debate (docs/behaviour.md, 'S2 deleted',
    exact header).

    The attributed partial history follows, each response capped at 2000 characters.
    """
    history = _history_text(state.history, PARTIAL_ENTRY_CHARS, TRUNCATED_MARK_S2)
    return f"{INTERRUPTION_HEADER}\n{history}"


def cancelled_text(state: RoundtableState, header: str = CANCELLED_HEADER) -> str:
    """The text delivered when a cancel stops the debate without an observer.

    ``header`` (by default ``"[Roundtable cancelled — partial history up to cancellation:]"``;
    :data:`OBSERVER_FAILED_HEADER` when the observer failed) and the attributed partial history,
    each response capped at 2000 characters.
    """
    history = _history_text(state.history, PARTIAL_ENTRY_CHARS, TRUNCATED_MARK_S2)
    return f"{header}\n{history}"


# ── the result: the contract assembled, kept in bounds, delivered ───────────────────────────────

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
    lines = [HEADER_TITLE, *(f"- {n}" for n in went_wrong(status.notes))]
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
            words = one_line(last.response)
            if len(words) > DIGEST_WORDS_CHARS:
                words = words[: DIGEST_WORDS_CHARS - 1].rstrip() + "…"
            lines.append(f"- {agent} (round {last.round}): no Position line; last words: “{words}”")
            continue
        sentence = f" — {pos.position}" if pos.position else ""
        lines.append(
            f"- {agent} (round {last.round}): {pos.label}{sentence}{_conf(pos.confidence)}"
        )
    return "\n".join(lines)


def _observer_summary(state: RoundtableState) -> str:
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
    # Plain text: the TUI shows the tool's output as it is, and the CLI prints it to a
    # terminal; the observer's own markdown stays in the export (``observerSummary``).
    body = plain_text(_observer_summary(state))
    # Which protocol ran and its count, before the observer's words (docs/deliberation.md,
    # "Protocols"); a debate, the default, says nothing here.
    ran = protocol_line(verdict.dump())
    if ran is not None:
        body = f"{ran}\n\n{body}"
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


_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.DOTALL)
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+", re.MULTILINE)
_STAR_BULLET = re.compile(r"^([ \t]*)\*[ \t]+", re.MULTILINE)


def plain_text(markdown: str) -> str:
    """``markdown`` as plain text for the tool's output, which the TUI shows as it is: bold and
    italic markers (``**x**``, ``__x__``, ``*x*``) and heading hashes are dropped, ``* `` bullets
    become ``- ``; the words, lines and everything else (code, lists, numbers) are unchanged.

    >>> plain_text("**Executive summary.** *pm*: ship it")
    'Executive summary. pm: ship it'
    """
    text = _STAR_BULLET.sub(r"\1- ", markdown)
    text = _HEADING.sub("", text)
    text = _STRONG.sub(r"\2", text)
    return _EMPHASIS.sub(r"\1", text)


def result_json(result: RoundtableResult) -> str:
    """The tool's output: the contract as indented JSON, status first, size-capped."""
    return _dumps(capped(result).dump()).decode()


def _position_line(p: SeatPosition) -> str:
    who = p.agent + (f" [side: {p.side}, not counted]" if p.side is not None else "")
    if p.label is None:
        if p.round:
            return f"{who}: no stated position"
        if p.cut_off is not None:
            return f"{who}: {unstated_words(p.dump())}"
        return f"{who}: did not speak"
    if p.no_stance is not None:
        # A label that names no stance is no position: never shown as if it were one.
        return f"{who}: no stated position (“{p.label}” is {p.no_stance})"
    changed = " (changed)" if p.changes else ""
    kept = f" (kept from round {p.round})" if p.carried else ""
    return f"{who}: {p.label}{_conf(p.confidence)}{changed}{kept}"


VERDICT_SOURCE_WORDS = {
    "observer": "by the observer",
    "ledger": "from the seats' stated positions",
}
"""Who the verdict is from, in words (``source`` of docs/result.md: ``ledger`` is the positions
the seats stated, used when the observer gave no readable verdict)."""


def verdict_lines(result: RoundtableResult) -> list[str]:
    """The verdict in a few plain lines (noReply text, CLI fallbacks)."""
    v = result.verdict
    if v.observer_consensus is not None:
        # A claim no stated position backs: the same words as the CLI's verdict line.
        consensus = f"consensus {consensus_text(v.dump())}"
    else:
        consensus = f"consensus {v.consensus}" + (
            f", tally {v.tally_consensus}" if v.tally_consensus != v.consensus else ""
        )
    lines = [
        f"Verdict ({VERDICT_SOURCE_WORDS[v.source]}): {consensus}"
        + (f" · decision: {v.decision}" if v.decision else " · no decision")
        + (
            f" · confidence {v.confidence:g}"
            if v.confidence is not None
            else " · confidence unknown"
            if v.observer_consensus is not None
            else ""
        ),
        "Positions: " + " · ".join(_position_line(p) for p in v.positions),
        *filter(None, [protocol_line(v.dump()), deliberation_line(v.dump())]),
    ]
    for d in v.disagreements[:3]:
        lines.append(f"Minority ({', '.join(d.minority) or '—'}): {d.point}: {d.view}")
    return lines


def status_line(state: RoundtableState, status: Status) -> str:
    """``Status: completed, 4/4 rounds`` (``, DEGRADED`` when it is), and what a reader must not
    miss there though it is no degradation: an ``extend`` in which no seat stated a position
    (:func:`roundtabled.core.verdict.extension_note`, docs/result.md)."""
    line = f"Status: {status.end_reason}, {status.rounds_completed}/{status.rounds_planned} rounds"
    if status.degraded:
        line += ", DEGRADED"
    if (unstated := extension_note(state, positions(state))) is not None:
        line += f" — {unstated}"
    return line


def delivery_text(state: RoundtableState, result: RoundtableResult | None = None) -> str:
    """What S1 receives as a ``noReply`` message when no tool call waits: the title line, the
    end line when it did not complete (the exact texts of :func:`_end_line`), the
    summary (honesty header first, the same words as the tool result), the verdict lines, the
    usage footer and where the transcript is. ``result``: :func:`capped` of
    :func:`build_result` of ``state`` when the caller has it."""
    result = result or capped(build_result(state))
    s = result.status
    end = _end_line(state)
    lines = [
        f"Roundtable {state.session_id} — {shown_title(state.title)}",
        *([end] if end else []),
        status_line(state, s),
        "",
        result.summary,
        "",
        *verdict_lines(result),
    ]
    if state.options.usage_footer:
        footer = _usage_footer(state.history, state.unpriced)
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
