"""A seat's stated position: the closing line each turn prompt asks for, parsed leniently.

Each seat is asked to end its turn with one line::

    Position: <short label> — <one sentence> (confidence N/10)

The daemon records what it finds there per seat and round (the *position ledger*, see
``docs/result.md``). Parsing is lenient about dashes, case, spacing, markdown emphasis and the
confidence notation, but it never guesses: a reply without a ``Position:`` line has no position
(``None``), and the result says so.

Pure: no I/O. Confidence is a fraction in ``[0, 1]`` (``7/10`` → ``0.7``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from roundtabled.core.stances import same_stance

LABEL_MAX = 80
"""Characters of a label kept (a longer one is cut: labels are meant to be short)."""
POSITION_MAX = 400
"""Characters of the one-sentence position kept."""

PositionSource = Literal["position", "answer", "boxed"]

# A leading "[" or "(": small models wrap the whole closing line in brackets
# (``[Position: label — sentence]``); the closing bracket is dropped with it. A concluding word
# may lead ("Therefore, **Position: …**", seen on a small local model).
_LEAD_IN = r"(?:(?:therefore|thus|hence|so|finally|overall|in\s+(?:conclusion|summary))\s*,?\s*)?"
_LINE = re.compile(
    rf"^[\s>*_#`\[(-]*{_LEAD_IN}[\s>*_#`\[(-]*"
    r"(?:(?:final|my|our|closing|current)\s+)?position\s*[*_]*\s*"
    r"(?:[:：—–]|\s-\s|-{1,2}(?=\s))[*_]*\s*(?P<rest>.+?)\s*$",
    re.IGNORECASE,
)
_ANSWER = re.compile(
    r"^[\s>*_#`-]*(?:(?:final|my|the)\s+)?answer\s*[*_]*\s*(?:[:：=—–]|is\b)[*_]*\s*"
    r"(?P<rest>.+?)\s*$",
    re.IGNORECASE,
)
_BOXED = re.compile(r"\\boxed\s*\{(?P<rest>[^{}\n]{1,200})\}")
TRAILING_LINE = re.compile(
    r"(?:^|[\s,;:.])[*_`]*position\s*[*_]*\s*[:：][*_]*\s*(?P<rest>\S.*?)\s*$",
    re.IGNORECASE,
)
"""The closing line after a clause on the same line (``Therefore, the final answer is `11`,
Position: 11 — …``), as a small local model writes it: read on the reply's last line only, where
the closing request asks for it, and only when no line starts with ``Position:``
(docs/result.md)."""
TRAILING_LINE_CHARS = 600
"""Characters at the end of a reply's last line searched for :data:`TRAILING_LINE`."""
_NUM_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10,
}  # fmt: skip
_N = r"(?:\d+(?:[.,]\d+)?|zero|one|two|three|four|five|six|seven|eight|nine|ten)"
_CONF_VALUE = rf"(?P<num>{_N})\s*(?:(?P<per>/|out\s+of|of)\s*(?P<den>{_N})|(?P<pct>%|percent))?"
_CONFIDENCE = re.compile(
    rf"[\(\[,;]?\s*(?:confidence|conf\.?|certainty)(?:\s+level)?\s*[*_]*\s*"
    rf"(?:[:=]|is|of)?\s*[*_]*\s*{_CONF_VALUE}\s*[\)\]]?",
    re.IGNORECASE,
)
_CONFIDENT = re.compile(
    rf"[\(\[,;]?\s*{_CONF_VALUE}\s*(?:confident|sure|certain)\b\s*[\)\]]?", re.IGNORECASE
)
_TRAILING_SCORE = re.compile(
    rf"[\(\[]\s*{_CONF_VALUE}\s*[\)\]]\s*[.*_`]*\s*$|"
    rf"\s[—–-]\s*[*_]*(?P<num2>\d+)\s*/\s*10\s*[.*_`]*\s*$",
    re.IGNORECASE,
)
_SPLIT = re.compile(r"[.!?]?[*_]{2}\s+|\s+[—–-]{1,2}\s+|\s*[—–]\s*|\s+-\s+|\s*:\s+")
_SENTENCE = re.compile(r"(?<=[^\s.])[.!?]\s+(?=\S)")
_CHANGED_LINE = re.compile(
    r"^[\s>*_#`-]*(?:changed|what changed(?: my mind)?)\s*[*_]*\s*[:：][*_]*", re.I
)
# The end of a sentence: ``.``/``!``/``?`` (and closing quotes or brackets) before a space,
# outside brackets; ``e.g.``, ``i.e.``, ``etc.``, ``vs.``, ``cf.`` end none.
_REASON_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)")
_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|incl)|\b[A-Za-z])\.$", re.I)


