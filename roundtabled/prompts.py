"""Every text the daemon sends to a model or writes into a session (spec §3, §6, §7, §8, §9).

Invariants
- Pure and deterministic: the same arguments give the same text; no clock, no I/O, no asyncio.
- No prompt contains the state/META block (it lives in an ignored part, see
  :mod:`roundtabled.state`).
- Turn prompts are bounded: the orchestration text (everything except the topic) stays within
  :data:`TURN_ORCHESTRATION_BUDGET` bytes of UTF-8 for up to 6 agents with names of up to 100
  bytes (100 ASCII characters; agent names are configuration keys), whatever the round number,
  the number of entries or the length of the replies: attribution quotes are capped
  (:data:`ATTRIBUTION_QUOTE_CHARS`), at most :data:`ATTRIBUTION_MAX_ENTRIES` entries are listed,
  and the lines share the bytes left (short lines whole, long ones cut equally).
- The debaters see each other's turns natively: S2's conversation holds every reply as an
  assistant message, so a turn prompt only *attributes* what was said since the seat's last turn
  (who spoke, a short quote); the observer prompt repeats the attributed history in full (each
  entry capped) because the summary must be faithful to who said what.
- Rounds: ``round_index`` arguments are 0-indexed (``RoundtableState.current_round``); texts show
  1-based rounds ("Round 2/3"), like ``HistoryEntry.round``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Literal, TypedDict

from roundtabled.state import (
    TOOL_OUTPUT_PREVIEW_MAX,
    EndReason,
    HistoryEntry,
    RoundtableState,
    Usage,
)

__all__ = [
    "ATTRIBUTION_MAX_ENTRIES",
    "ATTRIBUTION_QUOTE_CHARS",
    "CANCELLED_HEADER",
    "EXTEND_CONTINUATION_PREFIXES",
    "INTERRUPTION_HEADER",
    "REPETITION_TEXT",
    "TITLE_PREFIX",
    "TITLE_PROMPT_CHARS",
    "TURN_ORCHESTRATION_BUDGET",
    "ExtendMode",
    "UsageTable",
    "cancelled_text",
    "default_title",
    "effective_topic",
    "extend_topic",
    "failure_toast",
    "infer_extend_mode",
    "interruption_text",
    "named_observer_prompt",
    "observer_prompt",
    "result_text",
    "turn_prompt",
    "usage_table",
]

ExtendMode = Literal["continuation", "new-topic"]

TITLE_PREFIX = "(Roundtable) - "
"""Prefix of a generated title (spec §3)."""
TITLE_PROMPT_CHARS = 80
"""Characters of the prompt kept in a generated title, cut at a word boundary (spec §3)."""

TURN_ORCHESTRATION_BUDGET = 1500
"""Bytes (UTF-8) of a turn prompt outside the topic text, for ≤ 6 agents with ≤ 100-byte names.

With longer names the attribution block shrinks to one counting line, and only the names (which
the roster and the "You are X" lines must repeat) can push the prompt past the budget."""
ATTRIBUTION_QUOTE_CHARS = 100
"""Characters of a reply quoted in a turn prompt's "Since your last turn" block."""
ATTRIBUTION_MAX_ENTRIES = 12
"""Entries listed in that block; the rest are counted ("… and N more")."""

INTERRUPTION_HEADER = (
    "[Roundtable interrupted — session closed. Partial history up to interruption:]"
)
"""Header of the text injected into S1 when S2 is deleted (spec §7.2, exact)."""
CANCELLED_HEADER = "[Roundtable cancelled — partial history up to cancellation:]"
"""Header of the text delivered when a cancel stops the debate without an observer."""
REPETITION_TEXT = "Roundtable ended due to repetition — agents reached an impasse"
"""What S1 is told when loop detection ended the debate (spec §7.5, exact)."""

PARTIAL_ENTRY_CHARS = 2000
"""Characters of each response in an interruption/cancellation text."""
TRUNCATED_MARK = "… [truncated, full text above in this session]"
"""Appended to a response cut in the observer prompt (the full text stays in S2)."""
TRUNCATED_MARK_S2 = "… [truncated, full text in the roundtable session]"
"""Appended to a response cut in a text delivered to S1 (the full text is in S2, not S1)."""

