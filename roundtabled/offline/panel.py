"""The offline panel: what the scripted model answers the seats and the observer of any debate, so
that every option of a roundtable shows its effect without a real model (``scripts/demo``).

A seat's turn prompt (:func:`roundtabled.core.prompts.turn_prompt`) is read for what a model would
read in it — the round (``Round N/M``), the seat, the roster, an assigned side, the digest of
hidden rounds (``context: "recent"``), whether others have spoken (``So far:``), the change
question — and answered with a short argument and a closing ``Position: <label> — <reason>
(confidence N/10)`` line (docs/result.md). The replies depend only on the prompt (a hash of the
topic, the seat and the round seeds every choice), so a test can assert them exactly, and they
differ from debate to debate:

- free seats mostly share one stance, written in their own words ("a staged rollout" /
  "Staged rollout, for now" / "staged rollout first": one stance by the rules of
  docs/deliberation.md, "Stances");
- one free seat (which one depends on the topic) opens with another stance and changes its mind
  in round 2 or 3, starting that turn with a ``Changed:`` line;
- a seat bound to ``against`` argues against in every round, ``for`` for the proposal,
  ``neutral`` weighs both; a free brief is quoted;
- with the digest of hidden rounds in its prompt a seat cites it; in round 1 a seat that saw
  others speak (a sequential opening) answers them, one that did not (an independent opening)
  says it answers on its own.

An arithmetic question (``What is the result of 2+3*4?``, what ``roundtabled eval`` asks) is
answered with a number: some seats err in the opening (they work left to right, ignoring that
``*`` binds tighter) and recheck it in a later round, so a single seat, the vote and the debate
score differently (docs/eval.md).

The observer (the ``roundtable-observer`` agent, :func:`observer_reply`) reads the daemon's tally
of stated positions from its prompt (:func:`roundtabled.core.result.observer_prompt`) and writes
the five sections and the fenced verdict, its decision the stance most free seats hold.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from roundtabled.core.scoring import evaluate_expression
from roundtabled.offline.scripted_actions import Action, Text
from roundtabled.offline.scripted_llm import CHARS_PER_TOKEN, RecordedRequest

__all__ = [
    "OBSERVER",
    "SeatPrompt",
    "arithmetic_reply",
    "observer_reply",
    "panel_reply",
    "parse_seat_prompt",
    "reply_text",
    "seat_reply",
]

OBSERVER = "roundtable-observer"
"""The built-in observer agent (installed with the tools)."""

_ROUND = re.compile(r"^Round (\d+)/(\d+) \| Current agent: (.+)$", re.M)
_ROSTER = re.compile(r"Agents \((.+?)\) will discuss")
_SIDE_NAMED = re.compile(r"^Your assigned side: (FOR|AGAINST|NEUTRAL)\b", re.M)
_SIDE_BRIEF = re.compile(r"^Your assigned side \(a brief from the user[^)]*\): (.+)$", re.M)
_DIGEST = re.compile(r"^\[Digest of round\(s\) ([^:]+):", re.M)
_DIGEST_LINE = re.compile(r"^- ([^:\n]+): [^\n]*“([^”]+)”", re.M)
_TOPIC = re.compile(r"^\[Topic\] (.*)\n\n[^\n]*\Z", re.M | re.S)
_EXPR = re.compile(r"What is the result of ([0-9+\-*]+)\?")


@dataclass(frozen=True)
class SeatPrompt:
    """What a seat's turn prompt says (:func:`parse_seat_prompt`)."""

    agent: str
    round: int
    """1-based."""
    total: int
    agents: tuple[str, ...]
    topic: str
    side: str | None = None
    """``for`` | ``against`` | ``neutral`` | a brief; ``None`` for a free seat."""
    digest_rounds: str | None = None
    """The hidden rounds the digest covers (``"2–3"``), ``None`` without a digest."""
    digest: tuple[tuple[str, str], ...] = ()
    """``(seat, its last label in the digest)``."""
    heard_others: bool = False
    """Others' turns are quoted (``So far:`` / ``Since your last turn:``)."""
    asked_why_changed: bool = False