def split_reason(text: str) -> tuple[str, str]:
    """``(reason, rest)`` of the text after ``Changed:``: the reason is its first sentence (the
    turn prompt asks for one line, "Changed: <what changed your mind>", docs/result.md); what
    follows it on the line is the turn's argument. A sentence ends at ``.``, ``!`` or ``?``
    followed by a space, outside parentheses and brackets, not after a common abbreviation
    (``e.g.``) or a single letter (``J.``). Both parts are stripped.

    ``"rv's point (six weeks settle it). The roadmap has room." →
    ("rv's point (six weeks settle it).", "The roadmap has room.")``.
    """
    depth = 0
    pos = 0
    for m in _REASON_END.finditer(text):
        chunk = text[pos : m.end()]
        opened = chunk.count("(") + chunk.count("[")
        depth = max(0, depth + opened - chunk.count(")") - chunk.count("]"))
        pos = m.end()
        word = text[max(0, m.start() - 12) : m.start() + 1]
        if depth == 0 and not _ABBREVIATION.search(word):
            return text[: m.end()].strip(), text[m.end() :].strip()
    return text.strip(), ""


class Position(BaseModel):
    """One seat's position at the end of one turn.

    ``label``: the short label as written (trimmed, at most ``LABEL_MAX`` characters);
    ``position``: the one sentence ('' when the line had only a label);
    ``confidence``: 0.0–1.0, ``None`` when the line states none;
    ``source``: where it was read (``position``: a ``Position:`` line; ``answer``: an
    ``Answer:`` line; ``boxed``: a ``\\boxed{…}`` answer);
    ``lines``: how many ``Position:`` lines the reply had (the last one counts);
    ``only_line``: the reply was that line alone (no argument before it).
    """

    model_config = ConfigDict(frozen=True)

    label: str = Field(min_length=1)
    position: str = ""
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    source: PositionSource = "position"
    lines: int = 1
    only_line: bool = False

    @property
    def key(self) -> str:
        """The label normalised for comparison (see :func:`normalise_label`)."""
        return normalise_label(self.label)


def visible(text: str) -> str:
    """``text`` without Unicode format characters (category Cf: zero-width spaces and joiners,
    the byte-order mark, soft hyphens): a label of only those is no label."""
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def normalise_label(label: str) -> str:
    """``label`` for comparison: Unicode NFKC, format characters dropped (:func:`visible`),
    case-folded, whitespace collapsed, surrounding quotes, emphasis and punctuation removed.
    ``"  Modular  Monolith." → "modular monolith"``."""
    text = visible(unicodedata.normalize("NFKC", label)).casefold()
    text = " ".join(text.split())
    return text.strip(" \t\"'`*_.,;:!?()[]{}«»“”‘’")


def _number(raw: str) -> float | None:
    word = _NUM_WORDS.get(raw.casefold())
    if word is not None:
        return float(word)
    try:
        return float(raw.replace(",", "."))
    except ValueError:
        return None


