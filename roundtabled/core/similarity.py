"""Loop detection: Jaccard similarity of character bigrams over cleaned text (docs/behaviour.md,
'Loops').

The debate ends "due to repetition" when the latest seat response and the previous one are more
than ``threshold`` similar (spec: ``> 0.85``)::

    similarity = |bigrams(a) ∩ bigrams(b)| / |bigrams(a) ∪ bigrams(b)|

Invariants
- The comparison runs on :func:`clean_text` output: markdown formatting (fences, headings, emphasis,
  bullets, links, inline code) is removed, whitespace collapsed, text lower-cased, so two answers
  that differ only in formatting compare as equal (docs/behaviour.md, 'Loops').
- :func:`jaccard_bigrams` is symmetric and lies in ``[0, 1]``. Two texts without any bigram (empty,
  or a single character after cleaning) score ``0.0``: an empty reply is not a loop.
- Everything is linear in the input size. Every regular expression below is written so that the
  scans started at different positions never overlap (character classes exclude the character that
  starts the next attempt, possessive quantifiers never backtrack), so a hostile 1 MB reply cannot
  make it quadratic. A 1 MB text is cleaned and reduced to bigrams in well under a second, so no
  input is capped.
- Pure: no I/O, no asyncio.
"""

from __future__ import annotations

import functools
import re
from itertools import pairwise

__all__ = ["bigrams", "clean_text", "is_loop", "jaccard_bigrams"]

# Whole fence lines (```python, ~~~): the marker and its info string are formatting.
_FENCE = re.compile(r"^[ \t]*+(?:`{3,}+|~{3,}+)[^\n]*+$", re.MULTILINE)
# Heading markers at the start of a line: "## Title" -> "Title".
_HEADING = re.compile(r"^[ \t]{0,3}+#{1,6}+(?=[ \t]|$)", re.MULTILINE)
# Block quotes: "> text" -> "text".
_QUOTE = re.compile(r"^[ \t]*+(?:>[ \t]?+)++", re.MULTILINE)
# List bullets: "- x", "* x", "+ x", "1. x", "2) x".
_BULLET = re.compile(r"^[ \t]*+(?:[-*+]|\d{1,9}+[.)])[ \t]++", re.MULTILINE)
# Horizontal rules: "---", "***", "___" (with optional spaces).
_RULE = re.compile(r"^[ \t]*+(?:[-*_][ \t]*+){3,}+$", re.MULTILINE)
# Links and images: "[text](url)" / "![alt](url)" -> "text". The text class excludes both
# brackets and the url class excludes brackets and parentheses, so scans never overlap.
_LINK = re.compile(r"!?\[([^\[\]\n]*+)\]\([^()\[\]\s]*+(?:[ \t]++\"[^\"\n]*+\")?+\)")
# Emphasis markers: every "*", and "_" runs that touch a non-word character ("_x_", not "a_b").
_EMPHASIS = re.compile(r"\*++|(?<!\w)_++|_++(?!\w)")
# Inline code and strike-through markers.
_MARKS = re.compile(r"[`~]++")


def clean_text(text: str) -> str:
    """Strip markdown formatting from ``text``, collapse whitespace and lower-case it
    (docs/behaviour.md, 'Loops').

    Args:
        text: any text (a model's reply), up to a few MB.

    Returns:
        The words of ``text`` without fence lines, heading ``#``, block-quote ``>``, list bullets,
        horizontal rules, emphasis ``*``/``_``, inline-code backticks and link targets
        (``[t](u)`` becomes ``t``), separated by single spaces, lower-cased.
    """
    s = _FENCE.sub(" ", text)
    s = _RULE.sub(" ", s)
    s = _HEADING.sub("", s)
    s = _QUOTE.sub("", s)
    s = _BULLET.sub("", s)
    s = _LINK.sub(r"\1", s)
    s = _EMPHASIS.sub("", s)
    s = _MARKS.sub("", s)
    return " ".join(s.split()).lower()


def bigrams(text: str) -> set[str]:
    """The set of adjacent character pairs of ``text`` (no cleaning; see :func:`clean_text`).

    ``"abab"`` gives ``{"ab", "ba"}``; a text shorter than two characters gives the empty set.
    """
    return {a + b for a, b in pairwise(text)}


def jaccard_bigrams(a: str, b: str) -> float:
    """Jaccard similarity of the bigram sets of the cleaned ``a`` and ``b`` (docs/behaviour.md,
    'Loops').

    Returns:
        A float in ``[0, 1]``; symmetric; ``1.0`` for texts equal after cleaning (two characters
        or more); ``0.0`` when both bigram sets are empty (an empty reply is not a loop).
    """
    sa = _cleaned_bigrams(a)
    sb = _cleaned_bigrams(b)
    if not sa and not sb:
        return 0.0
    inter = len(sa & sb)
    return inter / (len(sa) + len(sb) - inter)


_MEMO_CHARS = 65_536
"""A debate compares each reply twice (as the newest, then as the one before a later reply):
replies up to this many characters keep their bigram set in a small memo (at most
``16 × 64 KiB`` of text held)."""


@functools.lru_cache(maxsize=16)
def _memo_bigrams(text: str) -> frozenset[str]:
    return frozenset(bigrams(clean_text(text)))


def _cleaned_bigrams(text: str) -> frozenset[str] | set[str]:
    return _memo_bigrams(text) if len(text) <= _MEMO_CHARS else bigrams(clean_text(text))


def is_loop(latest: str, previous: str, threshold: float) -> bool:
    """True when ``latest`` repeats ``previous``: similarity strictly above ``threshold``.

    Args:
        latest: the newest seat response (plain text).
        previous: the response it is compared with (docs/behaviour.md, 'Loops': the last response of
        the previous
            round).
        threshold: in ``(0, 1]``; spec default ``0.85`` (``Options.loop_threshold``). With
            ``1.0`` nothing is ever a loop.
    """
    return jaccard_bigrams(latest, previous) > threshold
