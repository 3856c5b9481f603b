"""Pure rules of ``roundtabled eval`` (docs/eval.md): the task sets, reading an answer out of a
reply, comparing it with the gold answer, the majority vote, flips, the Wilson interval and the
exact McNemar test.

Nothing here does I/O; :mod:`roundtabled.eval` runs the questions and calls these.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from roundtabled.core.code_reading import output_form
from roundtabled.core.positions import parse_position

# ── task sets ─────────────────────────────────────────────────────────────────────────────────

ARITHMETIC_LEVELS: dict[str, tuple[str, int, int]] = {
    # name: (expression template over a..f, low, high) — inclusive integer ranges.
    "du": ("{a}+{b}*{c}+{d}-{e}*{f}", 0, 30),
    "medium": ("{a}*{b}+{c}*{d}", 2, 20),
    "easy": ("{a}+{b}*{c}", 2, 12),
}
"""The arithmetic levels. ``du``: the task of Du et al. 2023 ("Improving factuality and reasoning
through multiagent debate": six integers in 0–30); ``medium`` and ``easy``: easier forms, so that a
small model's single-seat accuracy lands where a panel can help (docs/eval.md)."""


@dataclass(frozen=True)
class Question:
    """One question: ``id`` unique in its set, ``question`` the text a seat gets, ``answer`` the
    gold answer (a number as text, a choice letter, or free text), ``choices`` the options of a
    multiple-choice question (``[]`` otherwise; answers name them by letter A, B, … or text),
    ``compare`` how an answer is compared with the gold one (one of :data:`COMPARE`)."""

    id: str
    question: str
    answer: str
    choices: tuple[str, ...] = ()
    compare: str = "answer"


COMPARE = ("answer", "output")
"""How answers are compared: ``answer`` in :func:`canonical` form (numbers, choices, folded text),
``output`` as a program's printed output (:func:`roundtabled.core.code_reading.output_form`:
exact but for surrounding and trailing whitespace; docs/eval.md, "Code reading")."""


def arithmetic_questions(level: str, count: int, seed: int) -> list[Question]:
    """``count`` questions of ``level`` (a key of :data:`ARITHMETIC_LEVELS`), drawn from
    ``random.Random(seed)``: the same seed gives the same questions, in the same order, and a
    longer set starts with the shorter one.

    Raises:
        ValueError: an unknown level or a negative count.
    """
    if level not in ARITHMETIC_LEVELS:
        raise ValueError(f"unknown level {level!r}; one of {', '.join(ARITHMETIC_LEVELS)}")
    if count < 0:
        raise ValueError("count must be >= 0")
    template, low, high = ARITHMETIC_LEVELS[level]
    rng = random.Random(f"{level}:{seed}")
    out: list[Question] = []
    for i in range(count):
        values = {k: rng.randint(low, high) for k in "abcdef"}
        expr = template.format(**values)
        out.append(
            Question(
                id=f"{level}-{seed}-{i}",
                question=f"What is the result of {expr}?",
                answer=str(evaluate_expression(expr)),
            )
        )
    return out


def evaluate_expression(expr: str) -> int:
    """The value of an expression of non-negative integers, ``+``, ``-`` and ``*`` (no spaces,
    no parentheses), with ``*`` binding tighter: ``"2+3*4-5*6"`` → ``-16``.

    Raises:
        ValueError: any other character.
    """
    if not re.fullmatch(r"\d+(?:[-+*]\d+)*", expr):
        raise ValueError(f"not an expression of integers and + - *: {expr!r}")
    total = 0
    for sign, term in re.findall(r"([-+]?)([\d*]+)", expr):
        value = 1
        for factor in term.split("*"):
            value *= int(factor)
        total += -value if sign == "-" else value
    return total


class TaskFileError(ValueError):
    """A JSONL task file line that is not a question (the message names the line and field)."""


def parse_task_lines(lines: Iterable[str], source: str = "tasks") -> list[Question]:
    """The questions of a JSONL task file: one object per line with ``id`` (string or number),
    ``question`` (string), ``answer`` (string or number) and optionally ``choices`` (list of
    strings) and ``compare`` (one of :data:`COMPARE`, default ``answer``); blank lines are
    skipped.

    Raises:
        TaskFileError: naming ``source:LINE`` and the field, for invalid JSON, a missing or
            mistyped field, an unknown key, or an ``id`` given twice.
    """
    out: list[Question] = []
    seen: set[str] = set()
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        where = f"{source}:{n}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise TaskFileError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise TaskFileError(f"{where}: expected an object with id, question, answer")
        unknown = set(obj) - {"id", "question", "answer", "choices", "compare"}
        if unknown:
            raise TaskFileError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        qid, text, answer = obj.get("id"), obj.get("question"), obj.get("answer")
        if not isinstance(qid, (str, int)) or isinstance(qid, bool) or str(qid) == "":
            raise TaskFileError(f"{where}: id must be a non-empty string or number")
        if not isinstance(text, str) or not text.strip():
            raise TaskFileError(f"{where}: question must be a non-empty string")
        if not isinstance(answer, (str, int, float)) or isinstance(answer, bool):
            raise TaskFileError(f"{where}: answer must be a string or number")
        choices = obj.get("choices", [])
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise TaskFileError(f"{where}: choices must be a list of strings")
        if len(choices) > 26:
            raise TaskFileError(f"{where}: choices: at most 26 (letters A-Z)")
        compare = obj.get("compare", "answer")
        if compare not in COMPARE:
            raise TaskFileError(f"{where}: compare must be one of {', '.join(COMPARE)}")
        if str(qid) in seen:
            raise TaskFileError(f"{where}: id {qid!r} given twice")
        seen.add(str(qid))
        gold = str(answer) if compare == "output" else str(answer).strip()
        out.append(Question(str(qid), text.strip(), gold, tuple(choices), compare))
    return out


def question_text(q: Question) -> str:
    """The question as a seat reads it: the text, then the choices as ``A. …`` lines."""
    if not q.choices:
        return q.question
    lines = [q.question, ""]
    lines += [f"{chr(65 + i)}. {c}" for i, c in enumerate(q.choices)]
    return "\n".join(lines)


# ── reading an answer ─────────────────────────────────────────────────────────────────────────

_NUMBER = re.compile(r"[-−]?\d[\d,]*(?:\.\d+)?")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_RESULT = re.compile(
    r"(?:=|\bis\b|\bequals\b)\s*[*_`]*\s*([-−]?\d[\d,]*(?:\.\d+)?)\s*[*_`]*[\s.!]*$",
    re.IGNORECASE,
)
_LINE = re.compile(
    r"^[\s>*_#-]*(?:\*\*|__)?\s*(position|answer|final answer)\s*(?:\*\*|__)?\s*[:：]\s*(.*)$",
    re.IGNORECASE,
)
_PLACEHOLDER = re.compile(r"^<[^<>]*>$")
"""An instruction's placeholder copied as the answer (``<your final answer>``)."""
_DASHES = re.compile(r"\s+[—–-]{1,2}\s+|\s*[—–]\s*")
_CONF = re.compile(r"\(?\s*confidence[^)]*\)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class ReadAnswer:
    """What a reply answered: ``text`` (``None``: no answer found, never guessed), ``source``
    (``position``, ``answer``, ``boxed``, ``placeholder`` — its only answer line was the
    instruction's ``<…>`` placeholder written back — or ``none``) and ``confidence`` (0–1,
    ``None`` unknown)."""

    text: str | None
    source: str
    confidence: float | None = None


def _confidence(text: str) -> float | None:
    m = re.search(r"confidence\D{0,12}(\d+(?:\.\d+)?)\s*(/\s*10|%)?", text, re.IGNORECASE)
    if not m:
        return None
    value = float(m.group(1))
    if m.group(2) and "%" in m.group(2):
        value /= 100
    elif m.group(2) or value > 1:
        value /= 10
    return value if 0 <= value <= 1 else None


def read_answer(reply: str) -> ReadAnswer:
    """The answer a reply states: the last ``Position:`` / ``Answer:`` / ``Final answer:`` line
    (for ``Position:``, its label: the text before the dash and the confidence), else the last
    ``\\boxed{…}``; else no answer. Markdown emphasis and surrounding punctuation are dropped.
    Lenient as real models write (bold, en dashes, ``Answer: **42**.``, ``Answer: Answer: 42``),
    but never a number picked from the prose, and never the instruction's own placeholder
    (``Answer: <your final answer>``: skipped, docs/eval.md)."""
    found: ReadAnswer | None = None
    copied = False
    for line in reply.splitlines():
        m = _LINE.match(line.strip())
        if not (m and m.group(2).strip()):
            continue
        kind, body = m.group(1).lower(), m.group(2).strip()
        # "Answer: Answer: 89": the label written twice.
        while (again := _LINE.match(body)) is not None and again.group(2).strip():
            body = again.group(2).strip()
        conf = _confidence(body)
        body = _CONF.sub("", body).strip()
        if kind == "position":
            body = _DASHES.split(body, maxsplit=1)[0]
        text = body.strip().strip("*_`\"'“”.,;: ").strip()
        if is_placeholder(text):
            copied = True  # the instruction's "<final answer>" written back, not an answer
        elif text:
            found = ReadAnswer(text, "position" if kind == "position" else "answer", conf)
    if found is None:
        # A Position line as the daemon reads it and the lines above do not (wrapped in brackets,
        # after a concluding word or a clause on the last line): a seat alone is read as the
        # product reads it (roundtabled.core.positions.parse_position, docs/result.md).
        pos = parse_position(reply)
        if pos is not None and pos.source == "position":
            text = pos.label.strip().strip("*_`\"'“”.,;:[]() ").strip()
            if text and not is_placeholder(text):
                found = ReadAnswer(text, "position", pos.confidence)
    if found is not None:
        return found
    boxed = _BOXED.findall(reply)
    if boxed and boxed[-1].strip():
        return ReadAnswer(boxed[-1].strip(), "boxed", _confidence(reply))
    return ReadAnswer(None, "placeholder" if copied else "none", None)


def is_placeholder(text: str | None) -> bool:
    """True when ``text`` is an instruction's ``<…>`` placeholder written back as an answer
    (``<your final answer>``): never an answer (:func:`read_answer`)."""
    return text is not None and _PLACEHOLDER.match(text.strip()) is not None


def _as_number(text: str) -> Decimal | None:
    """The one number ``text`` names (``12``, ``-3``, ``1,024``, ``12.0``, ``= 42``), or the
    result it ends on when it restates the question first (``10*4+12*13 is 196``,
    ``40 + 156 = 196``: the number after the last ``=`` / ``is`` / ``equals``, ending the text);
    ``None`` when it names none, or several without such a result (``12 or 13``)."""
    nums = {n for n in (_parse_decimal(t) for t in _NUMBER.findall(text)) if n is not None}
    if len(nums) == 1:
        return next(iter(nums))
    m = _RESULT.search(text)
    return _parse_decimal(m.group(1)) if m and nums else None


def _parse_decimal(token: str) -> Decimal | None:
    try:
        return Decimal(token.replace(",", "").replace("−", "-")).normalize()
    except InvalidOperation:
        return None


def _fold(text: str) -> str:
    return re.sub(r"[\s*_`\"'“”.,;:!?()]+", " ", text).strip().casefold()


def canonical(answer: str | None, choices: Sequence[str] = ()) -> str | None:
    """The form answers are compared in: a choice question → its letter (``"B"``, from ``B``,
    ``(b)``, ``B. text`` or the choice's text); a number → its normalised decimal (``12.0`` →
    ``12``, ``1,024`` → ``1024``); else the case- and punctuation-folded text. ``None`` stays
    ``None`` (no answer)."""
    if answer is None:
        return None
    if choices:
        folded = _fold(answer)
        m = re.match(r"^(?:option\s+)?\(?([a-z])\)?(?:$|[\s.:)])", folded)
        if m and ord(m.group(1)) - 97 < len(choices):
            return m.group(1).upper()
        for i, c in enumerate(choices):
            if _fold(c) == folded:
                return chr(65 + i)
        return folded or None
    num = _as_number(answer)
    if num is not None:
        return format(num, "f") if num == num.to_integral_value() else str(num)
    folded = _fold(answer)
    return folded or None


def answer_to(q: Question, answer: str | None) -> str | None:
    """``answer`` in :func:`canonical` form as an answer to ``q``: to a question whose gold
    answer is a number, an answer that names no number is no answer (``None``), not its folded
    text (a seat that wrote ``Answer: {"decision": …}``, copying the observer's verdict, has not
    answered; folded, three such copies would win the vote). A question that compares printed
    output (``compare == "output"``) takes :func:`~roundtabled.core.code_reading.output_form`."""
    if q.compare == "output":
        return output_form(answer)
    form = canonical(answer, q.choices)
    if form is not None and not q.choices and _as_number(q.answer) is not None:
        return form if _as_number(form) is not None else None
    return form


def gold_canonical(q: Question) -> str | None:
    """The gold answer of ``q`` in :func:`canonical` form (a choice question's gold may be the
    letter or the choice text; a printed output in its :func:`output_form`)."""
    if q.compare == "output":
        return output_form(q.answer)
    return canonical(q.answer, q.choices)


# ── voting and flips ──────────────────────────────────────────────────────────────────────────


def majority(answers: Sequence[tuple[str | None, float | None]]) -> str | None:
    """The majority of the seats' answers, in seat order: ``[(canonical answer or None,
    confidence 0–1 or None)]``. Most seats wins; a tie goes to the answer with the higher total
    stated confidence (unknown confidence adds nothing), then to the answer of the earliest seat.
    Seats without an answer do not vote; no answer at all → ``None``."""
    count: dict[str, int] = {}
    weight: dict[str, float] = {}
    first: dict[str, int] = {}
    for i, (ans, conf) in enumerate(answers):
        if ans is None:
            continue
        count[ans] = count.get(ans, 0) + 1
        weight[ans] = weight.get(ans, 0.0) + (conf or 0.0)
        first.setdefault(ans, i)
    if not count:
        return None
    return min(count, key=lambda a: (-count[a], -weight[a], first[a]))


@dataclass(frozen=True)
class Flips:
    """Between a seat's first and final answer: ``wrong_to_right``, ``right_to_wrong``, and the
    answers that stayed ``right`` or ``wrong`` (no answer counts as wrong)."""

    wrong_to_right: int = 0
    right_to_wrong: int = 0
    stayed_right: int = 0
    stayed_wrong: int = 0

    def plus(self, first_ok: bool, final_ok: bool) -> Flips:
        """These counts with one more seat-question pair."""
        return Flips(
            self.wrong_to_right + (not first_ok and final_ok),
            self.right_to_wrong + (first_ok and not final_ok),
            self.stayed_right + (first_ok and final_ok),
            self.stayed_wrong + (not first_ok and not final_ok),
        )


# ── statistics ────────────────────────────────────────────────────────────────────────────────


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float] | None:
    """The Wilson score interval of ``successes`` out of ``n`` (95% for the default ``z``), as
    ``(low, high)`` fractions; ``None`` for ``n == 0`` (nothing measured).

    Raises:
        ValueError: ``successes`` outside ``0..n``.
    """
    if not 0 <= successes <= n:
        raise ValueError("successes must be within 0..n")
    if n == 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_exact(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value for ``b`` pairs right only under A and ``c`` right only
    under B: the binomial test of ``min(b, c)`` out of ``b + c`` at 1/2, doubled, at most 1.
    No discordant pair → 1.0."""
    if b < 0 or c < 0:
        raise ValueError("counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / float(2**n)
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class Paired:
    """A against B on the same questions: ``only_a`` right under A only, ``only_b`` under B only,
    ``diff`` = accuracy(A) − accuracy(B) as a fraction, ``p`` the exact McNemar p-value."""

    only_a: int
    only_b: int
    n: int
    diff: float | None
    p: float


def paired(a: Sequence[bool], b: Sequence[bool]) -> Paired:
    """Compare two protocols' per-question correctness (same questions, same order).

    Raises:
        ValueError: the sequences differ in length.
    """
    if len(a) != len(b):
        raise ValueError("paired results need the same questions")
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    n = len(a)
    diff = (sum(a) - sum(b)) / n if n else None
    return Paired(only_a, only_b, n, diff, mcnemar_exact(only_a, only_b))


# ── protocols read from one transcript ────────────────────────────────────────────────────────


@dataclass(frozen=True)
class SeatRounds:
    """One seat's canonical answers per round (index 0 = the opening) with confidences."""

    agent: str
    answers: tuple[str | None, ...]
    confidences: tuple[float | None, ...]


@dataclass
class ProtocolSummary:
    """The report's line of one protocol (docs/eval.md)."""

    name: str
    n: int
    correct: int
    accuracy: float | None
    wilson95: tuple[float, float] | None
    vs_best_single: Paired | None
    vs_vote: Paired | None
    flips: Flips | None
    tokens_per_question: float | None
    cost_per_question: float | None
    calls_per_question: float | None
    seconds_per_question: float | None
    extra: dict[str, Any] = field(default_factory=dict)


def summarise(records: Sequence[Mapping[str, Any]], protocols: Sequence[str]) -> dict[str, Any]:
    """Per-protocol accuracy, intervals, paired tests and flips over ``records`` (the per-question
    records of :mod:`roundtabled.eval`: ``{"protocols": {name: {"correct": bool,
    "tokens": int|None, "cost": float|None, "calls": int, "seconds": float}}, "seats": {agent:
    {"correct": [bool per round]}}}``). ``single:<agent>`` is each seat's own opening; the best
    single seat is the one with the most correct openings (ties: seat order).

    Returns ``{"protocols": [ProtocolSummary…], "bestSingle": name|None}``; an empty record list
    gives accuracies of ``None``, never 0.
    """
    recs = [r for r in records if all(p in r.get("protocols", {}) for p in protocols)]
    singles = [p for p in protocols if p.startswith("single:")]
    best = (
        None
        if not recs
        else max(
            singles,
            key=lambda p: (
                sum(bool(r["protocols"][p]["correct"]) for r in recs),
                -singles.index(p),
            ),
            default=None,
        )
    )
    out: list[ProtocolSummary] = []
    for p in protocols:
        ok = [bool(r["protocols"][p]["correct"]) for r in recs]
        n, k = len(ok), sum(ok)
        vs_best = (
            paired(ok, [bool(r["protocols"][best]["correct"]) for r in recs])
            if best is not None and p != best
            else None
        )
        vs_vote = (
            paired(ok, [bool(r["protocols"]["vote"]["correct"]) for r in recs])
            if "vote" in protocols and p != "vote"
            else None
        )
        flips: Flips | None = None
        finals = [r["protocols"][p].get("finalRound") for r in recs]
        if any(f is not None and f > 0 for f in finals):
            flips = Flips()
            for r, f in zip(recs, finals, strict=True):
                for seat in r.get("seats", {}).values():
                    rounds = seat["correct"]
                    if f is None or not rounds:
                        continue
                    flips = flips.plus(bool(rounds[0]), bool(rounds[min(f, len(rounds) - 1)]))
        out.append(
            ProtocolSummary(
                name=p,
                n=n,
                correct=k,
                accuracy=k / n if n else None,
                wilson95=wilson(k, n),
                vs_best_single=vs_best,
                vs_vote=vs_vote,
                flips=flips,
                tokens_per_question=_mean(r["protocols"][p].get("tokens") for r in recs),
                cost_per_question=_mean(r["protocols"][p].get("cost") for r in recs),
                calls_per_question=_mean(r["protocols"][p].get("calls") for r in recs),
                seconds_per_question=_mean(r["protocols"][p].get("seconds") for r in recs),
            )
        )
    return {"protocols": out, "bestSingle": best}


def _mean(values: Iterable[float | int | None]) -> float | None:
    """The mean of the known values; ``None`` when any is unknown (a partial mean would look
    measured) or there are none."""
    vals = list(values)
    if not vals or any(v is None for v in vals):
        return None
    return sum(float(v) for v in vals if v is not None) / len(vals)