def _confidence_value(m: re.Match[str]) -> float | None:
    groups = m.groupdict()
    if groups.get("num2"):
        value = _number(groups["num2"])
        return None if value is None or value > 10 else round(value / 10, 3)
    num = _number(groups["num"] or "")
    if num is None:
        return None
    if groups.get("den"):
        den = _number(groups["den"])
        if not den:
            return None
        value = num / den
    elif groups.get("pct"):
        value = num / 100.0
    elif num <= 1.0:
        value = num
    elif num <= 10.0:
        value = num / 10.0
    else:
        value = num / 100.0
    return round(value, 3) if 0.0 <= value <= 1.0 else None


def read_confidence(text: str) -> tuple[float | None, tuple[int, int] | None]:
    """The confidence stated in ``text`` and where, read leniently.

    Accepted: ``confidence 7/10``, ``(confidence: 70%)``, ``confidence 0.7``, ``conf 7``,
    ``confidence: seven out of ten``, ``certainty 8 of 10``, ``70% confident``, and a bare
    trailing ``(7/10)`` / ``(70%)`` / `` — 7/10``. A bare number is read as a fraction up to
    1, tenths up to 10, hundredths up to 100. Nothing found (or a value outside 0–1 once
    scaled) → ``(None, …)``: an absent confidence is unknown, never a default.

    Returns:
        ``(value in [0, 1] or None, (start, end) of the matched text or None)``.
    """
    found: re.Match[str] | None = None
    for m in _CONFIDENCE.finditer(text):
        found = m
    if found is None:
        found = _CONFIDENT.search(text) or _TRAILING_SCORE.search(text)
    if found is None:
        return None, None
    return _confidence_value(found), found.span()


def _label_and_sentence(rest: str) -> tuple[str, str, float | None]:
    rest = visible(rest).strip().strip("*_`").strip()
    confidence, span = read_confidence(rest)
    if span is not None:
        rest = (rest[: span[0]] + " " + rest[span[1] :]).strip()
        rest = rest.rstrip(" ,;.([—–-*_`").strip()
    parts = _SPLIT.split(rest, maxsplit=1)
    if len(parts) == 1:
        # No dash: a multi-sentence position's first sentence is its label.
        parts = _SENTENCE.split(rest, maxsplit=1)
    label = parts[0].strip().strip("*_`\"'").strip().rstrip(".").strip("*_` ")
    sentence = parts[1].strip().strip("*_`").lstrip("—–- ").strip() if len(parts) > 1 else ""
    return label[:LABEL_MAX].strip(), sentence[:POSITION_MAX], confidence


def _only_line(text: str, index: int | None) -> bool:
    """True when every non-blank line of ``text`` other than line ``index`` is empty or markup,
    a ``Changed:`` line counting as such when it holds only its reason (its first sentence,
    :func:`split_reason`): an argument that follows the reason on that line is an argument."""
    for i, line in enumerate(text.splitlines()):
        if i == index:
            continue
        m = _CHANGED_LINE.match(line)
        if m is not None:
            line = split_reason(line[m.end() :])[1]
        if line.strip(" \t>*_#`-—–"):
            return False
    return True


