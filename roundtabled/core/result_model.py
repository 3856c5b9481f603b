"""The result contract's models (docs/result.md): what the ``roundtable`` tool returns.

Pure data, versioned (:data:`RESULT_VERSION`), camelCase on the wire as the contract names them;
the builders are in :mod:`roundtabled.core.verdict`, the texts in
:mod:`roundtabled.core.result`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from roundtabled.core.state import EndReason, ProtocolName

RESULT_VERSION = 1
"""Version of the result layout (``version`` in every result)."""

UNKNOWN_CONFIDENCE_WEIGHT = 0.5
"""Tally weight of a stated label without a stated confidence (neither trusted nor dismissed)."""

Consensus = Literal["unanimous", "majority", "split", "none", "unknown"]
TurnKind = Literal["answered", "failed", "empty", "truncated", "timedOut", "cancelled"]
ObserverOutcome = Literal["ok", "repaired", "fallback", "failed", "skipped", "cancelled", "pending"]

NATURAL_ENDS = (EndReason.COMPLETED, EndReason.CONVERGED)


class _M(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def dump(self) -> dict[str, Any]:
        """The JSON-ready form with the contract's camelCase names."""
        return self.model_dump(mode="json", by_alias=True)


class SeatStatus(_M):
    """How one seat's turns went. ``turns`` = turns taken; ``skipped`` = turns of the planned
    rounds it never got because the debate stopped early; ``noPosition`` = answers without a
    ``Position:`` line; ``notes``: one line per turn that was not a plain answer."""

    agent: str
    turns: int = 0
    answered: int = 0
    failed: int = 0
    empty: int = 0
    truncated: int = 0
    timed_out: int = 0
    cancelled: int = 0
    skipped: int = 0
    no_position: int = 0
    notes: list[str] = Field(default_factory=list)


class Status(_M):
    """Whether the result can be trusted as a full debate. ``degraded``: the orchestrator must
    tell the user (the words are in ``notes`` and in the first lines of ``summary``)."""

    end_reason: str
    degraded: bool
    rounds_completed: int
    rounds_planned: int
    observer: ObserverOutcome
    observer_truncated: int = 0
    """The observer's turns (its reply, its verdict repair reply) cut at the output limit."""
    seats: list[SeatStatus]
    notes: list[str] = Field(default_factory=list)


class PositionChange(_M):
    """A label change: ``round`` of the new label, ``from`` the old label, ``why`` the seat's
    own reason (``None``: it gave none)."""

    round: int
    from_: str = Field(alias="from")
    to: str
    why: str | None = None


class SeatPosition(_M):
    """A seat's final stated position (its last answer's ``Position:`` line, in its own words);
    ``round`` is the round of that answer. ``label`` ``None``: the seat stated none (or never
    spoke). ``stance``: the stance its label belongs to (``roundtabled.core.stances``), ``None``
    when it has none; ``noStance``: why a stated label counts as no position (it is the seat's
    name, the word "position", a placeholder, the topic copied); ``carried``: the seat stated no
    position in the last call (an ``extend``), so its last one before it is kept, with that
    round."""

    agent: str
    label: str | None = None
    position: str | None = None
    confidence: float | None = None
    round: int | None = None
    stance: str | None = None
    no_stance: str | None = None
    carried: bool = False
    changes: list[PositionChange] = Field(default_factory=list)
    side: str | None = None
    """The seat's assigned side (``for`` | ``against`` | ``neutral`` | a brief; ``None``: a free
    seat). A side-bound seat's position is shown, never counted in ``tally`` or ``consensus``."""
    cut_off: Literal["timedOut", "cancelled"] | None = None
    """How the seat's last turn was cut off when its partial text was kept (``timedOut`` at the
    time limit, ``cancelled``); ``None`` otherwise. A seat whose only turns were cut off spoke
    (``round`` ``null``: a cut-off turn's ``Position:`` line is not counted), it is no seat that
    "did not speak" (docs/result.md, verdict)."""


class TallyItem(_M):
    """Seats holding one stance and their summed confidence: ``label`` names the stance,
    ``labels`` are the seats' own labels grouped in it (as written, distinct, in seat order)."""

    label: str
    seats: list[str]
    weight: float
    labels: list[str] = Field(default_factory=list)