def parse_seat_prompt(text: str) -> SeatPrompt | None:
    """Read a turn prompt (:func:`roundtabled.core.prompts.turn_prompt`); ``None`` for any
    other text (a person's message, an interjection)."""
    m = _ROUND.search(text)
    if m is None:
        return None
    roster = _ROSTER.search(text)
    agents = tuple(a.strip() for a in roster.group(1).split("→")) if roster else (m.group(3),)
    topic_m = _TOPIC.search(text)
    topic = topic_m.group(1).strip() if topic_m else ""
    side: str | None = None
    if named := _SIDE_NAMED.search(text):
        side = named.group(1).lower()
    elif brief := _SIDE_BRIEF.search(text):
        side = brief.group(1).strip()
    digest = _DIGEST.search(text)
    digest_part = text[digest.start() : text.find("[Topic]")] if digest else ""
    head = text[: text.find("[Topic]")] if "[Topic]" in text else text
    return SeatPrompt(
        agent=m.group(3).strip(),
        round=int(m.group(1)),
        total=int(m.group(2)),
        agents=agents,
        topic=topic,
        side=side,
        digest_rounds=digest.group(1).strip() if digest else None,
        digest=tuple((a, lbl) for a, lbl in _DIGEST_LINE.findall(digest_part)),
        heard_others="So far:" in head or "Since your last turn:" in head,
        asked_why_changed="Your position changed in round" in head,
    )


def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big")


# ── a debate on any topic ───────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class _Family:
    """The stances of one kind of debate: the one most seats come to (in three wordings of one
    stance), the one a dissenting seat opens with, and the sided ones."""

    main: tuple[str, str, str]
    main_why: str
    alt: str
    alt_why: str
    against: str
    against_why: str
    for_: str
    neutral: str


_FAMILIES = (
    _Family(
        main=("a staged rollout", "Staged rollout, for now", "staged rollout first"),
        main_why="prove it on one team, then widen it",
        alt="go all in this quarter",
        alt_why="a half measure doubles the cost of running two ways",
        against="do not do it this year",
        against_why="the cost and the risk outweigh what it buys",
        for_="do it, and do it this year",
        neutral="weigh a pilot against waiting",
    ),
    _Family(
        main=("a time-boxed pilot", "Time-boxed pilot first", "a time-boxed pilot, initially"),
        main_why="six weeks with a kill criterion settles it with evidence",
        alt="wait for more data",
        alt_why="we do not know enough yet to commit anything",
        against="reject the proposal",
        against_why="nothing shown so far justifies the change",
        for_="adopt the proposal now",
        neutral="a pilot or a wait, either is defensible",
    ),
    _Family(
        main=(
            "keep what works and fix the worst part",
            "Keep what works, fix the worst part",
            "keep what works and fix the worst part first",
        ),
        main_why="most of the pain comes from one place, and fixing it is cheap",
        alt="start over with a clean design",
        alt_why="patching keeps the structural debt that causes the pain",
        against="keep things as they are",
        against_why="the change costs more than the pain it removes",
        for_="make the full change",
        neutral="fixing and rebuilding both have a case",
    ),
)