def parse_position(text: str) -> Position | None:
    """The position stated in a reply, or ``None`` when it states none.

    Args:
        text: the reply's plain text (any length).

    Returns:
        From the *last* ``Position:`` line (also ``**Position:**``, ``Final position:``,
        ``Position —``); without one, a ``Position:`` after a clause on the reply's last line
        (``Therefore, the answer is 11, Position: 11 — …``); without one, the last ``Answer:``
        line (``Final answer: 12``); without
        one, the last ``\\boxed{…}``. The label is the text before the first dash (``—``,
        ``–``, `` - ``) or colon, else the first sentence; the confidence anywhere on the line
        (:func:`read_confidence`). ``lines`` counts the ``Position:`` lines (the last wins);
        ``only_line`` is true when the reply is that line alone.
    """
    lines = text.splitlines()
    found: tuple[int, str] | None = None
    count = 0
    for i, line in enumerate(lines):
        m = _LINE.match(line)
        if m:
            found = (i, m.group("rest"))
            count += 1
    source: PositionSource = "position"
    if found is None:
        last = len(lines) - 1
        while last >= 0 and not lines[last].strip():
            last -= 1
        # a closing line is short: only the end of a long last line is searched, so that a
        # reply of megabytes on one line costs no more than a short one
        end = lines[last][-TRAILING_LINE_CHARS:] if last >= 0 else ""
        cut = last >= 0 and len(lines[last]) > TRAILING_LINE_CHARS
        tail = list(TRAILING_LINE.finditer(("x" if cut else "") + end))
        if tail:
            found = (last, tail[-1].group("rest"))
            count = 1
    if found is None:
        source = "answer"
        for i, line in enumerate(lines):
            m = _ANSWER.match(line)
            if m:
                found = (i, m.group("rest"))
    if found is None:
        source = "boxed"
        boxed = list(_BOXED.finditer(text))
        if boxed:
            b = boxed[-1]
            line_no = text.count("\n", 0, b.start())
            only = _only_line(text, line_no) and lines[line_no].strip().startswith(
                ("\\boxed", "$\\boxed", "\\[\\boxed", "$$\\boxed")
            )
            label = visible(b.group("rest")).strip().strip("$ ")[:LABEL_MAX].strip()
            if not normalise_label(label):
                return None
            return Position(label=label, source="boxed", lines=0, only_line=only)
    if found is None:
        return None
    index, rest = found
    opened = lines[index].lstrip(" \t>*_#`-")[:1]
    closer = {"[": "]", "(": ")"}.get(opened)
    if closer and rest.rstrip(" *_`.").endswith(closer):
        rest = rest.rstrip(" *_`.")[:-1]
    label, sentence, confidence = _label_and_sentence(rest)
    if not normalise_label(label):
        return None
    return Position(
        label=label,
        position=sentence,
        confidence=confidence,
        source=source,
        lines=count if source == "position" else 0,
        only_line=_only_line(text, index),
    )


# ── the position ledger (per seat, per round) ──────────────────────────────────────────────────

CHANGED_MAX = 300
"""Characters of a ``Changed:`` reason kept."""

_CHANGED = re.compile(
    r"^[\s>*_#`-]*(?:changed|what changed(?: my mind)?)\s*[:：]\s*(?P<why>.+?)\s*$",
    re.IGNORECASE,
)


def parse_changed(text: str) -> str | None:
    """The reason on a reply's ``Changed: <what changed my mind>`` line, or ``None``.

    Args:
        text: the reply's plain text. The *first* such line counts (the prompt asks for it at the
            start of the reply); the reason is the line's first sentence (:func:`split_reason`:
            an argument that goes on after it on the same line is not part of it); emphasis
            around it is dropped; at most ``CHANGED_MAX`` characters.
    """
    for line in text.splitlines():
        m = _CHANGED.match(line)
        if m:
            why = split_reason(m.group("why").strip().strip("*_`").strip())[0]
            why = why.strip().strip("*_`").strip()
            if why:
                return why[:CHANGED_MAX]
    return None


class Change(BaseModel):
    """A seat's label changed between two of its turns.

    ``round``: the 1-based round of the turn that states the new label; ``from_label`` /
    ``to_label``: the labels as written; ``why``: the seat's own ``Changed:`` reason (in that turn,
    or in its next turn, which is asked for it), ``None`` when it gave none.
    """

    model_config = ConfigDict(frozen=True)

    round: int
    from_label: str
    to_label: str
    why: str | None = None


