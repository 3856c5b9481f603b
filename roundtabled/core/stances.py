"""Stances: which seats' labels name the same position (docs/deliberation.md, "Stances").

Two seats that agree rarely write the same label ("modular monolith" / "Modular monolith first" /
"a modular monolith, for now"). The tally, ``consensus`` and ``until: "converged"`` therefore
compare *stances*: groups of labels that name the same thing. A label's folded form
(:func:`stance_key`) drops case, emphasis, punctuation, articles and hedges ("for now", "first",
"initially"); two labels name the same stance (:func:`same_stance`) when

- their polarity is the same (a label with a negation — ``not``, ``no``, ``never``, ``don't``,
  ``against``, ``without``, ``avoid`` … — never joins one without: ``do not split payments`` is
  not ``split payments``), **and**
- the numbers they contain are the same numbers, compared as numbers (``12`` is never ``112``,
  ``12.0`` is ``12``), **and**
- their folded forms are equal, or their words are, filler aside (``go with``, ``we should``),
  or one's words are all among the other's (*containment*: the
  shorter has at least :data:`CONTAINMENT_MIN_WORDS` words and the longer adds no qualifier such
  as ``later``, ``only``, ``partially``), or their character-bigram similarity
  (:func:`roundtabled.core.similarity.jaccard_bigrams`) is at least :data:`SIMILARITY_THRESHOLD`.

:func:`group` takes the connected groups of that relation over the labels it is given, so the
result depends only on the set of labels (never their order), grouping a group's labels again
changes nothing, and — every link keeping polarity and numbers — no group mixes a label with its
negation or two different numbers. Each group is named by one of its own labels
(:func:`group`: the most frequent folded form, then the shortest, then the first in Unicode
order), which is the ``stance`` of the result.

A label that names no stance — a seat's name (``Position: PM — …``), the word ``position`` or
``stance``, an unfilled placeholder, or the topic copied — counts as no position
(:func:`no_stance_reason`); the result says so for that seat.

Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from roundtabled.core.similarity import jaccard_bigrams

__all__ = [
    "CONTAINMENT_MIN_WORDS",
    "SIMILARITY_THRESHOLD",
    "SeatStance",
    "group",
    "no_stance_reason",
    "numbers",
    "same_stance",
    "seat_stances",
    "stance_key",
]

SIMILARITY_THRESHOLD = 0.75
"""Character-bigram Jaccard similarity of two folded labels from which they name one stance
(spelling variants: ``micro-services`` / ``microservices``, ``monolith`` / ``monoliths``)."""
CONTAINMENT_MIN_WORDS = 2
"""Words the shorter label must have for containment to join two labels (``split`` alone is in
``split later`` but is not its stance)."""

_ARTICLES = frozenset({"a", "an", "the"})
# Hedges a seat adds to a stance it shares: removed before comparing (longest first).
_HEDGES = (
    "for the time being",
    "for the moment",
    "in the short term",
    "to begin with",
    "to start with",
    "as a first step",
    "for now",
    "at first",
    "to start",
    "initially",
    "first",
)
_NEGATORS = frozenset(
    {"not", "no", "never", "dont", "against", "without", "avoid", "reject", "nor", "neither"}
)
# Words that change what a shared stance means: a longer label adding one is not contained.
_QUALIFIERS = frozenset(
    {
        "later",
        "now",
        "soon",
        "immediately",
        "eventually",
        "next",
        "partially",
        "partly",
        "fully",
        "only",
        "except",
        "but",
        "instead",
        "unless",
        "more",
        "less",
        "before",
        "after",
        "until",
        "gradually",
        "never",
        "maybe",
        "perhaps",
        *_NEGATORS,
    }
)
# Words that carry no stance of their own ("go with microservices" is "microservices").
_FILLER = frozenset(
    {
        "we", "should", "would", "i", "recommend", "go", "with", "choose", "opt", "for", "let",
        "lets", "us", "to", "of", "approach", "strategy", "plan", "option", "do", "our", "my",
        "stay", "adopt", "pick", "use",
    }
)  # fmt: skip
# Words around a bare answer: "the answer is 12" is the stance "12".
_ANSWER_WORDS = frozenset(
    {"answer", "final", "result", "is", "equals", "equal", "total", "value", "x", "it"}
)
# Words that name the label's slot instead of a stance.
_SLOT_WORDS = frozenset(
    {
        "position",
        "my position",
        "final position",
        "our position",
        "stance",
        "my stance",
        "label",
        "short label",
        "answer",
        "final answer",
        "conclusion",
        "summary",
        "verdict",
        "decision",
        "none",
        "n/a",
        "na",
        "tbd",
        "undecided",
    }
)

_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# A number: digits with an optional decimal part, or a bare decimal part (".5" is 0.5) that no
# letter, digit or dot precedes (the "3" of "1.2.3" and of "v.3" is no number of its own).
_NUMBER_CLEAN = re.compile(r"(?<!\.)(?<![^\W_])[-−]?\d+(?:\.\d+)?|(?<![^\W_.])[-−]?\.\d+")
_WORD = re.compile(r"[^\W_]+")
_PLACEHOLDER = re.compile(r"^<[^<>]*>$|^\[[^\[\]]*\]$|^\{[^{}]*\}$")


def _fold(label: str) -> str:
    """NFKC, case-folded, negations spelled out (``don't`` → ``do not``), other apostrophes
    joined (``team's`` → ``teams``), whitespace collapsed."""
    text = unicodedata.normalize("NFKC", label).casefold()
    text = text.replace("’", "'").replace("‘", "'")
    text = re.sub(r"\b(?:won't|wont)\b", "will not", text)
    text = re.sub(r"\b(?:can't|cant|cannot)\b", "can not", text)
    text = re.sub(r"\b(\w+)n't\b", r"\1 not", text)
    text = re.sub(r"\b(do|does|did|should|would|is|are)nt\b", r"\1 not", text)
    text = re.sub(r"(\w)'(\w)", r"\1\2", text)
    return " ".join(text.split())


def numbers(label: str) -> tuple[str, ...]:
    """The numbers in ``label`` as canonical decimal strings, sorted (``"12.0 or 3"`` →
    ``("12", "3")``; ``"1,000"`` is one thousand; a minus sign before a number is kept)."""
    text = _THOUSANDS.sub("", _fold(label)).replace("−", "-")
    out: list[str] = []
    for m in _NUMBER_CLEAN.finditer(text.replace(",", ".")):
        try:
            value = Decimal(m.group(0))
        except InvalidOperation:  # pragma: no cover - the pattern only matches numbers
            continue
        if value == value.to_integral_value():
            out.append(str(int(value)))
        else:
            out.append(format(value.normalize(), "f"))
    return tuple(sorted(out))


def _words(folded: str) -> list[str]:
    return _WORD.findall(folded)


def stance_key(label: str) -> str:
    """The folded form of ``label`` used for comparison.

    Unicode NFKC, case-folded, markdown emphasis and punctuation dropped, articles (``a``,
    ``an``, ``the``) and hedges (``for now``, ``first``, ``initially``, ``to start`` …) removed,
    words separated by one space. A label that is a number with words around it (``the answer is
    12``, ``x = 12.0``) folds to the number alone (``12``); a label that is only an article or a
    hedge (the choice ``A``) keeps its words.
    """
    text = _THOUSANDS.sub("", _fold(label)).replace("−", "-")
    nums = numbers(label)
    words = _words(text)
    if nums:
        rest = [w for w in words if not w.replace(".", "").isdigit() and w not in _ANSWER_WORDS]
        rest = [w for w in rest if w not in _ARTICLES]  # "the 12" is 12
        if not rest:
            return " ".join(nums)
    joined = " " + " ".join(words) + " "
    for hedge in _HEDGES:
        joined = joined.replace(f" {hedge} ", " ")
    kept = joined.split()
    # An article precedes a word; a last "a" is a letter (``option A``).
    folded = " ".join(w for i, w in enumerate(kept) if w not in _ARTICLES or i == len(kept) - 1)
    # A label that is only an article or a hedge ("A" as a choice, "First") is that word.
    return folded or " ".join(words)


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _content(key: str) -> set[str]:
    """The stemmed words of a folded label without filler (``go with``, ``we should``); all
    its stemmed words when that leaves none."""
    words = {_stem(w) for w in key.split()}
    return (words - _FILLER) or words


def _negated(key: str) -> bool:
    return any(w in _NEGATORS for w in key.split())


_Unit = tuple[str, tuple[str, ...]]
"""What a label is compared by: its folded form and its numbers."""


def _unit(label: str) -> _Unit:
    # Of the label as displayed: a stance's name then has the unit of the labels it names.
    shown = _clean(label)
    return stance_key(shown), numbers(shown)


def _same_units(ua: _Unit, ub: _Unit) -> bool:
    (ka, na), (kb, nb) = ua, ub
    if not ka or not kb:
        return False
    if _negated(ka) != _negated(kb) or na != nb:
        return False
    if ka == kb:
        return True
    wa, wb = _content(ka), _content(kb)
    if wa == wb:
        return True
    small, large = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    if len(small) >= CONTAINMENT_MIN_WORDS and small <= large and not (large - small) & _QUALIFIERS:
        return True
    if (wa ^ wb) & _QUALIFIERS:
        return False
    if ka.replace(" ", "") == kb.replace(" ", ""):
        return True  # micro-services / microservices
    # Otherwise only spelling variants: every word the two do not share has a near twin.
    only_a, only_b = wa - wb, wb - wa
    if not all(any(jaccard_bigrams(x, y) >= 0.5 for y in only_b) for x in only_a):
        return False
    if not all(any(jaccard_bigrams(y, x) >= 0.5 for x in only_a) for y in only_b):
        return False
    return jaccard_bigrams(ka, kb) >= SIMILARITY_THRESHOLD


def same_stance(a: str, b: str) -> bool:
    """True when labels ``a`` and ``b`` name the same stance (the module docstring's rule).

    Symmetric; reflexive for every label with a non-empty :func:`stance_key`.
    """
    return _same_units(_unit(a), _unit(b))


def _clean(label: str) -> str:
    """``label`` for display: whitespace collapsed, surrounding emphasis/quotes/periods off."""
    text = " ".join(unicodedata.normalize("NFKC", label).split())
    chars = " \t\"'`*_.,;:!?«»“”‘’"
    kept = text.strip(chars)
    start = len(text) - len(text.lstrip(chars))
    if kept[:1].isdigit() and start and text[start - 1] in ".,":
        # A leading decimal point is the number's: ".5" is 0.5, and ",5" too, as numbers() reads
        # a decimal comma.
        return text[start - 1] + kept
    return kept


def group(labels: Iterable[str]) -> dict[str, str]:
    """Every label of ``labels`` → the name of its stance.

    Args:
        labels: labels as written (repeats count toward naming a group: a label held by more
            seats names it).

    Returns:
        ``{label: stance}`` for each distinct label with a non-empty :func:`stance_key` (others
        are left out). A stance is named by one of its labels, cleaned for display
        (surrounding emphasis, quotes and periods removed): the folded form held most often,
        then the shortest, then the first in Unicode order; among the labels with that form, the
        cleaned label written most often, then the shortest, then the first in Unicode order.
        Depends only on the multiset of ``labels``.
    """
    counts = Counter(label for label in labels if stance_key(label))
    units = sorted({_unit(label) for label in counts})
    of = {label: _unit(label) for label in counts}
    shown = Counter({c: 0 for c in map(_clean, counts)})
    for label, n in counts.items():
        shown[_clean(label)] += n
    rep_label = {
        u: min(
            {_clean(lbl) for lbl in counts if of[lbl] == u}, key=lambda t: (-shown[t], len(t), t)
        )
        for u in units
    }
    held = Counter({u: sum(n for lbl, n in counts.items() if of[lbl] == u) for u in units})
    parent = {u: u for u in units}

    def find(u: _Unit) -> _Unit:
        while parent[u] != u:
            parent[u] = parent[parent[u]]
            u = parent[u]
        return u

    for i, ua in enumerate(units):
        for ub in units[i + 1 :]:
            ra, rb = find(ua), find(ub)
            if ra != rb and _same_units(ua, ub):
                parent[max(ra, rb)] = min(ra, rb)
    members: dict[_Unit, list[_Unit]] = {}
    for u in units:
        members.setdefault(find(u), []).append(u)
    name: dict[_Unit, str] = {}
    for root, us in members.items():
        best = min(us, key=lambda u: (-held[u], len(u[0]), u))
        name[root] = rep_label[best]
    return {label: name[find(of[label])] for label in counts}


INSTRUCTION_PHRASES = ("finalize your thoughts",)
"""Words of the daemon's own turn prompts (``roundtabled/core/prompts.py``, the last round's
line) that a small model copies as its label ("Finalizing Your Thoughts"): such a label names no
stance. Folded (:func:`stance_key`)."""
_ROUND_HEADER = re.compile(r"^(?:round|turn) \d+ (?:of )?\d+$")
"""A label that is the turn header's round counter ("Round 1/1", "round 2 of 3"; words only, as
:func:`_words` leaves it), copied from the prompt's header: no stance."""
_SPEAKER = re.compile(
    r"^(?:the )?(?:agent|seat|panell?ist|debater|speaker|participant|member) [a-z0-9]{1,2}$"
)
"""A label that names a speaker by role and letter ("Agent B", "Seat 2"; words only, as
:func:`_words` leaves it): a small local model names itself so when its seats are ``seat-a``,
``seat-b`` …; no stance."""
INSTRUCTION_SIMILARITY = 0.7
"""Bigram Jaccard similarity from which a label counts as one of :data:`INSTRUCTION_PHRASES`."""


def no_stance_reason(label: str, *, seats: Sequence[str], topic: str = "") -> str | None:
    """Why ``label`` names no stance, or ``None`` when it names one.

    Args:
        label: the label as written.
        seats: every seat's agent name (a label that is a seat's name, with or without
            ``'s position``, names the speaker, not a stance).
        topic: the roundtable's topic in force (a label that copies it names the question, not
            an answer: equal once folded to a topic of four words or more, or four words or
            more, 90 % of them the topic's, holding 70 % of the topic's words).

    Returns:
        ``"the seat's name"`` / ``"a speaker's name"`` (``Agent B``) / ``"the word
        “position”"``-style reason, ``"a placeholder"``, ``"the topic copied"``, ``"no words"``;
        ``None`` for a real stance.
    """
    folded = _fold(label).strip(" \t\"'`*_.,;:!?()«»“”‘’")
    if not stance_key(label):
        return "no words"
    if _PLACEHOLDER.match(folded) or folded in {"...", "…", "<short label>"}:
        return "a placeholder"
    plain = " ".join(_words(folded))
    names = {" ".join(_words(_fold(s))) for s in seats}
    for suffix in ("", " s position", "s position", " position", " s stance", " stance"):
        if plain.endswith(suffix) and plain[: len(plain) - len(suffix)] in names:
            return "the seat's name"
    if _SPEAKER.match(plain):
        return "a speaker's name"
    if plain in _SLOT_WORDS or plain in {f"{w} {s}" for w in ("the", "my") for s in _SLOT_WORDS}:
        return f"the word “{plain}”"
    key = stance_key(label)
    if any(
        jaccard_bigrams(key, phrase) >= INSTRUCTION_SIMILARITY for phrase in INSTRUCTION_PHRASES
    ):
        return "the prompt's instruction copied"
    if _ROUND_HEADER.match(plain):
        return "the round header copied"
    topic_key = stance_key(topic)
    if topic_key:
        # A short topic is a proposal its own words can answer ("Ship?" / "ship"): copying it
        # counts only from four words on.
        if key == topic_key and len(topic_key.split()) >= 4:
            return "the topic copied"
        tw, lw = set(topic_key.split()), set(key.split())
        shared = len(lw & tw)
        if len(lw) >= 4 and shared >= 0.9 * len(lw) and shared >= 0.7 * len(tw):
            return "the topic copied"
    return None


@dataclass(frozen=True, slots=True)
class SeatStance:
    """One seat's stance: ``label`` as written (``None``: it stated none); ``stance`` the name
    of its group (``None``: no stance); ``no_stance`` why a stated label counts as none."""

    agent: str
    label: str | None
    stance: str | None
    no_stance: str | None = None


def seat_stances(
    labels: Mapping[str, str | None],
    *,
    seats: Sequence[str],
    topic: str = "",
    also: Iterable[str] = (),
) -> dict[str, SeatStance]:
    """Each seat's stance among the labels on the table.

    Args:
        labels: seat → label as written (``None``: no label). Only these seats are grouped and
            returned; a caller that counts some seats only (e.g. the seats free to change their
            mind) passes those.
        seats: every seat's name (for :func:`no_stance_reason`).
        topic: the topic in force.
        also: more labels grouped together with these (e.g. the previous round's, so that two
            rounds' stances compare); they are not returned.

    Returns:
        ``{seat: SeatStance}`` in the order of ``labels``.
    """
    reasons = {
        a: (no_stance_reason(lbl, seats=seats, topic=topic) if lbl is not None else None)
        for a, lbl in labels.items()
    }
    pool = [lbl for a, lbl in labels.items() if lbl is not None and reasons[a] is None]
    extra = [lbl for lbl in also if no_stance_reason(lbl, seats=seats, topic=topic) is None]
    names = group([*pool, *extra])
    out: dict[str, SeatStance] = {}
    for a, lbl in labels.items():
        stance = names.get(lbl) if lbl is not None and reasons[a] is None else None
        out[a] = SeatStance(agent=a, label=lbl, stance=stance, no_stance=reasons[a])
    return out