_REASONS = {
    "pm": (
        "Customers feel the release delays first, and two deals wait on faster fixes.",
        "What matters to the business is a visible improvement within one quarter.",
        "Support tickets point at the same two workflows every month.",
        "A plan the sales team can explain is worth more than a perfect one.",
        "The roadmap has room for one such bet this half, not two.",
        "Partners asked for a stable interface more than for new features.",
    ),
    "dev": (
        "The code that hurts is concentrated: three modules cause most incidents.",
        "Our tests cover the core paths well enough to change them safely.",
        "The build and deploy pipeline can take one change at a time without new tooling.",
        "Shared database tables are the real coupling, not the code layout.",
        "Estimating the full change honestly gives two quarters, not one.",
        "Each step must leave the system releasable, or we stall halfway.",
    ),
    "rv": (
        "The risk nobody priced is on-call load while two systems run side by side.",
        "Audit evidence must stay in one place whatever we choose.",
        "Every boundary needs an owner, or the gaps between them become incidents.",
        "I want a kill criterion written down before we start, not after.",
        "The plan is only as good as the metric that tells us it failed.",
        "Rollback must be cheap at every step; otherwise this is a one-way door.",
    ),
}
_GENERIC = (
    "The evidence on the table favours the smaller, reversible step.",
    "Whatever we pick, a measurable checkpoint keeps us honest.",
    "The strongest argument so far is about cost over time, not cost up front.",
    "Two of the concerns raised are really one: who owns the result.",
    "A decision we can revisit in a quarter beats one we cannot.",
    "The team's capacity, not the idea, is the binding constraint.",
)


_ROUND_NOTES = (
    "That is where I start.",
    "Nothing said since moves the core of it for me.",
    "After hearing the panel, the main question is how to stage it.",
    "By now the open points are details of execution.",
    "To close: the same view, with the conditions above.",
)


def _family(topic: str) -> _Family:
    return _FAMILIES[_seed("family", topic) % len(_FAMILIES)]


