"""The observer's structured verdict: its schema, the instruction, validation and the one repair.

The observer replies with the five prose sections of its summary and then **one fenced JSON
block** (```` ```json … ``` ````) matching :func:`verdict_schema` (docs/result.md, "The observer's
verdict"). The daemon validates it; when it is invalid it asks once — one repair turn, recorded in
the state so that a restart never asks twice — with :func:`repair_prompt`, whose reply must be the
corrected JSON alone; when that fails too, the verdict is built from the position ledger
(:func:`roundtabled.core.verdict.ledger_verdict`) and the result's notes say so.

Why not the server's structured output (the prompt's ``format: {"type": "json_schema"}``): in the
pinned OpenCode it works by adding a ``StructuredOutput`` tool the model must *call*; a reply that
ends without the call is stored with a ``StructuredOutputError`` and the prose is lost. The
built-in observer is a tool-less agent, many models cannot call tools, and a named observer may
deny tools — so the daemon validates the text itself (docs/result.md explains the check).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

REPAIR_SEAT = -2
"""``seat`` of the observer's repair turn (its marker and history entry); the first observer turn
has seat ``-1`` (marker) / ``None`` (entry)."""

VERDICT_SCHEMA_VERSION = 1
"""Version of the observer's verdict JSON (``docs/result.md``)."""

ITEM_MAX = 500
"""Characters kept of each list item and of ``decision``."""
ITEMS_MAX = 12
"""Items kept of each list."""


class ObserverDisagreement(BaseModel):
    """One open disagreement: ``minority`` = seat names holding ``view``."""

    model_config = ConfigDict(extra="ignore")

    point: str = Field(min_length=1)
    minority: list[str] = Field(default_factory=list)
    view: str = ""


class StanceEdit(BaseModel):
    """The observer's judgement on the daemon's grouping of labels into stances: ``merge`` two
    or more stances it reads as one, or ``split`` one it reads as several; ``why`` one line.
    Recorded and shown beside the daemon's grouping, which alone drives the tally."""

    model_config = ConfigDict(extra="ignore")

    action: Literal["merge", "split"]
    stances: list[str] = Field(min_length=1)
    why: str = ""


class ObserverVerdict(BaseModel):
    """The JSON the observer ends its reply with.

    ``decision``: what the panel decided, or ``null`` when it decided nothing; ``confidence``:
    0.0–1.0 (a 0–10 value is read as tenths); ``consensus``: ``unanimous`` (every seat),
    ``majority`` (more than half), ``split`` or ``none``; seats that did not speak never count.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    decision: str | None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    consensus: Literal["unanimous", "majority", "split", "none"]
    agreements: list[str] = Field(default_factory=list)
    disagreements: list[ObserverDisagreement] = Field(default_factory=list)
    open_questions: list[str] = Field(default_factory=list, alias="openQuestions")
    next_steps: list[str] = Field(default_factory=list, alias="nextSteps")
    stances: list[StanceEdit] = Field(default_factory=list)

    @field_validator("confidence", mode="before")
    @classmethod
    def _tenths(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool) and 1 < value <= 10:
            return value / 10
        return value

    @field_validator("decision", mode="before")
    @classmethod
    def _decision(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return None
        return value

    def capped(self) -> dict[str, Any]:
        """The JSON-ready form with each list and item capped (``ITEMS_MAX``, ``ITEM_MAX``)."""

        def cut(s: str) -> str:
            return s if len(s) <= ITEM_MAX else s[: ITEM_MAX - 1] + "…"

        data = self.model_dump(mode="json", by_alias=True)
        if data["decision"] is not None:
            data["decision"] = cut(data["decision"])
        for key in ("agreements", "openQuestions", "nextSteps"):
            data[key] = [cut(x) for x in data[key][:ITEMS_MAX]]
        data["disagreements"] = [
            {"point": cut(d["point"]), "minority": d["minority"], "view": cut(d["view"])}
            for d in data["disagreements"][:ITEMS_MAX]
        ]
        data["stances"] = [
            {
                "action": e["action"],
                "stances": [cut(x) for x in e["stances"][:ITEMS_MAX]],
                "why": cut(e["why"]),
            }
            for e in data["stances"][:ITEMS_MAX]
        ]
        return data


def is_repair(entry: Any) -> bool:
    """True for the observer's repair reply (a history entry of kind observer, seat -2)."""
    return bool(entry.kind == "observer" and entry.seat == REPAIR_SEAT)


def verdict_schema() -> dict[str, Any]:
    """The published JSON schema of the observer's verdict (docs/result.md)."""
    schema = ObserverVerdict.model_json_schema(by_alias=True)
    schema["$id"] = f"https://roundtabled.local/schema/observer-verdict-{VERDICT_SCHEMA_VERSION}"
    return schema