MajorityKind = Literal["majority", "none", "tied", "unknown"]


class Majority(_M):
    """The majority of one tally over the free seats (docs/result.md, "deliberation").

    ``kind``: ``majority`` one stance is held by more than half of the ``counted`` seats (all of
    them included); ``none`` no stance is, and none could be whatever the ``unstated`` seats had
    said; ``tied`` as ``none``, every seat stated a stance and the largest groups are equal;
    ``unknown`` no counted seat stated a stance, or the unstated seats could still give one a
    majority (a seat that stated nothing is never counted as agreeing). ``stance``: the
    majority's stance (``kind`` ``majority`` only). ``seats``: the seats holding the largest
    stance. ``weightedShare``: the confidence-weighted share of ``stance`` — the confidences of
    its seats over those of every counted seat — ``None`` unless every counted seat stated a
    stance and a confidence (an unstated confidence is unknown, never a number)."""

    kind: MajorityKind = "unknown"
    stance: str | None = None
    seats: int = 0
    counted: int = 0
    unstated: int = 0
    weighted_share: float | None = None


class SeatMove(_M):
    """A free seat whose final stance differs from its opening stance: ``from`` the opening
    stance, ``to`` the final one (as the tallies name them), ``round`` the round of the change
    that brought it to the final stance (``None``: not recorded), ``why`` the seat's own
    ``Changed:`` reason for that change (``None``: it gave none)."""

    agent: str
    from_: str = Field(alias="from")
    to: str
    round: int | None = None
    why: str | None = None


class Deliberation(_M):
    """What deliberation changed (docs/result.md, "deliberation"): the opening tally (each free
    seat's stated position of round 1, the independent opening round when ``opening`` is
    ``independent``) beside the final one, both grouped by stance over the two rounds' labels
    together, their majorities, whether the majority changed (``None``: unknown — one round, or
    either majority unknown), the seats that moved and the seats that stated no position at the
    opening or at the end (unknown, never counted as agreeing). Seats bound to a side are in
    neither tally."""

    rounds: int = 0
    opening: str = "sequential"
    opening_tally: list[TallyItem] = Field(default_factory=list)
    final_tally: list[TallyItem] = Field(default_factory=list)
    opening_majority: Majority = Field(default_factory=Majority)
    final_majority: Majority = Field(default_factory=Majority)
    majority_changed: bool | None = None
    moved: list[SeatMove] = Field(default_factory=list)
    unstated_at_opening: list[str] = Field(default_factory=list)
    unstated_at_end: list[str] = Field(default_factory=list)


class Disagreement(_M):
    """A point the panel did not agree on: ``minority`` the seats holding ``view``."""

    point: str
    minority: list[str] = Field(default_factory=list)
    view: str = ""


class ObserverStance(_M):
    """The observer's reading of the daemon's stances where it differs: ``action`` ``merge``
    (these stances are one) or ``split`` (this stance holds several), ``why`` its one line.
    Shown beside the tally, which keeps the daemon's grouping."""

    action: Literal["merge", "split"]
    stances: list[str]
    why: str = ""


class StanceShare(_M):
    """One stance of a protocol's count of independent answers (:mod:`roundtabled.core.protocols.
    tally`): its seats, the labels written, ``weight`` (sum of the stated confidences) and
    ``share`` (of every seat's weight); both ``null`` (unknown) unless every seat stated a stance
    and a confidence."""

    stance: str
    seats: list[str]
    labels: list[str] = Field(default_factory=list)
    weight: float | None = None
    share: float | None = None


class DegradedSeat(_M):
    """A seat that cast no ballot (failed, stated no position, a label that names no stance):
    named, never counted."""

    agent: str
    why: str


class ProtocolCount(_M):
    """The count of the independent answers: ``stances`` (leader first), ``weighted`` (every
    seat stated a stance and a confidence: the shares are known), ``leader`` (``null``: none, or
    a tie), ``leaderShare`` (``null``: unknown), ``degraded`` seats."""

    stances: list[StanceShare] = Field(default_factory=list)
    weighted: bool = False
    leader: str | None = None
    leader_share: float | None = None
    degraded: list[DegradedSeat] = Field(default_factory=list)