class LedgerEntry(Protocol):
    """What the ledger reads of a history entry (``roundtabled.core.state.HistoryEntry`` has it)."""

    @property
    def agent(self) -> str: ...
    @property
    def round(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def response(self) -> str: ...
    @property
    def has_error(self) -> bool: ...
    @property
    def position(self) -> Position | None: ...
    @property
    def changed(self) -> str | None: ...


def spoke(entry: LedgerEntry) -> bool:
    """True when a seat turn produced text without an error (an answer, possibly truncated)."""
    return entry.kind == "turn" and not entry.has_error and bool(entry.response.strip())


_MEMO_CHARS = 16_384
"""Replies up to this many characters keep their parsed lines in a small memo: every turn asks
the ledger about every earlier reply again (the seats' changes, the stances table), and a reply
that states no position has nothing recorded to answer from. Longer ones are parsed each time,
so the memo holds at most ``256 × 16 KiB``."""


@functools.lru_cache(maxsize=256)
def _memo_position(text: str) -> Position | None:
    return parse_position(text)


@functools.lru_cache(maxsize=256)
def _memo_changed(text: str) -> str | None:
    return parse_changed(text)


def position_of(entry: LedgerEntry) -> Position | None:
    """The position a turn stated: the recorded one, else parsed from its text; ``None`` for a
    turn that did not speak (a failed or empty turn states nothing)."""
    if not spoke(entry):
        return None
    if entry.position is not None:
        return entry.position
    text = entry.response
    return _memo_position(text) if len(text) <= _MEMO_CHARS else parse_position(text)


def _changed_of(entry: LedgerEntry) -> str | None:
    if entry.changed is not None:
        return entry.changed
    text = entry.response
    return _memo_changed(text) if len(text) <= _MEMO_CHARS else parse_changed(text)


def seat_turns(history: Sequence[LedgerEntry], agent: str) -> list[LedgerEntry]:
    """``agent``'s seat turns, oldest first."""
    return [e for e in history if e.kind == "turn" and e.agent == agent]


def changes(
    history: Sequence[LedgerEntry],
    agent: str,
    names_stance: Callable[[str], bool] | None = None,
) -> list[Change]:
    """Every label change of ``agent``, oldest first, with the seat's reason where it gave one.

    A change compares a turn's label with the seat's last *stated* label as stances (a
    rephrasing of the same stance, :func:`roundtabled.core.stances.same_stance`, is no change;
    a turn without a ``Position:`` line changes nothing: it is unknown, not a new position, and
    neither does a label for which ``names_stance`` is false — the seat's name, a placeholder:
    docs/result.md, "no position"). The reason is the ``Changed:`` line of the changing turn,
    else of the seat's next answered turn (whose prompt asks for it, see
    :func:`unexplained_change`); a reason is used for one change only.
    """
    turns = [e for e in seat_turns(history, agent) if spoke(e)]
    out: list[Change] = []
    last: Position | None = None
    used: set[int] = set()
    for i, entry in enumerate(turns):
        pos = position_of(entry)
        if pos is None or (names_stance is not None and not names_stance(pos.label)):
            continue
        if last is not None and not same_stance(pos.label, last.label):
            why = None
            if i not in used and (why := _changed_of(entry)) is not None:
                used.add(i)
            elif i + 1 < len(turns) and (why := _changed_of(turns[i + 1])) is not None:
                used.add(i + 1)
            out.append(
                Change(round=entry.round, from_label=last.label, to_label=pos.label, why=why)
            )
        last = pos
    return out


def unexplained_change(
    history: Sequence[LedgerEntry],
    agent: str,
    names_stance: Callable[[str], bool] | None = None,
) -> Change | None:
    """The change stated in ``agent``'s last answered turn when that turn gave no reason: its next
    turn prompt asks, in one line, what changed its mind. ``None`` otherwise. ``names_stance``:
    as for :func:`changes`."""
    turns = [e for e in seat_turns(history, agent) if spoke(e)]
    if not turns:
        return None
    found = changes(history, agent, names_stance)
    if found and found[-1].round == turns[-1].round and found[-1].why is None:
        return found[-1]
    return None


def final_position(
    history: Sequence[LedgerEntry], agent: str
) -> tuple[int | None, Position | None]:
    """``(round, position)`` of ``agent``'s last turn that spoke: the position is ``None`` when
    that answer has no ``Position:`` line (an older label is not carried forward: it may have been
    abandoned). ``(None, None)`` when the seat never spoke."""
    turns = [e for e in seat_turns(history, agent) if spoke(e)]
    if not turns:
        return None, None
    return turns[-1].round, position_of(turns[-1])
