"""The texts of a seat's turn: its prompt, the topic it debates (an extend's too), the title, and
the toast of a failed turn (docs/behaviour.md). The observer's prompts and the texts S1
receives are built from the history in :mod:`roundtabled.core.result`.

Invariants
- Pure and deterministic: the same arguments give the same text; no clock, no I/O, no asyncio.
- No prompt contains the state/META block (it lives in an ignored part, see
  :mod:`roundtabled.core.state`).
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
from typing import Literal

from roundtabled.core.positions import Change, position_of, spoke
from roundtabled.core.result import (
    cut_text,
    one_line,
)
from roundtabled.core.sides import side_instruction
from roundtabled.core.stances import group
from roundtabled.core.state import TITLE_PREFIX, HistoryEntry, RoundtableState
from roundtabled.core.verdict import no_stance

__all__ = [
    "ATTRIBUTION_MAX_ENTRIES",
    "ATTRIBUTION_QUOTE_CHARS",
    "CLOSING_FORMS",
    "CLOSING_LINE",
    "DEFAULT_CLOSING_FORM",
    "EXTEND_CONTINUATION_PREFIXES",
    "STANCES_BLOCK_BYTES",
    "STANCE_LABEL_BYTES",
    "TITLE_PREFIX",
    "TITLE_PROMPT_CHARS",
    "TURN_ORCHESTRATION_BUDGET",
    "ExtendMode",
    "closing_line",
    "default_title",
    "effective_topic",
    "extend_topic",
    "failure_toast",
    "infer_extend_mode",
    "stances_block",
    "turn_prompt",
]

ExtendMode = Literal["continuation", "new-topic"]

"""Prefix of a generated title (docs/behaviour.md, 'The call')."""
TITLE_PROMPT_CHARS = 80
"""Characters of the prompt kept in a generated title, cut at a word boundary (docs/behaviour.md,
'The call')."""

TURN_ORCHESTRATION_BUDGET = 2048
"""Bytes (UTF-8) of a turn prompt outside the topic text, for ≤ 6 agents with ≤ 100-byte names,
every block included (the stances on the table, :data:`STANCES_BLOCK_BYTES` at most; the
attribution block gets the bytes left).

With longer names the attribution block shrinks to one counting line, and only the names (which
the roster and the "You are X" lines must repeat) can push the prompt past the budget."""
ATTRIBUTION_QUOTE_CHARS = 100
"""Characters of a reply quoted in a turn prompt's "Since your last turn" block."""
ATTRIBUTION_MAX_ENTRIES = 12
"""Entries listed in that block; the rest are counted ("… and N more")."""


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
"""Openings that make an ``extend`` prompt a continuation of the current topic (docs/behaviour.md,
'Extend').

Matched case-insensitively on whole words after leading whitespace and punctuation are stripped
and inner whitespace is collapsed ("**Continue:** …" and "continue." match, "Continuous
delivery …" does not). Any other prompt is a new topic. The spec names the first three families
("Debate more", "Continue", "Dive deeper"); the others are common phrasings of the same intent.
"""

OPENING_NOTE = (
    "Note: the assistant messages in this conversation are the debaters' turns in speaking order, "
    "not only yours; each later prompt says who spoke since your last turn."
)
"""The note of a seat's first turn (``turn_text``); ``bench.prompt_forms`` reuses it."""
LAST_ROUND = "[System] This is the last prompt — finalize your thoughts"
"""The line of a seat's last turn (spec wording; ``turn_text``)."""
_NOBODY = "Nobody has spoken since your last turn."


# ── small text helpers ──────────────────────────────────────────────────────────────────────────


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


# ── titles ──────────────────────────────────────────────────────────────────────────────────────


def default_title(prompt: str) -> str:
    """The generated S2 title ``"(Roundtable) - " + first 80 characters of the prompt``
    (docs/behaviour.md, 'The call').

    Args:
        prompt: the roundtable topic, any length.

    Rules: whitespace (newlines included) is collapsed; a prompt of at most 80 characters is kept
    whole; a longer one is cut at the last word boundary within 80 characters and trailing spaces
    and punctuation are removed; when the first word alone is longer than 80 characters it is cut
    hard at 80. An empty prompt gives ``"(Roundtable)"``. The result has at most 95 characters
    (≤ ``MAX_TITLE_CHARS``).
    """
    text = one_line(prompt)
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


# ── extend mode (docs/behaviour.md, 'Extend') ─────────────────────────────────────────────────────


def infer_extend_mode(prompt: str) -> ExtendMode:
    """Whether an ``extend`` prompt continues the topic or starts a new one (docs/behaviour.md,
    'Extend' heuristic).

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
    """The topic used by the rounds of an extension (docs/behaviour.md, 'Extend').

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

    The extension with the largest ``from_round`` ≤ ``round_index`` applies (docs/behaviour.md,
    'Extend'). A
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


# ── turn prompt (docs/behaviour.md, 'What each seat sees') ────────────────────────────────────────