class AdaptiveReport(_M):
    """``adaptive``'s decision at the opening: ``stopped`` there or debated, the leading
    ``stance``, its ``share`` (``null``: unknown) and the ``threshold``, ``why`` in words."""

    stopped: bool
    stance: str | None = None
    share: float | None = None
    threshold: float
    why: str


class RankGiven(_M):
    """One seat's rank of an answer and its reason."""

    by: str
    rank: int
    reason: str = ""


class AnswerRank(_M):
    """``council``: one answer (its author), its ``meanRank`` over the valid rankings of it
    (1 = best; ``null``: nobody ranked it) and every rank given with its reason."""

    author: str
    mean_rank: float | None = None
    ranks: list[RankGiven] = Field(default_factory=list)


class CouncilReport(_M):
    """``council``: the ``aggregate`` rank (best first), whether the ranking round ``ran``
    (fewer than three answers: it did not) and the seats whose ranking counts for nothing,
    with why (``degraded``)."""

    ran: bool = False
    aggregate: list[AnswerRank] = Field(default_factory=list)
    degraded: list[DegradedSeat] = Field(default_factory=list)


class ProtocolReport(_M):
    """Which protocol ran (docs/deliberation.md, "Protocols") and what it counted: ``count``
    (``vote`` and ``council``: the answers; ``adaptive``: the opening), ``adaptive`` (its
    decision; ``null`` before the opening was recorded), ``council`` (the aggregate rank)."""

    name: ProtocolName = "debate"
    count: ProtocolCount | None = None
    adaptive: AdaptiveReport | None = None
    council: CouncilReport | None = None


class Verdict(_M):
    """The outcome. ``decision``/``consensus``/``confidence`` come from the observer's verdict
    (``source: observer``) or, when it was unusable, from the ledger (``source: ledger``);
    ``tallyConsensus`` is always the daemon's own count of the stated positions."""

    decision: str | None = None
    confidence: float | None = None
    consensus: Consensus = "unknown"
    tally_consensus: Consensus = "unknown"
    source: Literal["observer", "ledger"] = "ledger"
    positions: list[SeatPosition] = Field(default_factory=list)
    tally: list[TallyItem] = Field(default_factory=list)
    agreements: list[str] = Field(default_factory=list)
    disagreements: list[Disagreement] = Field(default_factory=list)
    open_questions: list[str] = Field(default_factory=list)
    next_steps: list[str] = Field(default_factory=list)
    observer_stances: list[ObserverStance] = Field(default_factory=list)
    deliberation: Deliberation = Field(default_factory=Deliberation)
    """What deliberation changed: the opening tally beside the final one (docs/result.md)."""
    protocol: ProtocolReport = Field(default_factory=ProtocolReport)
    """Which protocol ran and what it counted (docs/deliberation.md, "Protocols")."""
    observer_consensus: Consensus | None = None
    """The observer's own ``consensus`` when the seats' stated positions do not back it (no seat
    stated one, or fewer seats than it needs; ``None`` otherwise): ``consensus`` is then what
    they back, ``confidence`` unknown, and the status degraded (docs/result.md)."""


class AgentUsage(_M):
    """Tokens (input, output incl. reasoning) and cost (USD) as the server recorded them.

    ``unreportedTurns``: answered turns the server recorded no usage for (a provider that sends
    none); when > 0 the numbers are a lower bound, and when nothing at all was recorded they are
    ``null`` (unknown, never a 0 that looks measured)."""

    input: int | None = 0
    output: int | None = 0
    cost: float | None = 0.0
    unreported_turns: int = 0


class ResultUsage(AgentUsage):
    """The totals and ``perAgent`` (seat names; the observer under its agent name)."""

    per_agent: dict[str, AgentUsage] = Field(default_factory=dict)


class RoundtableResult(_M):
    """The contract (docs/result.md). Fields are in the order a reader should meet them: a
    consumer that sees only the head of a cut output still has the status."""

    version: int = RESULT_VERSION
    session_id: str = Field(alias="sessionID")
    title: str = ""
    status: Status
    verdict: Verdict
    summary: str = ""
    usage: ResultUsage = Field(default_factory=ResultUsage)
    transcript: str = ""
    """Where the full debate is: it is never pasted into the result."""