def _dissent(topic: str, free: Sequence[str]) -> tuple[str | None, int]:
    """The free seat that opens with the other stance and the round it changes its mind in
    (2 or 3); no dissent with fewer than two free seats."""
    if len(free) < 2:
        return None, 0
    h = _seed("dissent", topic)
    return free[h % len(free)], 2 + (h // 7) % 2


def _label_of(p: SeatPrompt, free: Sequence[str]) -> tuple[str, str, bool]:
    """``(label, reason, changed this round)`` of seat ``p.agent`` in round ``p.round``."""
    fam = _family(p.topic)
    if p.side == "against":
        return fam.against, fam.against_why, False
    if p.side == "for":
        return fam.for_, fam.main_why, False
    if p.side == "neutral":
        return fam.neutral, "both sides have a case and the evidence is thin", False
    if p.side is not None:
        return f"as briefed: {p.side[:60]}", "I argue the brief I was given", False
    dissenter, turns_at = _dissent(p.topic, free)
    if p.agent == dissenter and p.round < turns_at:
        return fam.alt, fam.alt_why, False
    wording = fam.main[free.index(p.agent) % 3] if p.agent in free else fam.main[0]
    return wording, fam.main_why, p.agent == dissenter and p.round == turns_at


def seat_reply(p: SeatPrompt) -> str:
    """A seat's reply to the turn prompt ``p`` (a topic that is an arithmetic question gets
    :func:`arithmetic_reply`)."""
    expr = _EXPR.search(p.topic)
    if expr is not None:
        return arithmetic_reply(p, expr.group(1))
    # A prompt names only its own seat's side: the others count as free here.
    free = [a for a in p.agents if not (a == p.agent and p.side is not None)]
    label, why, changed = _label_of(p, free)
    rng = random.Random(_seed("text", p.topic, p.agent))
    pool = list(_REASONS.get(p.agent, _GENERIC))
    rng.shuffle(pool)
    # Two sentences a round, never the ones of the round before: a seat that repeats its last
    # turn would end the debate as a loop (docs/behaviour.md, "Loops").
    picked = [pool[(2 * p.round - 2) % len(pool)], pool[(2 * p.round - 1) % len(pool)]]
    others = [a for a in p.agents if a != p.agent]
    parts: list[str] = []
    if changed or p.asked_why_changed:
        who = others[rng.randrange(len(others))] if others else "the panel"
        parts.append(f"Changed: {who}'s argument convinced me ({_family(p.topic).main_why}).")
    if p.side is not None:
        parts.append(f"Arguing my assigned side ({p.side}), as asked.")
    if p.round == 1:
        if p.heard_others and others:
            parts.append(f"Having read {others[0]}'s opening, here is my view.")
        elif p.agent in p.agents and p.agents.index(p.agent) > 0:
            parts.append("I answer on my own, without having seen the other openings.")
    if p.digest_rounds is not None:
        held = "; ".join(f"{a} held “{lbl}”" for a, lbl in p.digest[:3]) or "no labels"
        parts.append(
            f"From the digest of round(s) {p.digest_rounds} (those turns are hidden from me): "
            f"{held}."
        )
    parts.extend(picked)
    parts.append(_ROUND_NOTES[(p.round - 1) % len(_ROUND_NOTES)])
    conf = 5 + _seed("conf", p.topic, p.agent, p.round) % 4
    body = " ".join(parts)
    return f"{body}\n\nPosition: {label} — {why} (confidence {conf}/10)"


# ── an arithmetic question (roundtabled eval) ───────────────────────────────────────────────────


def _left_to_right(expr: str) -> int:
    """The value of ``expr`` read strictly left to right (the classic slip: ``*`` not first)."""
    tokens = re.findall(r"\d+|[+\-*]", expr)
    value = int(tokens[0])
    for op, num in zip(tokens[1::2], tokens[2::2], strict=True):
        n = int(num)
        value = value + n if op == "+" else value - n if op == "-" else value * n
    return value


def arithmetic_reply(p: SeatPrompt, expr: str) -> str:
    """A seat's answer to ``What is the result of EXPR?`` in round ``p.round``.

    By a hash of the expression: every seat right (a quarter of the questions), one seat wrong in
    the opening (a quarter), or two seats wrong with the same slip (half: the vote is wrong too).
    A wrong seat rechecks and corrects itself in round 2, except that with two wrong seats the
    second corrects itself in round 3 only: a single seat, the vote and the debate score apart.
    """
    right = evaluate_expression(expr)
    slip = _left_to_right(expr)
    if slip == right:
        slip = right + 10
    agents = list(p.agents)
    h = _seed("arith", expr)
    pattern = h % 4
    first = (h // 4) % max(1, len(agents))
    wrong_until: dict[str, int] = {}
    if pattern == 1:
        wrong_until[agents[first]] = 2
    elif pattern >= 2 and len(agents) >= 2:
        wrong_until[agents[first]] = 2
        wrong_until[agents[(first + 1) % len(agents)]] = 3
    wrong = p.agent in wrong_until and p.round < wrong_until[p.agent]
    corrected = p.agent in wrong_until and p.round == wrong_until[p.agent]
    value = slip if wrong else right
    lines = []
    if corrected:
        lines.append(f"Changed: rechecking step by step, multiplication comes first, not {slip}.")
    if wrong:
        lines.append(f"Working left to right through {expr}, I get {value}.")
    else:
        lines.append(f"Multiplication first, then addition and subtraction: {expr} = {value}.")
    conf = 6 if wrong else 8 + h % 2
    lines += ["", f"Answer: {value}", "", f"Position: {value} — {expr} (confidence {conf}/10)"]
    return "\n".join(lines)


# ── the observer ────────────────────────────────────────────────────────────────────────────────

_TALLY = re.compile(r"^- “([^”]+)”: ([^(\n]+?) \(their labels", re.M)
_SEATS = re.compile(r"^Participants in speaking order: (.+)$", re.M)
_BOUND = re.compile(r"bound to an assigned side[^:]*: (.+?)\. Report", re.S)
_TOPIC_LINE = re.compile(r"^Topic: (.+)$", re.M)


def observer_reply(prompt: str) -> str:
    """The observer's reply to its prompt (:func:`roundtabled.core.result.observer_prompt`): the
    five sections and the fenced verdict, the decision the stance the daemon's tally puts first
    (``null`` when no seat stated one)."""
    tally = [(lbl, [s.strip() for s in seats.split(",")]) for lbl, seats in _TALLY.findall(prompt)]
    seats_m = _SEATS.search(prompt)
    seats = [s.strip() for s in seats_m.group(1).split(",")] if seats_m else []
    bound_m = _BOUND.search(prompt)
    bound = bound_m.group(1) if bound_m else ""
    topic_m = _TOPIC_LINE.search(prompt)
    topic = topic_m.group(1) if topic_m else ""
    counted = sum(len(s) for _, s in tally)
    if not tally:
        decision = None
        consensus = "none"
        confidence = 0.2
        summary = "No seat stated a position, so the panel decided nothing."
    else:
        lead, holders = tally[0]
        decision = lead
        if len(tally) == 1:
            consensus = "unanimous"
        elif len(holders) * 2 > counted:
            consensus = "majority"
        else:
            consensus = "split"
        confidence = {"unanimous": 0.8, "majority": 0.6, "split": 0.4}[consensus]
        summary = f"The panel ({', '.join(holders)}) comes down on “{lead}”" + (
            "." if consensus == "unanimous" else f"; {consensus} only."
        )
    minority = [s for _, held in tally[1:] for s in held]
    points = "; ".join(f"*{s}*: see its turns" for s in seats) or "none"
    prose = (
        f"**Executive summary.** {summary}"
        + (f" Seats bound to a side ({bound}) argued as told and are not counted." if bound else "")
        + f"\n\n**Key points.** {points}.\n\n"
        + "**Decisions or convergences.** "
        + (f"“{decision}”." if decision else "None.")
        + "\n\n**Open questions.** "
        + ("; ".join(f"why {s} holds “{lbl}”" for lbl, held in tally[1:] for s in held) or "none")
        + ".\n\n**Next steps.** "
        + ("write the decision down and review it in a quarter." if decision else "ask again.")
    )
    verdict = {
        "decision": decision,
        "confidence": confidence,
        "consensus": consensus,
        "agreements": [decision] if decision else [],
        "disagreements": [
            {"point": lbl, "minority": held, "view": f"{', '.join(held)} hold “{lbl}”"}
            for lbl, held in tally[1:]
        ],
        "openQuestions": [f"what would change the minority's mind on: {topic[:80]}"]
        if minority
        else [],
        "nextSteps": ["review the decision in a quarter"] if decision else [],
        "stances": [],
    }
    return f"{prose}\n\n6. **Verdict**\n```json\n{json.dumps(verdict, indent=1)}\n```"


def panel_reply(rec: RecordedRequest) -> Action | None:
    """:attr:`ScriptedLLM.responder <roundtabled.offline.scripted_llm.ScriptedLLM.responder>`
    of the offline panel: the observer's reply (:func:`observer_reply`) to an observer's turn, a
    seat's reply (:func:`seat_reply`) to a turn prompt, ``None`` to anything else (the
    orchestrator's requests, a person's message: the scripted queue's default answers it)."""
    if rec.kind != "turn":
        return None
    if rec.agent == OBSERVER:
        return reply_text(observer_reply(rec.last_user_text), chunk_size=40)
    seat = parse_seat_prompt(rec.last_user_text)
    if seat is None:
        return None
    return reply_text(seat_reply(seat))


def reply_text(text: str, chunk_size: int = 24) -> Text:
    """``text`` as the offline model streams it, its ``completion_tokens`` counted from its
    length (:data:`~roundtabled.offline.scripted_llm.CHARS_PER_TOKEN` characters a token), so
    that a budget and the dry run's estimate meet usage of a realistic size (the scripted
    model's fixed default is for the suite's own budgets)."""
    return Text(
        text=text, chunk_size=chunk_size, completion_tokens=max(1, len(text) // CHARS_PER_TOKEN)
    )