CLOSING_FORMS: dict[str, str] = {
    "argue-then-position": (
        "Make your argument first, reasoning it through in full. Then, as the very last line "
        "of your reply, write: Position: <short label> — <one sentence> (confidence N/10)"
    ),
    "position-line": (
        "End your reply with one line: Position: <short label> — <one sentence> (confidence N/10)"
    ),
}
"""The closing request's forms, by name. A seat asked only for the one-line form tends to write
that line alone, without working the question out (docs/deliberation.md, "The closing line");
the default asks for the argument first and the line last."""
DEFAULT_CLOSING_FORM = "argue-then-position"
"""The form every turn prompt uses (:func:`closing_line`)."""


def closing_line(form: str = DEFAULT_CLOSING_FORM) -> str:
    """The closing request of a turn prompt in ``form`` (a key of :data:`CLOSING_FORMS`).

    Raises:
        KeyError: ``form`` is not a known form.
    """
    return CLOSING_FORMS[form]


CLOSING_LINE = closing_line()
"""The closing request of every turn prompt, last in the prompt: the daemon records the line
(docs/result.md)."""
STANCES_BLOCK_BYTES = 420
"""UTF-8 bytes of the "Stances on the table" block at most (stances held by most seats first,
the rest counted: "… and N more")."""
STANCE_LABEL_BYTES = 60
"""UTF-8 bytes of each stance's label quoted in that block."""
CHANGE_LABEL_BYTES = 24
"""UTF-8 bytes of each label quoted in the change question: with them the question is never
longer than the opening note, which it replaces (an opening turn has no earlier position)."""


def _change_question(change: Change) -> str:
    def label(text: str) -> str:
        text = one_line(text)
        cut = _clip_bytes(text, CHANGE_LABEL_BYTES - 3)
        return text if _utf8_len(text) <= CHANGE_LABEL_BYTES else cut + "…"

    return (
        f"Your position changed in round {change.round} (“{label(change.from_label)}” → "
        f"“{label(change.to_label)}”); begin with: Changed: <what changed your mind>"
    )


def _quote(entry: HistoryEntry, max_chars: int) -> str:
    # Only a bounded prefix is collapsed: a quote needs ``max_chars`` characters, and a reply can
    # be megabytes (splitting all of it on every prompt blocked the event loop).
    head = entry.response[: 16 * max_chars + 64]
    text = one_line(head)
    if len(head) < len(entry.response) and len(text) <= max_chars:
        text += " …"
    if not text:
        if entry.tool_calls:
            names = ", ".join(dict.fromkeys(t.tool_name for t in entry.tool_calls))
            return f"[used tools: {one_line(names)}]"
        return "[no text]"
    return cut_text(text, max_chars, "…")


def _attribution(entry: HistoryEntry, max_bytes: int) -> str | None:
    """One "Since your last turn" line within ``max_bytes``, or ``None`` if even its head is
    too long."""
    who = one_line(entry.agent)
    if entry.kind == "user":
        head = "- the user (a person at the table) wrote: "
    elif entry.kind == "interjection":
        head = f"- {who}, answering the user: "
    elif entry.kind == "observer":
        head = f"- the observer summarised the debate (after round {entry.round}): "
    elif entry.has_error and not entry.cut_off:
        error = one_line(entry.error or "error")
        head = f"- {who} (round {entry.round}) failed: "
        body = cut_text(error, ATTRIBUTION_QUOTE_CHARS, "…")
        line = head + body
        if _utf8_len(line) <= max_bytes:
            return line
        room = max_bytes - _utf8_len(head) - _utf8_len("…")
        if room < 0:
            return None
        return head + _clip_bytes(body, room).rstrip() + "…"
    elif entry.cut_off:
        why = "by the cancel" if entry.cut_by_cancel else "at the time limit"
        head = f"- {who} (round {entry.round}) was cut off {why}: "
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


_STANCES_HEAD = (
    "Stances on the table (seats holding each). If you hold one of them, reuse its label "
    "exactly in your Position line; otherwise name a new one:"
)


def _table(state: RoundtableState) -> list[tuple[str, list[str]]]:
    """``[(stance, seats)]``: each seat's latest stated position (a label naming no stance is
    skipped), grouped by stance, held by most seats first, then by name."""
    latest: dict[str, str] = {}
    for e in state.history:
        if e.kind != "turn" or not spoke(e):
            continue
        pos = position_of(e)
        if pos is not None and no_stance(state, pos.label) is None:
            latest[e.agent] = pos.label
    names = group(latest.values())
    held: dict[str, list[str]] = {}
    for agent in state.agents:
        if agent in latest:
            held.setdefault(names[latest[agent]], []).append(agent)
    return sorted(held.items(), key=lambda kv: (-len(kv[1]), kv[0].casefold(), kv[0]))


