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

import re
import unicodedata
from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

LABEL_MAX = 80
"""Characters of a label kept (a longer one is cut: labels are meant to be short)."""
POSITION_MAX = 400
"""Characters of the one-sentence position kept."""

_LINE = re.compile(r"^[\s>*_#`-]*position\s*[:：]\s*(?P<rest>.+?)\s*$", re.IGNORECASE)
_CONFIDENCE = re.compile(
    r"[\(\[]?\s*(?:confidence|conf\.?)\s*[:=]?\s*"
    r"(?P<num>\d+(?:[.,]\d+)?)\s*(?P<scale>/\s*10|/\s*100|%)?\s*[\)\]]?\s*[.*_`]*\s*$",
    re.IGNORECASE,
)
_SPLIT = re.compile(r"\s+[—–-]{1,2}\s+|\s*[—–]\s*|\s+-\s+|\s*:\s+")


class Position(BaseModel):
    """One seat's position at the end of one turn.

    ``label``: the short label as written (trimmed, at most ``LABEL_MAX`` characters);
    ``position``: the one sentence ('' when the line had only a label);
    ``confidence``: 0.0–1.0, ``None`` when the line states none.
    """

    model_config = ConfigDict(frozen=True)

    label: str = Field(min_length=1)
    position: str = ""
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)

    @property
    def key(self) -> str:
        """The label normalised for comparison (see :func:`normalise_label`)."""
        return normalise_label(self.label)


def normalise_label(label: str) -> str:
    """``label`` for comparison: Unicode NFKC, case-folded, whitespace collapsed, surrounding
    quotes, emphasis and punctuation removed. ``"  Modular  Monolith." → "modular monolith"``."""
    text = unicodedata.normalize("NFKC", label).casefold()
    text = " ".join(text.split())
    return text.strip(" \t\"'`*_.,;:!?()[]{}«»“”‘’")


def _confidence(raw: str, scale: str | None) -> float | None:
    try:
        value = float(raw.replace(",", "."))
    except ValueError:
        return None
    scale = (scale or "").replace(" ", "")
    if scale == "/100" or scale == "%":
        value /= 100.0
    elif scale == "/10" or value > 1.0:
        value /= 10.0
    if not 0.0 <= value <= 1.0:
        return None
    return round(value, 3)


def parse_position(text: str) -> Position | None:
    """The position stated in a reply, or ``None`` when it states none.

    Args:
        text: the reply's plain text (any length; only lines starting with ``Position:`` count).

    Returns:
        The *last* ``Position:`` line's label, sentence and confidence. The label is the text
        before the first dash (``—``, ``–``, `` - ``) or colon; the confidence is a trailing
        ``(confidence N/10)`` (also ``N/100``, ``N%``, ``0.N``, ``conf N``).
    """
    found: str | None = None
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            found = m.group("rest")
    if found is None:
        return None
    rest = found.strip().strip("*_`").strip()
    confidence: float | None = None
    cm = _CONFIDENCE.search(rest)
    if cm:
        confidence = _confidence(cm.group("num"), cm.group("scale"))
        rest = rest[: cm.start()].rstrip(" ,;.([—–-")
    parts = _SPLIT.split(rest, maxsplit=1)
    label = parts[0].strip().strip("*_`\"'").strip()
    sentence = parts[1].strip().strip("*_`").strip() if len(parts) > 1 else ""
    label = label[:LABEL_MAX].strip()
    if not normalise_label(label):
        return None
    return Position(label=label, position=sentence[:POSITION_MAX], confidence=confidence)


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
            start of the reply); emphasis around it is dropped; at most ``CHANGED_MAX`` characters.
    """
    for line in text.splitlines():
        m = _CHANGED.match(line)
        if m:
            why = m.group("why").strip().strip("*_`").strip()
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


def position_of(entry: LedgerEntry) -> Position | None:
    """The position a turn stated: the recorded one, else parsed from its text; ``None`` for a
    turn that did not speak (a failed or empty turn states nothing)."""
    if not spoke(entry):
        return None
    return entry.position if entry.position is not None else parse_position(entry.response)


def _changed_of(entry: LedgerEntry) -> str | None:
    return entry.changed if entry.changed is not None else parse_changed(entry.response)


def seat_turns(history: Sequence[LedgerEntry], agent: str) -> list[LedgerEntry]:
    """``agent``'s seat turns, oldest first."""
    return [e for e in history if e.kind == "turn" and e.agent == agent]


def changes(history: Sequence[LedgerEntry], agent: str) -> list[Change]:
    """Every label change of ``agent``, oldest first, with the seat's reason where it gave one.

    A change compares a turn's label with the seat's last *stated* label (a turn without a
    ``Position:`` line changes nothing: it is unknown, not a new position). The reason is the
    ``Changed:`` line of the changing turn, else of the seat's next answered turn (whose prompt
    asks for it, see :func:`unexplained_change`); a reason is used for one change only.
    """
    turns = [e for e in seat_turns(history, agent) if spoke(e)]
    out: list[Change] = []
    last: Position | None = None
    used: set[int] = set()
    for i, entry in enumerate(turns):
        pos = position_of(entry)
        if pos is None:
            continue
        if last is not None and pos.key != last.key:
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


def unexplained_change(history: Sequence[LedgerEntry], agent: str) -> Change | None:
    """The change stated in ``agent``'s last answered turn when that turn gave no reason: its next
    turn prompt asks, in one line, what changed its mind. ``None`` otherwise."""
    turns = [e for e in seat_turns(history, agent) if spoke(e)]
    if not turns:
        return None
    found = changes(history, agent)
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
