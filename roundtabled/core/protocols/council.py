"""``council``: independent answers, an anonymised peer ranking, and the observer as chair.

1. Every seat answers the topic once, independently and in parallel (the independent opening,
   :mod:`roundtabled.core.opening`).
2. Every seat then ranks the *other* seats' answers, in its own session (where it sees its own
   answer and nothing of the others' but what this prompt shows), again in parallel: the answers
   are anonymised — lettered, in an order that differs per seat, every seat's name in their text
   replaced by ``[a seat]`` — and the seat gives one line per answer, ``Rank N: Answer X —
   reason`` (:func:`ranking_prompt`, :func:`parse_ranking`).
3. The rankings are aggregated (:func:`aggregate`: each answer's mean rank over the valid
   rankings of it, 1 = best) and the observer, as the chair, writes the decision from the answers
   and the aggregate rank (:func:`observer_lines`).

Why: the anonymised peer review of Karpathy's llm-council (2025), where each model ranks the
others' answers without knowing whose they are, so a model cannot favour a name; the chair then
writes the final answer. A seat that failed, gave no ranking or a ranking that does not rank
every answer exactly once is named (``degraded``), never counted. Only a seat that answered
ranks, and only when it has two answers or more to rank; when no seat does (fewer than three
answers), no ranking round runs and the result says so.

Refused: ``rounds``, ``until``, ``opening``, ``context``, ``sides``, ``budget``,
``adaptiveThreshold``, an extend (the vote's reasons, plus: the ranking round is not a debate).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from roundtabled.core.protocols import Protocol, SecondRound, vote
from roundtabled.core.state import HistoryEntry, RoundtableState

NAME = "ranking"
"""The kind and the header word of the ranking turns (``── pm · ranking ──``)."""
LETTERS = "ABCDEFGHIJKL"
ANSWER_CHARS = 4000
"""Characters of each answer shown to a ranking seat (a longer one is cut, and marked)."""
HIDDEN_NAME = "[a seat]"
RANK_LINE = re.compile(
    r"^[\s>*_-]*(?:rank\s*)?#?\s*(\d{1,2})\s*[.):]?\s*[:\-–—]?\s*\**\s*(?:answer\s+)?\**"
    r"([A-L])\b\**\s*[:.\-–—]*\s*(.*)$",
    re.IGNORECASE | re.MULTILINE,
)


def answered(state: RoundtableState) -> list[HistoryEntry]:
    """The opening answers a seat can rank: the seats' round-1 turns that stored text without
    an error, in seat order."""
    rnd = state.openings
    entries = rnd.entries() if rnd is not None else []
    return [e for e in entries if not e.has_error and e.response.strip()]


def lineup(state: RoundtableState, seat: int) -> list[tuple[str, int]]:
    """The answers ``seat`` ranks, as ``(letter, author seat)``: every other seat's answer,
    starting after the ranking seat's own place (so each answer is first for some seat: no
    answer always gets the first look)."""
    others = [e.seat for e in answered(state) if e.seat is not None and e.seat != seat]
    n = len(state.agents)
    others.sort(key=lambda s: (s - seat) % n)
    return [(LETTERS[i], s) for i, s in enumerate(others)]


def scrub(text: str, names: Sequence[str]) -> str:
    """``text`` with every seat name (whole words, any case) replaced by :data:`HIDDEN_NAME`:
    an answer that signs itself would tell whose it is."""
    for name in sorted(names, key=len, reverse=True):
        text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", HIDDEN_NAME, text, flags=re.I)
    return text


def ranking_prompt(state: RoundtableState, seat: int) -> str:
    """The ranking turn of ``seat``: the topic, the other answers lettered and anonymised, and
    the lines to write (``""``: the seat sits the round out, its own answer failed or it has
    fewer than two answers to rank)."""
    from roundtabled.core.prompts import effective_topic  # prompts → result → verdict → here

    line = lineup(state, seat)
    if len(line) < 2 or seat not in {e.seat for e in answered(state)}:
        return ""  # a seat whose own answer failed does not judge the others
    by_seat = {e.seat: e for e in answered(state)}
    blocks = []
    for letter, author in line:
        text = scrub(by_seat[author].response.strip(), state.agents)
        if len(text) > ANSWER_CHARS:
            text = text[:ANSWER_CHARS] + " … [cut]"
        blocks.append(f"Answer {letter}:\n{text}")
    letters = [letter for letter, _ in line]
    example = "\n".join(
        f"Rank {i}: Answer {letter} — <one sentence: why>" for i, letter in enumerate(letters, 1)
    )
    return "\n\n".join(
        [
            "You answered the topic below on your own. The other members of the council answered "
            "it too; their answers follow, anonymised (lettered in an order of no meaning, names "
            "hidden). Rank them by how well they answer the topic: correctness first, then "
            "reasoning and usefulness. Do not guess who wrote which.",
            *blocks,
            f"[Topic] {effective_topic(state, 0)}",
            f"End with exactly {len(letters)} lines, best first, each answer once:\n{example}",
        ]
    )


def parse_ranking(text: str, letters: Sequence[str]) -> dict[str, tuple[int, str]] | None:
    """``letter → (rank, reason)`` from a ranking reply, or ``None`` when it does not rank
    every one of ``letters`` exactly once with the ranks 1…n (the last line naming a letter
    counts)."""
    found: dict[str, tuple[int, str]] = {}
    for m in RANK_LINE.finditer(text):
        letter = m.group(2).upper()
        if letter in letters:
            found[letter] = (int(m.group(1)), m.group(3).strip().strip("*").strip())
    if set(found) != set(letters):
        return None
    if sorted(r for r, _ in found.values()) != list(range(1, len(letters) + 1)):
        return None
    return found


@dataclass(frozen=True, slots=True)
class Ranked:
    """One answer's place: its ``author``, its ``mean`` rank (``None``: nobody ranked it) and
    each rank given to it, ``(ranker, rank, reason)``."""

    author: str
    mean: float | None
    ranks: tuple[tuple[str, int, str], ...]


def aggregate(
    authors: Sequence[str], rankings: Sequence[tuple[str, Sequence[tuple[str, int, str]]]]
) -> list[Ranked]:
    """The aggregate rank of each of ``authors`` from ``rankings`` (``(ranker, [(author, rank,
    reason)])``, valid ones only): its mean rank, best (lowest) first; ties and the unranked
    (last) in the order of ``authors``. Pure; the order of the rankings changes nothing."""
    given: dict[str, list[tuple[str, int, str]]] = {a: [] for a in authors}
    for ranker, ranks in rankings:
        for author, rank, reason in ranks:
            given[author].append((ranker, rank, reason))
    out = []
    for a in authors:
        ranks = sorted(given[a], key=lambda r: r[0])
        mean = round(sum(r for _, r, _ in ranks) / len(ranks), 3) if ranks else None
        out.append(Ranked(a, mean, tuple(ranks)))
    order = {a: i for i, a in enumerate(authors)}
    return sorted(out, key=lambda r: (r.mean is None, r.mean or 0.0, order[r.author]))


def rankings(state: RoundtableState) -> tuple[list[Ranked], list[tuple[str, str]]]:
    """The council's aggregate rank and the seats whose ranking counts for nothing, with why
    (failed, or not a ranking of every answer once): from the recorded ranking round."""
    authors = [state.agents[e.seat] for e in answered(state) if e.seat is not None]
    rnd = state.second_round
    valid: list[tuple[str, list[tuple[str, int, str]]]] = []
    degraded: list[tuple[str, str]] = []
    for e in rnd.entries() if rnd is not None else []:
        if e.seat is None:
            continue
        if e.has_error:
            degraded.append((e.agent, f"its ranking failed: {e.error or 'no reply'}"))
            continue
        line = lineup(state, e.seat)
        parsed = parse_ranking(e.response, [letter for letter, _ in line])
        if parsed is None:
            degraded.append((e.agent, "gave no ranking of every answer once"))
            continue
        valid.append(
            (
                e.agent,
                [(state.agents[s], *parsed[letter]) for letter, s in line],
            )
        )
    return aggregate(authors, valid), degraded


def _second_round(state: RoundtableState) -> SecondRound | None:
    texts = tuple(ranking_prompt(state, i) for i in range(len(state.agents)))
    if not any(texts):
        return None
    topic = (
        "── council: the rankings ──\n"
        "Every seat ranked the others' answers, anonymised (lettered, names hidden), without "
        "seeing another's ranking; their rankings follow."
    )
    return SecondRound(NAME, "ranking", texts, topic)


def observer_lines(state: RoundtableState) -> list[str]:
    """What the chair is told: the protocol, the aggregate rank and every reason (seats named:
    the chair decides from the answers and their standing)."""
    ranked, degraded = rankings(state)
    lines = [
        "",
        "You chair a council: each seat answered on its own, then ranked the others' answers "
        "anonymised. Write the decision from the answers and the aggregate rank below (a lower "
        "mean rank is better); say where you depart from the rank and why.",
        "Aggregate rank (mean rank of each seat's answer over the valid rankings of it):",
    ]
    for i, r in enumerate(ranked, 1):
        mean = f"{r.mean:g}" if r.mean is not None else "not ranked"
        lines.append(f"{i}. {r.author}'s answer: mean rank {mean} ({len(r.ranks)} rankings)")
        lines.extend(
            f"   - {ranker} ranked it {rank}: {reason or '(no reason)'}"
            for ranker, rank, reason in r.ranks
        )
    if state.second_round is None:
        lines.append("(No ranking round ran: fewer than three answers.)")
    lines.extend(f"Not counted: {a} ({why})" for a, why in degraded)
    return lines


PROTOCOL = Protocol(
    name="council",
    summary="independent answers, each seat ranks the others' anonymised, the observer chairs",
    refuses=vote.PROTOCOL.refuses,
    options=vote.PROTOCOL.options,
    after_opening=vote.PROTOCOL.after_opening,
    second_round=_second_round,
    observer_lines=observer_lines,
)