def stances_block(state: RoundtableState, max_bytes: int = STANCES_BLOCK_BYTES) -> str:
    """The "Stances on the table" block of a turn prompt ('' when no seat stated a stance).

    Args:
        state: the roundtable (its history's stated positions, its seats and topic).
        max_bytes: UTF-8 bytes of the block at most (:data:`STANCES_BLOCK_BYTES`).

    Returns:
        The head line, then one line per stance, ``- “label”: pm, dev`` (labels cut at
        :data:`STANCE_LABEL_BYTES`; a line longer than the room is cut), held by most seats
        first; the stances that do not fit are counted (``… and N more``).
    """
    table = _table(state)
    if not table:
        return ""
    lines = [_STANCES_HEAD]
    for i, (stance, seats) in enumerate(table):
        label = one_line(stance)
        if _utf8_len(label) > STANCE_LABEL_BYTES:
            label = _clip_bytes(label, STANCE_LABEL_BYTES - 3).rstrip() + "…"
        line = f"- “{label}”: {', '.join(one_line(a) for a in seats)}"
        rest = len(table) - i - 1
        more = f"… and {rest} more" if rest else ""
        room = max_bytes - _utf8_len("\n".join(lines)) - 1 - (_utf8_len(more) + 1 if more else 0)
        if _utf8_len(line) > room:
            if room >= 24 and i == 0:
                lines.append(_clip_bytes(line, room - 3).rstrip() + "…")
                continue
            lines.append(f"… and {len(table) - i} more")
            break
        lines.append(line)
    text = "\n".join(lines)
    return text if _utf8_len(text) <= max_bytes else _clip_bytes(text, max_bytes)


def turn_prompt(
    state: RoundtableState,
    *,
    round_index: int,
    seat: int,
    since: Sequence[HistoryEntry],
    opening: bool,
    change: Change | None = None,
    digest: str = "",
) -> str:
    """The prompt that gives the turn to ``state.agents[seat]`` in round ``round_index``
    (docs/behaviour.md, 'What each seat sees').

    Args:
        state: the roundtable (agents, total_rounds, prompt, extensions).
        round_index: 0-indexed round; shown 1-based ("Round 2/3").
        seat: index into ``state.agents``.
        since: the entries (seat turns, user messages, interjections) added to the conversation
            since this seat's last turn, oldest first.
        opening: True for the very first turn of the roundtable: adds one sentence explaining that
            the assistant messages of the conversation are the debaters' turns.
        change: this seat's label change in its previous turn that came without a reason
            (:func:`roundtabled.core.positions.unexplained_change`): one line asks what changed its
            mind, answered on a ``Changed:`` line (docs/result.md). Ignored on the opening turn.
        digest: the recent-context digest of the rounds left out of the request
            (:func:`roundtabled.core.deliberation.digest`, ``context: "recent"``), its own
            paragraph before the topic; ``""`` adds nothing. Capped on its own, outside
            :data:`TURN_ORCHESTRATION_BUDGET`.

    Layout: the roundtable's framing first — roster line, ``Round N/M | Current agent: X``,
    ``You are X. Speak only as X.``, the seat's assigned side when it has one
    (:func:`roundtabled.core.sides.side_instruction`), the opening note or the change question,
    the attribution block, from round 2 on the stances on the table (:func:`stances_block`), the
    last-round line in the last round only, the digest —, then ``[Topic]``
    (:func:`effective_topic`), and last the closing request (:data:`CLOSING_LINE`: the argument
    first, the ``Position:`` line last). The question is the last thing a seat reads before it
    answers: with the framing after the topic, a small model answered with the closing line
    alone (docs/deliberation.md, "The closing line"; bench/README.md, "prompt_forms").
    The orchestration text is bounded (:data:`TURN_ORCHESTRATION_BUDGET`, see the
    module docstring); the topic is not.
    """
    agents = [one_line(a) for a in state.agents]
    name = agents[seat]
    total = state.total_rounds
    roster = (
        "[System] You are participating in a roundtable debate. "
        f"Agents ({' → '.join(agents)}) will discuss the topic below in {total} round(s)."
    )
    topic = effective_topic(state, round_index)
    head = [roster, f"Round {round_index + 1}/{total} | Current agent: {name}"]
    head.append(f"You are {name}. Speak only as {name}.")
    side = state.options.sides.get(state.agents[seat])
    if side is not None:
        head.append(side_instruction(one_line(side)))
    if opening:
        head.append(OPENING_NOTE)
    elif change is not None:
        head.append(_change_question(change))
    table = stances_block(state) if round_index >= 1 else ""
    framing_tail = [table] if table else []
    if round_index + 1 >= total:
        framing_tail.append(LAST_ROUND)
    end = ["", f"[Topic] {topic}", "", CLOSING_LINE]
    skeleton = "\n".join([*head, *framing_tail, *end])
    used = _utf8_len(skeleton) - _utf8_len(topic) + 1  # +1: the newline before the block
    block = _since_block(since, opening, TURN_ORCHESTRATION_BUDGET - used)
    extra = ["", digest] if digest else []
    return "\n".join([*head, *([block] if block else []), *framing_tail, *extra, *end])


def failure_toast(agent: str, round_number: int, next_agent: str | None) -> str:
    """The toast shown when a seat's turn fails (docs/behaviour.md, 'A seat fails').

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