VERDICT_EXAMPLE = (
    '{"decision": "<what the panel decided, or null>", "confidence": <0.0 to 1.0>, '
    '"consensus": "<unanimous | majority | split | none>", "agreements": ["<point>"], '
    '"disagreements": [{"point": "<point>", "minority": ["<seat name>"], "view": "<view>"}], '
    '"openQuestions": ["<question>"], "nextSteps": ["<step>"], '
    '"stances": [{"action": "<merge | split>", "stances": ["<stance label>"], '
    '"why": "<one line>"}]}'
)
"""The verdict's shape, with placeholders only: an observer that copies an example value into
its verdict would report a decision nobody took (a decision that repeats a placeholder is
unusable, :func:`parse_reply`)."""

VERDICT_INSTRUCTION = (
    "6. **Verdict** — end your reply with exactly one fenced ```json block, after the five "
    "sections, in this shape (replace every <…> with your own words or values):\n"
    f"```json\n{VERDICT_EXAMPLE}\n```\n"
    "decision: what the panel decided, or null if it decided nothing; confidence 0.0–1.0; "
    "consensus: unanimous | majority | split | none — count only seats that spoke (a seat that "
    "failed or was silent agrees with nobody); minority: seat names; stances: only where you "
    "read the daemon's grouping of the stated positions differently (merge stances that say "
    "the same thing, split one that holds different things), with a one-line reason; else []."
)
"""The line added to the observer's sections (its words are also in docs/result.md)."""

_PLACEHOLDER = re.compile(r"^\s*<[^<>]*>\s*$")


def _placeholder(text: str) -> bool:
    """True when ``text`` is one of :data:`VERDICT_EXAMPLE`'s placeholders (``<…>``) or repeats
    one of them."""
    if _PLACEHOLDER.match(text):
        return True
    folded = " ".join(text.casefold().split())
    return any(folded == p.casefold() for p in re.findall(r"<[^<>]*>", VERDICT_EXAMPLE))


_TURN_HEADER = re.compile(r"·\s*round\s+\d+|──")
"""The daemon's turn header (``── seat-a · round 1 ──``), or a piece of it."""


TRANSCRIPT_COPIED = (
    "the observer's reply repeats the debate's turns (a turn header copied), not a consolidation"
)
"""``VerdictRecord.error`` of an observer reply without a verdict that starts with a turn header
(:func:`copies_a_turn`): its prose is not kept as the summary, and the result is degraded."""

_HEADER_LINE = re.compile(r"^[\s─-]*(?P<name>[\w.-]+)\s*·\s*round\s+\d+", re.IGNORECASE)


def copies_a_turn(prose: str, seats: Sequence[str]) -> bool:
    """True when the first non-empty line of ``prose`` is a seat's turn header
    (``── pm · round 1 ──``, or ``pm · round 1 ──`` without its lead): the observer wrote the
    transcript back (seen on a small local model) instead of consolidating it."""
    first = next((ln for ln in prose.splitlines() if ln.strip()), "")
    m = _HEADER_LINE.match(first)
    return m is not None and m.group("name").casefold() in {s.casefold() for s in seats}


def _names_a_turn(decision: str, seats: dict[str, str]) -> bool:
    """True when ``decision`` is only a seat's name, or holds a piece of the daemon's turn header
    (``seat-a · round 1 ──``): the observer copied the transcript's layout, not a decision."""
    folded = " ".join(decision.casefold().strip(" .*_`\"'“”").split())
    return folded in seats or _TURN_HEADER.search(decision) is not None


def repair_prompt(error: str) -> str:
    """The one repair request sent to the observer after an invalid verdict.

    Args:
        error: what was wrong (from :func:`parse_reply`), at most a few hundred characters.
    """
    return (
        f"Your verdict JSON was invalid: {error}\n"
        "Reply with only the corrected JSON (no prose, no other text), in this shape:\n"
        f"{VERDICT_EXAMPLE}\n"
        "consensus is one of unanimous, majority, split, none; confidence 0.0–1.0; decision a "
        "string in your own words or null; replace every <…>."
    )


