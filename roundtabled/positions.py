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