EXTEND_CONTINUATION_PREFIXES: tuple[str, ...] = (
    "debate more",
    "continue",
    "continuing",
    "dive deeper",
    "dig deeper",
    "go deeper",
    "keep going",
    "keep debating",
    "keep discussing",
    "carry on",
    "elaborate",
    "expand on",
    "more on",
    "more about",
    "discuss more",
    "go further",
)
"""Openings that make an ``extend`` prompt a continuation of the current topic (spec §9).

Matched case-insensitively on whole words after leading whitespace and punctuation are stripped
and inner whitespace is collapsed ("**Continue:** …" and "continue." match, "Continuous
delivery …" does not). Any other prompt is a new topic. The spec names the first three families
("Debate more", "Continue", "Dive deeper"); the others are common phrasings of the same intent.
"""

_OPENING_NOTE = (
    "Note: the assistant messages in this conversation are the debaters' turns in speaking order, "
    "not only yours; each later prompt says who spoke since your last turn."
)
_LAST_ROUND = "[System] This is the last prompt — finalize your thoughts"
_NOBODY = "Nobody has spoken since your last turn."


# ── small text helpers ──────────────────────────────────────────────────────────────────────────


def _collapse(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) replaced by one space."""
    return " ".join(text.split())


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch)[0] == "P"


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _clip_bytes(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 form fits in ``max_bytes`` (whole characters)."""
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text
    return raw[: max(max_bytes, 0)].decode("utf-8", errors="ignore")