_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(?P<body>.*?)\n?[ \t]*```", re.DOTALL)


def _locate(text: str) -> tuple[str, str] | None:
    """``(json text, prose without it)``: the last fenced block holding an object, else a reply
    that is a bare object (a repair reply), else ``None``."""
    last: re.Match[str] | None = None
    for m in _FENCE.finditer(text):
        if m.group("body").lstrip().startswith("{"):
            last = m
    if last is not None:
        prose = (text[: last.start()] + text[last.end() :]).strip()
        prose = re.sub(r"\n*\**6\.\s*\**Verdict\**[^\n]*\s*$", "", prose).strip()
        return last.group("body"), prose
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        return stripped, ""
    return None


def has_verdict_block(text: str) -> bool:
    """True when ``text`` holds a verdict attempt (a fenced block or a bare reply that starts as
    a JSON object), valid or not: only an attempt is worth one repair request."""
    return _locate(text) is not None


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def parse_reply(text: str, agents: Sequence[str]) -> tuple[str, ObserverVerdict | None, str | None]:
    """Split an observer reply into prose and its verdict.

    Args:
        text: the observer's reply (or its repair reply).
        agents: the seat names (``minority`` must name seats; compared case-insensitively and
            rewritten to the seat's own spelling).

    Returns:
        ``(prose, verdict, error)``: ``verdict`` ``None`` with ``error`` saying what was wrong
        (no JSON block, invalid JSON with line/column, a field and its problem, an unknown seat,
        a decision that repeats a placeholder of :data:`VERDICT_EXAMPLE`).
    """
    found = _locate(text)
    if found is None:
        return text.strip(), None, "no fenced ```json verdict block was found"
    raw, prose = found
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return prose, None, f"not valid JSON ({exc})"
    if not isinstance(data, dict):
        return prose, None, "the verdict must be a JSON object"
    try:
        verdict = ObserverVerdict.model_validate(data)
    except ValidationError as exc:
        return prose, None, _describe(exc)
    if verdict.decision is not None and _placeholder(verdict.decision):
        return (
            prose,
            None,
            f"decision: {verdict.decision!r} repeats the shape's placeholder; write what the "
            "panel decided, or null",
        )
    seats = {a.casefold(): a for a in agents}
    if verdict.decision is not None and _names_a_turn(verdict.decision, seats):
        return (
            prose,
            None,
            f"decision: {verdict.decision!r} names a seat or a turn header, not a decision; "
            "write what the panel decided, or null",
        )
    fixed = []
    for i, d in enumerate(verdict.disagreements):
        names = []
        for name in d.minority:
            seat = seats.get(name.strip().casefold())
            if seat is None:
                known = ", ".join(agents)
                return prose, None, f"disagreements.{i}.minority: {name!r} is not a seat ({known})"
            names.append(seat)
        if len(agents) > 1 and {n.casefold() for n in names} >= set(seats):
            return (
                prose,
                None,
                f"disagreements.{i}.minority: names every seat ({', '.join(agents)}); a minority "
                "is some of the seats",
            )
        fixed.append(d.model_copy(update={"minority": names}))
    return prose, verdict.model_copy(update={"disagreements": fixed}), None


# ── the verdict as S2 shows it once it is recorded ──────────────────────────────────────────────

SHOWN_DECISION_MAX = 200
"""Characters of the decision kept in :func:`recorded_line`."""


def _one_line(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters, with no code fence left in it (a
    fence would make the line a block again)."""
    one = " ".join(text.split()).replace("```", "'''")
    return one if len(one) <= limit else one[: limit - 1] + "…"


def recorded_line(data: dict[str, Any] | None) -> str:
    """The line in words that takes the place of the observer's verdict block in S2 once the
    verdict is recorded (docs/result.md, "The observer's verdict").

    Args:
        data: the recorded verdict (``VerdictRecord.data``: ``decision``, ``consensus``,
            ``confidence`` 0.0–1.0), or ``None`` when the block gave none and the verdict was
            built from the seats' stated positions (the result's notes say why).
    """
    if data is None:
        return (
            "Verdict block not used: roundtabled built the verdict from the seats' stated "
            "positions (the result says why)."
        )
    decision = data.get("decision")
    said = [
        "decision: "
        + (_one_line(decision, SHOWN_DECISION_MAX) if isinstance(decision, str) else "none"),
        f"consensus: {_one_line(str(data.get('consensus') or 'unknown'), 40)}",
    ]
    confidence = data.get("confidence")
    if isinstance(confidence, int | float) and not isinstance(confidence, bool):
        said.append(f"confidence: {round(confidence * 10)}/10")
    return "Verdict recorded by roundtabled — " + "; ".join(said) + "."


def shown_text(text: str, line: str) -> str | None:
    """``text`` (one text part of the observer's reply, or the whole reply) as S2 shows it once
    the verdict is recorded: every verdict block (:func:`has_verdict_block`: a fenced JSON
    object, or a reply that is a bare object) and the "6. Verdict" heading before it replaced by
    ``line`` (:func:`recorded_line`) after the prose. ``None`` when ``text`` holds no verdict
    block: it is left as it is (a reply without one, or one already shown this way)."""
    found = _locate(text)
    if found is None:
        return None
    prose = text
    while found is not None:
        prose = found[1]
        found = _locate(prose) if prose else None
    return f"{prose}\n\n{line}" if prose else line