def _cap(text: str, max_chars: int, mark: str) -> str:
    """``text`` cut to ``max_chars`` characters with ``mark`` appended when it was cut."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars].rstrip() + mark


# ── titles ──────────────────────────────────────────────────────────────────────────────────────


def default_title(prompt: str) -> str:
    """The generated S2 title ``"(Roundtable) - " + first 80 characters of the prompt`` (spec §3).

    Args:
        prompt: the roundtable topic, any length.

    Rules: whitespace (newlines included) is collapsed; a prompt of at most 80 characters is kept
    whole; a longer one is cut at the last word boundary within 80 characters and trailing spaces
    and punctuation are removed; when the first word alone is longer than 80 characters it is cut
    hard at 80. An empty prompt gives ``"(Roundtable)"``. The result has at most 95 characters
    (≤ ``MAX_TITLE_CHARS``).
    """
    text = _collapse(prompt)
    if not text:
        return TITLE_PREFIX.rstrip(" -")
    if len(text) <= TITLE_PROMPT_CHARS:
        return TITLE_PREFIX + text
    head = text[:TITLE_PROMPT_CHARS]
    if text[TITLE_PROMPT_CHARS] != " " and " " in head:
        head = head[: head.rindex(" ")]
    elif text[TITLE_PROMPT_CHARS] != " ":
        return TITLE_PREFIX + head  # a single word longer than 80 characters: cut hard
    stripped = head.rstrip()
    while stripped and (_is_punct(stripped[-1]) or stripped[-1].isspace()):
        stripped = stripped[:-1]
    return TITLE_PREFIX + (stripped or head.rstrip())


# ── extend mode (spec §9) ───────────────────────────────────────────────────────────────────────


def infer_extend_mode(prompt: str) -> ExtendMode:
    """Whether an ``extend`` prompt continues the topic or starts a new one (spec §9 heuristic).

    Args:
        prompt: the prompt passed with ``sessionID``.

    Returns:
        ``"continuation"`` when, after leading whitespace and punctuation are stripped, the prompt
        starts (case-insensitively, on a word boundary) with one of
        :data:`EXTEND_CONTINUATION_PREFIXES`; otherwise ``"new-topic"``.
    """
    i = 0
    while i < len(prompt) and (prompt[i].isspace() or _is_punct(prompt[i])):
        i += 1
    text = " ".join(prompt[i : i + 200].split()).casefold()
    for prefix in EXTEND_CONTINUATION_PREFIXES:
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            if not rest or not rest[0].isalnum():
                return "continuation"
    return "new-topic"


def extend_topic(original: str, new: str, mode: ExtendMode) -> str:
    """The topic used by the rounds of an extension (spec §9).

    Args:
        original: the topic in force before the extension.
        new: the prompt passed with the extension.
        mode: from :func:`infer_extend_mode` (or given explicitly).

    ``continuation`` → ``"Original topic: {original}\\n\\nContinuation: {new}"``;
    ``new-topic`` → the new challenge, with a pointer to the earlier discussion, which is already
    in the session's conversation (the spec's inline ``{history}`` is not repeated).
    """
    if mode == "continuation":
        return f"Original topic: {original}\n\nContinuation: {new}"
    return f"Previous discussion history is above in this session.\n\nNew challenge: {new}"


def effective_topic(state: RoundtableState, round_index: int) -> str:
    """The topic of round ``round_index`` (0-indexed), taking ``state.extensions`` into account.

    The extension with the largest ``from_round`` ≤ ``round_index`` applies (spec §9). A
    continuation refers to the *base* topic in force before it: ``state.prompt``, or the prompt of
    the latest new-topic extension before it (continuations do not nest).
    """
    base = state.prompt
    topic = state.prompt
    for ext in sorted(state.extensions, key=lambda e: e.from_round):
        if ext.from_round > round_index:
            break
        topic = extend_topic(base, ext.prompt, ext.mode)
        if ext.mode == "new-topic":
            base = ext.prompt
    return topic


# ── turn prompt (spec §6) ───────────────────────────────────────────────────────────────────────


def _quote(entry: HistoryEntry, max_chars: int) -> str:
    # Only a bounded prefix is collapsed: a quote needs ``max_chars`` characters, and a reply can
    # be megabytes (splitting all of it on every prompt blocked the event loop).
    head = entry.response[: 16 * max_chars + 64]
    text = _collapse(head)
    if len(head) < len(entry.response) and len(text) <= max_chars:
        text += " …"
    if not text:
        if entry.tool_calls:
            names = ", ".join(dict.fromkeys(t.tool_name for t in entry.tool_calls))
            return f"[used tools: {_collapse(names)}]"
        return "[no text]"
    return _cap(text, max_chars, "…")


def _attribution(entry: HistoryEntry, max_bytes: int) -> str | None:
    """One "Since your last turn" line within ``max_bytes``, or ``None`` if even its head is
    too long."""
    who = _collapse(entry.agent)
    if entry.kind == "user":
        head = "- the user (a person at the table) wrote: "
    elif entry.kind == "interjection":
        head = f"- {who}, answering the user: "
    elif entry.kind == "observer":
        head = f"- the observer summarised the debate (after round {entry.round}): "
    elif entry.has_error and not entry.cut_off:
        error = _collapse(entry.error or "error")
        head = f"- {who} (round {entry.round}) failed: "
        body = _cap(error, ATTRIBUTION_QUOTE_CHARS, "…")
        line = head + body
        if _utf8_len(line) <= max_bytes:
            return line
        room = max_bytes - _utf8_len(head) - _utf8_len("…")
        if room < 0:
            return None
        return head + _clip_bytes(body, room).rstrip() + "…"
    elif entry.cut_off:
        head = f"- {who} (round {entry.round}) was cut off at the time limit: "
    else:
        head = f"- {who} (round {entry.round}): "
    quote = _quote(entry, ATTRIBUTION_QUOTE_CHARS)
    line = f"{head}“{quote}”"
    if _utf8_len(line) <= max_bytes:
        return line
    room = max_bytes - _utf8_len(head) - _utf8_len("“…”")
    if room < 0:
        return None
    return f"{head}“{_clip_bytes(quote, room).rstrip()}…”"


def _share(wants: list[int], total: int) -> list[int]:
    """Split ``total`` bytes among lines wanting ``wants`` bytes: short lines get what they want,
    the others an equal share of the rest (water-filling)."""
    caps = list(wants)
    if sum(wants) <= total:
        return caps
    remaining, left = total, len(wants)
    for i in sorted(range(len(wants)), key=lambda k: wants[k]):
        share = remaining // left if left else 0
        caps[i] = min(wants[i], share)
        remaining -= caps[i]
        left -= 1
    return caps


def _since_block(since: Sequence[HistoryEntry], opening: bool, budget: int) -> str:
    """The attribution block within ``budget`` bytes (best effort when the budget is tiny)."""
    if not since:
        return "" if opening else _NOBODY
    header = "So far:" if opening else "Since your last turn:"
    total = len(since)
    n = min(total, ATTRIBUTION_MAX_ENTRIES)
    while n > 0:
        more = total - n
        more_line = f"… and {more} more (see the conversation above)" if more else ""
        fixed = _utf8_len(header) + (_utf8_len(more_line) + 1 if more_line else 0)
        caps = _share(
            [_utf8_len(_attribution(e, 1 << 20) or "") + 1 for e in since[:n]], budget - fixed
        )  # +1: the newline before each line
        lines = [_attribution(e, cap - 1) for e, cap in zip(since[:n], caps, strict=True)]
        if all(line is not None for line in lines):
            body = [header, *(line for line in lines if line is not None)]
            if more_line:
                body.append(more_line)
            return "\n".join(body)
        n -= 1
    return f"{total} contribution(s) since your last turn: see the conversation above."


def turn_prompt(
    state: RoundtableState,
    *,
    round_index: int,
    seat: int,
    since: Sequence[HistoryEntry],
    opening: bool,
) -> str:
    """The prompt that gives the turn to ``state.agents[seat]`` in round ``round_index`` (spec §6).

    Args:
        state: the roundtable (agents, total_rounds, prompt, extensions).
        round_index: 0-indexed round; shown 1-based ("Round 2/3").
        seat: index into ``state.agents``.
        since: the entries (seat turns, user messages, interjections) added to the conversation
            since this seat's last turn, oldest first.
        opening: True for the very first turn of the roundtable: adds one sentence explaining that
            the assistant messages of the conversation are the debaters' turns.

    Layout: roster line, ``[Topic]`` (:func:`effective_topic`), ``Round N/M | Current agent: X``,
    ``You are X. Speak only as X.``, the attribution block, and the last-round line in the last
    round only. The orchestration text is bounded (:data:`TURN_ORCHESTRATION_BUDGET`, see the
    module docstring); the topic is not.
    """
    agents = [_collapse(a) for a in state.agents]
    name = agents[seat]
    total = state.total_rounds
    roster = (
        "[System] You are participating in a roundtable debate. "
        f"Agents ({' → '.join(agents)}) will discuss the topic below in {total} round(s)."
    )
    topic = effective_topic(state, round_index)
    head = [roster, f"[Topic] {topic}", ""]
    position = [f"Round {round_index + 1}/{total} | Current agent: {name}"]
    position.append(f"You are {name}. Speak only as {name}.")
    if opening:
        position.append(_OPENING_NOTE)
    tail = [_LAST_ROUND] if round_index + 1 >= total else []

    end = ["", *tail] if tail else []
    skeleton = "\n".join([*head, *position, *end])
    used = _utf8_len(skeleton) - _utf8_len(topic) + 1  # +1: the newline before the block
    block = _since_block(since, opening, TURN_ORCHESTRATION_BUDGET - used)
    return "\n".join([*head, *position, *([block] if block else []), *end])


# ── attributed history (observer, interruption, cancellation) ───────────────────────────────────


def _entry_block(entry: HistoryEntry, per_entry_chars: int, mark: str) -> str:
    """One ``── agent · Round N ──`` block: header, response (capped), tools, files, error."""
    who = _collapse(entry.agent)
    if entry.kind == "user":
        header = "── the user ──"
    elif entry.kind == "interjection":
        header = f"── {who} · reply to the user ──"
    elif entry.kind == "observer":
        header = f"── observer · summary after round {entry.round} ──"
    else:
        header = f"── {who} · Round {entry.round} ──"
        if entry.cut_off:  # a cut-off turn also has has_error; its partial text is kept
            why = "by the cancel" if "cancel" in (entry.error or "") else "at the time limit"
            header = f"── {who} · Round {entry.round} · CUT OFF {why} ──"
        elif entry.has_error:
            header = f"── {who} · Round {entry.round} · FAILED ──"
    lines = [header]
    response = entry.response.strip()
    if response:
        lines.append(_cap(response, per_entry_chars, mark))
    for tool in entry.tool_calls:
        preview = _cap(tool.output_preview.strip(), TOOL_OUTPUT_PREVIEW_MAX, "…")
        preview = preview.replace("\n", "\n    ")  # keep multi-line output inside the block
        lines.append(f"  [tool {tool.tool_name}] {preview}")
    lines.extend(f"  [file] {f}" for f in entry.files)
    if entry.cut_off:
        reason = (
            "the roundtable was cancelled"
            if "cancel" in (entry.error or "")
            else "the turn reached the time limit"
        )
        lines.append(f"  [cut off: {reason}; partial text above]")
    elif entry.has_error:
        lines.append(f"  [error] {_cap(entry.error or 'the turn failed', 500, '…')}")
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


def _stop_reason(state: RoundtableState) -> str | None:
    """Why the debate stopped early, for the observer; ``None`` when it ran to completion."""
    reason = state.end_reason
    if reason is None or reason == EndReason.COMPLETED:
        return None
    texts = {
        EndReason.REPETITION: "the agents started repeating themselves (repetition detected), "
        "so they reached an impasse",
        EndReason.ALL_FAILED: f"every agent failed in round {_failed_round(state)}",
        EndReason.CANCELLED: "the user cancelled it",
        EndReason.SESSION_DELETED: "the roundtable session was closed",
        EndReason.PARENT_DELETED: "the main session was closed",
    }
    return texts.get(reason)


def _observer_context(state: RoundtableState) -> list[str]:
    lines = [f"Topic: {state.prompt}"]
    for ext in sorted(state.extensions, key=lambda e: e.from_round):
        kind = "continuation" if ext.mode == "continuation" else "new topic"
        lines.append(f"From round {ext.from_round + 1} ({kind}): {ext.prompt}")
    lines.append(f"Participants in speaking order: {', '.join(state.agents)}")
    reason = _stop_reason(state)
    if reason:
        lines.append(
            f"The debate stopped before all {state.total_rounds} round(s) because {reason}. "
            "Say so in the executive summary."
        )
    return lines


_SECTIONS = (
    "1. **Executive summary** (2-3 sentences)\n"
    "2. **Key points** raised by each participant\n"
    "3. **Decisions or convergences** reached\n"
    "4. **Remaining open questions**\n"
    "5. **Suggested next steps**"
)


def observer_prompt(
    state: RoundtableState, history: Sequence[HistoryEntry], *, per_entry_chars: int = 4000
) -> str:
    """The built-in observer's prompt: spec §8 ``DEFAULT_OBSERVER_PROMPT`` and the debate.

    Args:
        state: the roundtable (topic, extensions, agents, end reason).
        history: the entries to consolidate, oldest first.
        per_entry_chars: characters of each response kept; longer ones end with
            ``"… [truncated, full text above in this session]"``.

    The five sections are the spec's; "Debate:" is followed by one block per entry
    (``── pm · Round 1 ──`` + response, tool previews, files, failures and cut-offs marked,
    ``── the user ──`` for a person's messages). When the debate did not complete, a line says why.
    """
    parts = [
        "You are an impartial roundtable observer.",
        "Consolidate the debate below into:",
        "",
        _SECTIONS,
        "",
        *_observer_context(state),
        "",
        "Debate:",
        _history_text(history, per_entry_chars, TRUNCATED_MARK),
    ]
    return "\n".join(parts)


def named_observer_prompt(
    state: RoundtableState,
    history: Sequence[HistoryEntry],
    *,
    observer: str,
    per_entry_chars: int = 4000,
) -> str:
    """The prompt for an explicit observer agent (spec §8 "Explicit observer").

    Args:
        observer: the observing agent's name (``state.observer``).
        Other arguments as :func:`observer_prompt`.
    """
    parts = [
        f"Your role: {_collapse(observer)}. Provide an executive summary of the roundtable debate "
        "below as its observer: you do not debate, you consolidate. Structure it as:",
        "",
        _SECTIONS,
        "",
        *_observer_context(state),
        "",
        "Debate:",
        _history_text(history, per_entry_chars, TRUNCATED_MARK),
    ]
    return "\n".join(parts)


# ── texts for S1 and toasts ─────────────────────────────────────────────────────────────────────


class UsageTable(TypedDict):
    """Totals of :func:`usage_table`."""

    perAgent: dict[str, Usage]
    perRound: dict[int, Usage]
    total: Usage


def usage_table(history: Sequence[HistoryEntry]) -> UsageTable:
    """Total the ``usage`` of ``history`` per agent name, per (1-based) round and overall.

    Returns:
        ``{"perAgent": {agent: Usage}, "perRound": {round: Usage}, "total": Usage}``; keys in
        order of first appearance. A person's messages (kind ``user``) are not counted.
    """
    per_agent: dict[str, Usage] = {}
    per_round: dict[int, Usage] = {}
    total = Usage()
    for e in history:
        if e.kind == "user":
            continue
        per_agent[e.agent] = per_agent.get(e.agent, Usage()).plus(e.usage)
        per_round[e.round] = per_round.get(e.round, Usage()).plus(e.usage)
        total = total.plus(e.usage)
    return {"perAgent": per_agent, "perRound": per_round, "total": total}


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


def _usage_label(u: Usage) -> str:
    """``1.2k in / 340 out · $0.0012``: in = input + cache read/write, out = output + reasoning."""
    tokens_in = u.input + u.cache_read + u.cache_write
    return f"{_tokens(tokens_in)} in / {_tokens(u.output + u.reasoning)} out · {_cost(u.cost)}"


def _empty(u: Usage) -> bool:
    return u.total_tokens + u.cache_read + u.cache_write == 0 and u.cost == 0


def _usage_footer(history: Sequence[HistoryEntry]) -> str | None:
    groups: dict[str, Usage] = {}
    total = Usage()
    for e in history:
        if e.kind == "user":
            continue
        label = "observer" if e.kind == "observer" else _collapse(e.agent)
        groups[label] = groups.get(label, Usage()).plus(e.usage)
        total = total.plus(e.usage)
    if _empty(total):
        return None
    items = [f"{name}: {_usage_label(u)}" for name, u in groups.items() if not _empty(u)]
    return "Usage — " + " | ".join([*items, f"total: {_usage_label(total)}"])


def _end_line(state: RoundtableState) -> str | None:
    """The S1 line stating why the roundtable did not complete (spec §7.5 text for repetition)."""
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
    }
    return texts.get(reason, f"Roundtable ended: {reason}")


def result_text(state: RoundtableState, *, usage_footer: bool) -> str:
    """What S1 (the orchestrator) receives when the roundtable ends.

    Layout: ``Roundtable {sessionID} — {title}``; the end reason when not completed (spec §7.5
    exact text for repetition); a blank line; ``state.summary`` (when there is no summary, the
    attributed history, each response capped at 2000 characters); with ``usage_footer``, one
    ``Usage — pm: 1.2k in / 340 out · $0.0012 | … | total: …`` line from the history's usage
    (omitted when nothing was recorded).
    """
    lines = [f"Roundtable {state.session_id} — {_collapse(state.title)}"]
    end = _end_line(state)
    if end:
        lines.append(end)
    lines.append("")
    summary = (state.summary or "").strip()
    if summary:
        lines.append(summary)
    else:
        lines.append("No consolidated summary. Partial history:")
        lines.append(_history_text(state.history, PARTIAL_ENTRY_CHARS, TRUNCATED_MARK_S2))
    if usage_footer:
        footer = _usage_footer(state.history)
        if footer:
            lines.extend(["", footer])
    return "\n".join(lines)


def interruption_text(state: RoundtableState) -> str:
    """The text injected into S1 when S2 is closed mid-debate (spec §7.2, exact header).

    The attributed partial history follows, each response capped at 2000 characters.
    """
    history = _history_text(state.history, PARTIAL_ENTRY_CHARS, TRUNCATED_MARK_S2)
    return f"{INTERRUPTION_HEADER}\n{history}"


def cancelled_text(state: RoundtableState) -> str:
    """The text delivered when a cancel stops the debate without an observer.

    ``"[Roundtable cancelled — partial history up to cancellation:]"`` and the attributed partial
    history, each response capped at 2000 characters.
    """
    history = _history_text(state.history, PARTIAL_ENTRY_CHARS, TRUNCATED_MARK_S2)
    return f"{CANCELLED_HEADER}\n{history}"


def failure_toast(agent: str, round_number: int, next_agent: str | None) -> str:
    """The toast shown when a seat's turn fails (spec §7.1).

    Args:
        agent: the failed seat's agent name.
        round_number: 1-based round.
        next_agent: the agent that speaks next, or ``None`` when nobody does.

    ``"DEV failed on Round 2. Skipping to RV."`` / ``"DEV failed on Round 2."``.
    """
    text = f"{agent.upper()} failed on Round {round_number}."
    if next_agent is not None:
        text += f" Skipping to {next_agent.upper()}."
    return text
