"""A roundtable's state, its persisted form inside S2, and the signed markers the daemon writes.

The models: the history entries (one contribution each: a seat's turn, the observer, a person,
with its tool calls and the server's usage), the independent opening round's, the options and
the state itself; :class:`Signer` signs what the daemon writes (pure: the key is the caller's).

Invariants
- The state of a roundtable lives in its own child session S2, in one ``noReply`` user message
  whose single text part has ``ignored: true``: OpenCode keeps such parts in the session but never
  sends them to a model (verified: a user message whose parts are all ignored is dropped from the
  request).
  The part is updated in place (``PATCH …/part/{partID}``), so a state write costs one small request
  and never adds a message.
- Two forms of the part, both read: the *card* form (its text is a short card for people,
  :mod:`roundtabled.core.card`; the state is canonical JSON text in ``metadata.roundtabled.body``)
  and the seed plugin's text form (docs/design.md, 'State format'), which
  roundtables written
  before the card still hold::

      [ROUNDTABLE META — INTERNAL ORCHESTRATION DATA — IGNORE FOR ANALYSIS]
      {"sessionID": …}
      [/ROUNDTABLE META]

  The daemon trusts a block only when the part's ``metadata.roundtabled.mac`` is a valid
  HMAC-SHA256 (key: the daemon's secret, see :class:`Signer`) over the JSON and S2's id. A block
  pasted by a user or echoed by an agent has no valid MAC and is ignored, so the
  seed's "last occurrence wins" rule cannot let a forged block win.
- Every prompt the daemon sends carries a second, ignored text part with a signed *turn marker*
  (kind, round, seat, agent). The markers are the durable record of which turns were prompted; with
  the answers' ``parentID`` they rebuild the history after a restart.
- Per-turn state writes are constant-size: the history is not persisted while the debate runs (it is
  derived from S2's messages); the final state (phase ``done``/``aborted``) carries the history with
  capped previews, as the seed's format does.

Rounds: ``current_round`` is 0-indexed as in docs/behaviour.md, 'State'; ``HistoryEntry.round`` is
1-based (what people
read: "Round 2/3")."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from roundtabled.core.positions import Position
from roundtabled.errors import StateCorruptError, StateForgedError, StateVersionError


class StateModel(BaseModel):
    """The base of every persisted model: camelCase names on the wire, unknown keys ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def dump(self) -> dict[str, Any]:
        """The JSON-ready form with the spec's camelCase names."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# ── the history entries ─────────────────────────────────────────────────────────────────────────


class Usage(StateModel):
    """Tokens and cost (USD) as OpenCode records them on assistant messages."""

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0

    def plus(self, other: Usage) -> Usage:
        """The sum of two usages."""
        return Usage(
            input=self.input + other.input,
            output=self.output + other.output,
            reasoning=self.reasoning + other.reasoning,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            cost=self.cost + other.cost,
        )

    @property
    def total_tokens(self) -> int:
        """Input + output + reasoning tokens."""
        return self.input + self.output + self.reasoning

    @property
    def recorded(self) -> bool:
        """Whether the server recorded any usage at all (a token or a cost)."""
        return bool(self.total_tokens or self.cache_read or self.cache_write or self.cost)


def tokens_in_out(usage: Mapping[str, Any]) -> tuple[int, int]:
    """``(in, out)`` tokens of a usage in its JSON form (:meth:`Usage.dump`, a turn of the export,
    a total of the status route): in = input + cache read + cache write (every prompt token the
    model took, cached or not), out = output + reasoning (docs/result.md, usage). Missing or
    ``null`` fields count 0."""

    def n(key: str) -> int:
        return int(usage.get(key) or 0)

    return n("input") + n("cacheRead") + n("cacheWrite"), n("output") + n("reasoning")


class ToolCallSummary(StateModel):
    """A tool an agent ran: its name and the first 500 characters of output, or ``"error"``."""

    tool_name: str
    output_preview: str


EntryKind = Literal["turn", "observer", "user", "interjection", "ranking"]
SeatEntryKind = Literal["turn", "observer", "interjection", "ranking"]
"""The kinds of entry a model's answer makes (:func:`roundtabled.core.history.
entry_from_answers`)."""


class HistoryEntry(StateModel):
    """One contribution to the debate (docs/behaviour.md, 'State').

    ``kind``: ``turn`` (a seat's turn), ``observer`` (the consolidation), ``user`` (a person wrote
    in S2, docs/behaviour.md, 'A person writes in S2'), ``interjection`` (the server's reply to that
    person's message).
    ``round`` is 1-based. ``response`` is the plain text of the reply (non-empty text parts, no
    reasoning); ``cut_off`` marks a turn aborted at the timeout whose partial text was kept.
    """

    agent: str
    round: int
    response: str
    tool_calls: list[ToolCallSummary] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    has_error: bool = False
    error: str | None = None
    cut_off: bool = False
    kind: EntryKind = "turn"
    seat: int | None = None
    message_id: str | None = Field(default=None, alias="messageID")
    usage: Usage = Field(default_factory=Usage)
    started_at: int | None = None
    finished_at: int | None = None
    finish: str | None = None
    """The last step's finish reason as the server recorded it (``stop``, ``length`` = cut at the
    output limit, ``tool-calls``, …); ``None`` when no reply was stored."""
    position: Position | None = None
    """The closing ``Position:`` line of the reply (``None``: the reply states none; see
    docs/result.md, never guessed)."""
    changed: str | None = None
    """The reply's ``Changed:`` line: why the seat's position changed (docs/result.md)."""

    @property
    def cut_by_cancel(self) -> bool:
        """A turn cut off by a cancel (its ``error`` says so), not at the time limit."""
        return self.cut_off and "cancel" in (self.error or "")

    @property
    def usage_unreported(self) -> bool:
        """A model's answer (a seat's turn, the observer's, a reply to a person) with text, for
        which the server recorded no usage. Its usage is unknown, not zero: a provider that
        sends no usage in its stream (llama.cpp's OpenAI-compatible server,
        docs/opencode-server.md) leaves every field 0, and so does a step cut off by the time
        limit or an abort (the model worked, its usage was never reported). So is a turn cut
        off by the time limit or a cancel with no text at all: its model request was sent and
        aborted, and what it used was never reported (docs/result.md, usage). A turn that
        failed without writing anything is not counted (the request may never have left)."""
        if self.kind == "user" or self.usage.recorded:
            return False
        return self.cut_off or bool(self.response.strip())


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """A sum of turns' usage that knows what it does not know: ``usage`` sums what the server
    recorded; ``unreported`` counts the answered turns it recorded nothing for
    (:attr:`HistoryEntry.usage_unreported`), so the sum is a lower bound when it is > 0 and
    unknown when every counted turn is such a turn (docs/result.md, usage)."""

    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    unreported: int = 0
    unpriced: int = 0
    """Counted turns of agents whose model lists no price (:attr:`RoundtableState.unpriced`):
    the server records a cost of 0 for them, which is no measurement, so the cost is unknown."""

    def plus(self, entry: HistoryEntry, unpriced: Collection[str] = ()) -> UsageTotal:
        """This total with ``entry`` counted; ``unpriced``: the agents whose model lists no
        price (:attr:`RoundtableState.unpriced`)."""
        return UsageTotal(
            self.usage.plus(entry.usage),
            self.turns + 1,
            self.unreported + int(entry.usage_unreported),
            self.unpriced + int(entry.agent in unpriced),
        )

    @property
    def unknown(self) -> bool:
        """Nothing was recorded: no turn counted yet (a turn still running has reported
        nothing), or none recorded any usage. A sum of nothing measured is no measured 0
        (docs/result.md, usage)."""
        return not self.usage.recorded

    @property
    def cost_unknown(self) -> bool:
        """The cost is unknown: nothing was recorded, or a counted turn's model lists no price."""
        return self.unknown or self.unpriced > 0

    def dump(self) -> dict[str, Any]:
        """The JSON form: the usage's fields (``null`` each when :attr:`unknown`; ``cost`` also
        when :attr:`cost_unknown`) and ``unreportedTurns`` (the sum is "at least" when > 0)."""
        fields = self.usage.dump()
        if self.unknown:
            fields = {k: None for k in fields}
        if self.cost_unknown:
            fields["cost"] = None
        return {**fields, "unreportedTurns": self.unreported}


# ── the state of an independent opening round (decided by roundtabled.core.opening) ─────────────


class OpeningSeat(StateModel):
    """One seat's opening turn.

    ``session_id``: its child session once adopted (``None`` before); ``message_id``: the prompt's
    client-chosen id; ``record_id``: the client-chosen id of its record in the roundtable's
    session; ``entry``: the settled turn (``None`` while it runs); ``recorded``: the record is
    written (or was found written).
    """

    seat: int
    agent: str
    message_id: str = Field(alias="messageID")
    record_id: str = Field(alias="recordID")
    session_id: str | None = Field(default=None, alias="sessionID")
    prompted_at: int | None = None
    abort_requested_at: int | None = None
    entry: HistoryEntry | None = None
    recorded: bool = False


class OpeningRound(StateModel):
    """The state of the independent opening round: one :class:`OpeningSeat` per seat and the
    topic record's id and whether it is written. Kept in :attr:`RoundtableState.openings`,
    persisted with the state block also once the round is done (a restart rebuilds round 1 of
    the history from it). Times are epoch ms."""

    seats: list[OpeningSeat]
    topic_record_id: str = Field(alias="topicRecordID")
    topic_recorded: bool = False
    started_at: int = 0
    round: int = 1
    """1 for the opening; 2 for a protocol's second independent round."""

    @property
    def settled(self) -> bool:
        """Every seat answered, failed or timed out."""
        return all(s.entry is not None for s in self.seats)

    @property
    def done(self) -> bool:
        """Every seat is settled and recorded: round 2 may start."""
        return self.settled and self.topic_recorded and all(s.recorded for s in self.seats)

    def entries(self) -> list[HistoryEntry]:
        """The settled turns in seat order (round 1 of the history)."""
        return [s.entry for s in self.seats if s.entry is not None]


# ── the roundtable's state ──────────────────────────────────────────────────────────────────────

STATE_VERSION = 1
"""Version of the persisted state layout; a block with another version is reported and skipped."""

META_HEADER = "[ROUNDTABLE META — INTERNAL ORCHESTRATION DATA — IGNORE FOR ANALYSIS]"
META_FOOTER = "[/ROUNDTABLE META]"
META_KEY = "roundtabled"
"""Key under which the daemon keeps its data in part and session ``metadata``."""

BUILTIN_OBSERVER = "built-in"
"""Value of ``observer`` meaning the daemon's own observer (docs/behaviour.md, 'The observer')."""
OBSERVER_AGENT = "roundtable-observer"
"""Hidden, tool-less OpenCode agent that runs the built-in observer (installed with the tools)."""


def observer_agent_of(observer: str) -> str:
    """The OpenCode agent that runs the observer turn of ``observer`` (an agent's name, or
    ``BUILTIN_OBSERVER`` for the daemon's own, run by ``OBSERVER_AGENT``)."""
    return OBSERVER_AGENT if observer == BUILTIN_OBSERVER else observer


MAX_ROUNDS = 50
"""Upper bound of ``rounds`` (docs/behaviour.md, 'The call'), per call (start or extend)."""
MAX_TOTAL_ROUNDS = 200
"""Upper bound of a roundtable's rounds over all its extensions (docs/design.md, 'Invariants':
everything bounded)."""
MAX_TITLE_CHARS = 200
"""Upper bound of ``title`` in characters (docs/behaviour.md, 'The call')."""
TOOL_OUTPUT_PREVIEW_MAX = 500
"""Characters of a tool's output kept in a :class:`ToolCallSummary` (docs/behaviour.md, 'What each
seat sees')."""
PERSISTED_RESPONSE_MAX = 4000
"""Characters of each response kept in the final persisted history (the full text stays in S2)."""
CONCLUDED_SUFFIX = " · CONCLUDED"
"""The end of S2's title once a roundtable concluded normally (completed, converged)."""
END_WORDS = ("CONCLUDED", "CANCELLED", "ENDED", "ABORTED")
"""How an ended roundtable's card opens and its S2 title ends (``" · CANCELLED"``):
:func:`end_word`."""
END_SUFFIXES = tuple(f" · {w}" for w in END_WORDS)
TITLE_PREFIX = "(Roundtable) - "
"""The prefix of a generated roundtable title (:func:`roundtabled.core.prompts.default_title`)."""


def shown_title(title: str) -> str:
    """A roundtable's title as every text a person reads names it (``start``, ``status``,
    ``list``, ``watch``, the export, the result's first line, the card): the session's title
    without the generated ``(Roundtable) - `` prefix
    (:func:`roundtabled.core.prompts.default_title`), which would repeat the word "Roundtable"
    of the line it is on; a title given with ``--title`` as it is.

    >>> shown_title("(Roundtable) - Should we split the monolith?")
    'Should we split the monolith?'
    """
    text = " ".join(title.split())
    return text.removeprefix(TITLE_PREFIX) or text


DELIMITER_TEXT = (
    "━━━ Roundtable Concluded ━━━\n"
    "Messages below this line are not part of the original debate.\n"
    "The result was consolidated in the main session."
)
"""The delimiter injected into S2 at the end (docs/behaviour.md, 'Phases', step 4)."""


class Phase(StrEnum):
    """Roundtable phase (docs/behaviour.md, 'State'). ``pending`` is never persisted: S2 does not
    exist yet."""

    ACTIVE = "active"
    OBSERVING = "observing"
    DONE = "done"
    ABORTED = "aborted"


class EndReason(StrEnum):
    """Why the debate stopped taking seat turns."""

    COMPLETED = "completed"
    REPETITION = "repetition"
    ALL_FAILED = "all-failed"
    CANCELLED = "cancelled"
    SESSION_DELETED = "session-deleted"
    PARENT_DELETED = "parent-deleted"
    OBSERVER_FAILED = "observer-failed"
    CONVERGED = "converged"
    """Every speaking seat held its label (or all held the same one): see docs/result.md."""
    BUDGET = "budget"
    """The next turn would have exceeded the token/cost/time budget."""
    TIMEOUT = "timeout"
    """The roundtable as a whole ran out of time."""
    FAILED = "failed"
    """The daemon could not go on (e.g. the server kept refusing): see ``errors``."""


class PermissionPolicy(StrEnum):
    """What the daemon answers when a seat's tool asks for permission."""

    REJECT = "reject"
    ALLOW_ONCE = "allow-once"
    ASK = "ask"


class ModelRef(StateModel):
    """An OpenCode model, sent as ``model`` on every prompt (the server makes it sticky)."""

    provider_id: str = Field(alias="providerID")
    model_id: str = Field(alias="modelID")

    def label(self) -> str:
        """``provider/model``."""
        return f"{self.provider_id}/{self.model_id}"


class VerdictRecord(StateModel):
    """The observer's structured verdict as the daemon received it (docs/result.md).

    ``data``: the validated verdict JSON (``None`` until one parsed); ``error``: why the last reply
    did not validate; ``repair_asked``: the one repair turn was prompted (never twice, also across
    restarts); ``fallback``: the verdict is built from the position ledger instead.
    """

    data: dict[str, Any] | None = None
    error: str | None = None
    repair_asked: bool = False
    fallback: bool = False


class PendingTurn(StateModel):
    """The turn in flight: the intent is persisted before the prompt is sent.

    ``prompted_at`` is ``None`` while only the intent exists; recovery then looks for
    ``message_id`` in S2 before prompting again. Times are epoch milliseconds.
    """

    kind: Literal["turn", "observer"]
    round: int
    seat: int
    agent: str
    message_id: str = Field(alias="messageID")
    prompted_at: int | None = None
    abort_requested_at: int | None = None
    error_seen_at: int | None = None
    error: str | None = None
    """The server's ``session.error`` text for this turn (``name: message``), with
    ``error_seen_at``."""
    reprompts: int = 0
    """Times this turn was sent again because the server swallowed it (docs/design.md, "Turns
    that never start or are swallowed")."""
    superseded: list[str] = Field(default_factory=list)
    """Ids of this turn's earlier prompts that stay in S2 unanswered (never adopted again)."""


class Extension(StateModel):
    """One ``extend`` call (docs/behaviour.md, 'Extend'): rounds from ``from_round`` (0-indexed) use
    this prompt."""

    from_round: int
    prompt: str
    mode: Literal["continuation", "new-topic"]


class Delivery(StateModel):
    """How the result reaches S1 exactly once.

    ``tool_call_id`` / ``tool_message_id`` identify the waiting ``roundtable`` tool call in S1;
    ``delivered_via`` records the one channel that carried the result.
    """

    tool_call_id: str | None = Field(default=None, alias="toolCallID")
    tool_message_id: str | None = Field(default=None, alias="toolMessageID")
    delivered_via: Literal["tool", "no-reply", "none"] | None = None
    no_reply_message_id: str | None = Field(default=None, alias="noReplyMessageID")


Until = Literal["rounds", "converged"]
"""When the debate stops taking seat turns: after ``rounds`` rounds, or once the panel converged."""
Opening = Literal["sequential", "independent"]
"""How round 1 runs: one seat after another, or every seat at once without seeing the others."""
ProtocolName = Literal["debate", "vote", "adaptive", "council"]
"""How the seats reach an answer (docs/deliberation.md, "Protocols"; the rules of each in
:mod:`roundtabled.core.protocols`): a debate in rounds, an independent vote, or an independent
opening that is debated only when no stance holds the threshold's confidence-weighted share."""
DEFAULT_ADAPTIVE_THRESHOLD = 0.67
"""``adaptive``'s stop share when the call gives none: a two-thirds confidence-weighted majority."""
ContextMode = Literal["full", "recent"]
"""What a seat sees: every earlier reply, or the opening round, a digest and the last round."""
ViewMode = Literal["patch", "plugin"]
"""How earlier turn prompts leave a seat's model request: marked ``ignored`` in S2 by a PATCH
(``patch``), or left out of the request in memory by the roundtable plugin (``plugin``: only on
a positive signal that it is loaded in S2's server instance, docs/plugin.md)."""

PLUGIN_MISSING_V2 = "the roundtabled plugin is not loaded by OpenCode 2.x"
"""How the note of a 2.x roundtable whose directory does not load the roundtabled plugin begins
(the 2.x shell adds where and what to run): said instead of the plugin mode's note, in the start
answer and in the result (:func:`roundtabled.core.deliberation.current_notes`)."""

MODE_NOTES: dict[ViewMode, str] = {
    "plugin": (
        "seats' model requests shaped by the roundtable plugin: earlier turn prompts left out "
        "in memory, no hiding write per turn"
    ),
    "patch": (
        "earlier turn prompts hidden by a PATCH per turn (the roundtable plugin did not report "
        "itself loaded in S2's server instance)"
    ),
}
"""The ``status.notes`` line of each mode a roundtable's turns ran in (docs/plugin.md). Not
something that went wrong: the observer's prompt, the honesty header and the CLI's warnings
leave them out (:func:`went_wrong`)."""


MODE_SWITCH_NOTES: dict[tuple[ViewMode, ViewMode], str] = {
    ("patch", "plugin"): (
        "earlier turn prompts hidden by a PATCH per turn until the roundtable plugin reported "
        "itself loaded in S2's server instance, then left out of the seats' model requests by "
        "the plugin (no hiding write per turn)"
    ),
    ("plugin", "patch"): (
        "seats' model requests shaped by the roundtable plugin until it no longer reported "
        "itself loaded in S2's server instance (e.g. the server restarted without it), then "
        "earlier turn prompts hidden by a PATCH per turn"
    ),
}
"""The one line said instead of both :data:`MODE_NOTES` when a roundtable's turns ran in both
modes, by the order the modes first ran in (two lines that each claim the whole debate read as a
contradiction)."""


RESUMED_NOTE = "resumed after a restart of roundtabled"
"""How a result says that its daemon was restarted during the roundtable and resumed it from the
state in S2 (:func:`roundtabled.core.lifecycle.resumed`); every note that starts so is kept in
the result's notes (:func:`roundtabled.core.deliberation.current_notes`)."""


def said_modes(notes: Sequence[str]) -> list[str]:
    """``notes`` with the two mode lines, when both are there, replaced by the one
    :data:`MODE_SWITCH_NOTES` line at the place of the first."""
    by_note = {v: k for k, v in MODE_NOTES.items()}
    ran = [by_note[n] for n in notes if n in by_note]
    if len(set(ran)) < 2:
        return list(notes)
    switch = MODE_SWITCH_NOTES[(ran[0], ran[1])]
    out: list[str] = []
    for n in notes:
        if n not in by_note:
            out.append(n)
        elif switch not in out:
            out.append(switch)
    return out


def went_wrong(notes: Sequence[str]) -> list[str]:
    """``notes`` without the mode lines of :data:`MODE_NOTES` and :data:`MODE_SWITCH_NOTES`:
    what a degraded result's header and warnings list (the mode is information, said as a plain
    note)."""
    modes = {*MODE_NOTES.values(), *MODE_SWITCH_NOTES.values()}
    return [n for n in notes if n not in modes]


class Budget(StateModel):
    """Limits of one call (start or extend); ``None`` = no limit on that dimension.

    ``tokens``: input + output tokens as the server records them on each assistant message;
    ``usd``: the server's ``cost``; ``seconds``: wall time since the call began.
    Rules in :mod:`roundtabled.core.deliberation` (docs/deliberation.md).
    """

    tokens: int | None = None
    usd: float | None = None
    seconds: float | None = None

    def empty(self) -> bool:
        """True when no dimension is limited."""
        return self.tokens is None and self.usd is None and self.seconds is None


class Options(StateModel):
    """Per-roundtable options (daemon defaults, overridable per call).

    ``turn_timeout``: seconds a turn may take before it is aborted and skipped (docs/behaviour.md,
    'Turn timeout': 300).
    ``loop_threshold``: Jaccard similarity above which the debate ends (docs/behaviour.md, 'Loops':
    0.85).
    """

    turn_timeout: float = 300.0
    loop_threshold: float = 0.85
    permission_policy: PermissionPolicy = PermissionPolicy.REJECT
    usage_footer: bool = True
    hide_past_prompts: bool = True
    cancel_summarize: bool = False
    """Set by a cancel: whether the observer still consolidates (else no further model request)."""
    until: Until = "rounds"
    budget: Budget | None = None
    opening: Opening = "sequential"
    context: ContextMode = "full"
    protocol: ProtocolName = "debate"
    """The protocol (:mod:`roundtabled.core.protocols`); a state written before protocols
    existed ran a debate (the default)."""
    adaptive_threshold: float | None = None
    """``adaptive`` only: the confidence-weighted share in (0.5, 1] at which the opening stops."""
    preset: str | None = None
    """The configuration preset the roundtable was started from (for display only)."""
    sides: dict[str, str] = Field(default_factory=dict)
    """Seat (agent name) → its assigned side (``for`` | ``against`` | ``neutral`` | a one-line
    brief; :mod:`roundtabled.core.sides`). Seats not named are free. A state written before
    sides existed has none (the default)."""
    call_started_at: int = 0
    """Epoch ms when the current call (start or the latest extend) began: budget seconds count
    from here."""
    call_from_round: int = 0
    """0-indexed first round of the current call: budget tokens and cost count from here."""


class AdaptiveOutcome(StateModel):
    """What ``adaptive``'s rule decided after the opening (:mod:`roundtabled.core.protocols.
    adaptive`): ``stopped`` at the opening or debated; ``stance`` the leading stance (``None``
    when no seat stated one); ``share`` its confidence-weighted share (``None``: unknown, a seat
    stated no confidence or no stance); ``threshold`` the share it needed; ``why`` in words."""

    stopped: bool
    stance: str | None = None
    share: float | None = None
    threshold: float
    why: str


class Finalization(StateModel):
    """Idempotence flags of phase 4 (docs/behaviour.md, 'Phases'): each step is done once, in order,
    across restarts."""

    delimiter_message_id: str | None = Field(default=None, alias="delimiterMessageID")
    verdict_shown: bool = False
    """The observer's reply in S2 shows the recorded verdict in words, not its JSON block
    (:func:`roundtabled.core.lifecycle.finalize`; docs/result.md, "The observer's verdict")."""
    title_done: bool = False
    toast_done: bool = False


class RoundtableState(StateModel):
    """Everything needed to resume a roundtable (docs/behaviour.md,
    'State').

    Identification: ``session_id`` (S2), ``parent_session_id`` (S1, ``None`` for a CLI roundtable
    without ``--parent``), ``directory`` (S2's project directory, for directory-scoped routes).
    Position: ``current_round`` (0-indexed) and ``current_agent_index`` name the next or pending
    seat turn. Times are epoch milliseconds.
    """

    version: int = STATE_VERSION
    session_id: str = Field(alias="sessionID")
    parent_session_id: str | None = Field(default=None, alias="parentSessionID")
    directory: str | None = None
    title: str
    agents: list[str]
    models: dict[str, ModelRef] = Field(default_factory=dict)
    unpriced: list[str] = Field(default_factory=list)
    """Agents (seats, the observer) whose model lists no price in the server's providers when
    the roundtable started: the server records a cost of 0 for their turns, which the result
    reports as unknown (docs/result.md, usage). Empty when the providers could not be read."""
    total_rounds: int
    observer: str = BUILTIN_OBSERVER
    prompt: str
    extensions: list[Extension] = Field(default_factory=list)
    current_round: int = 0
    current_agent_index: int = 0
    phase: Phase = Phase.ACTIVE
    history: list[HistoryEntry] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    """Sentences for the result's ``status.notes`` from other rules (budget spent and limit, a
    diversity warning…), in the words the user should read (docs/result.md)."""
    pending: PendingTurn | None = None
    openings: OpeningRound | None = None
    """The independent opening round (``opening: "independent"``), kept once done."""
    second_round: OpeningRound | None = None
    """A protocol's second independent round, run in the seats' sessions after the opening
    (:attr:`roundtabled.core.protocols.Protocol.second_round`), kept once done."""
    adaptive: AdaptiveOutcome | None = None
    """``adaptive`` only: what its rule decided once the opening was recorded (``None`` before)."""
    end_reason: EndReason | None = None
    summary: str | None = None
    verdict: VerdictRecord = Field(default_factory=VerdictRecord)
    stop_detail: str | None = None
    """Why the debate stopped early in words (converged, budget): for the observer and the
    result's notes (docs/deliberation.md)."""
    delivery: Delivery = Field(default_factory=Delivery)
    finalization: Finalization = Field(default_factory=Finalization)
    options: Options = Field(default_factory=Options)
    state_message_id: str | None = Field(default=None, alias="stateMessageID")
    state_part_id: str | None = Field(default=None, alias="statePartID")
    view: ViewMode = "patch"
    """The mode of the latest planned turn (:func:`roundtabled.core.machine.plan_turn`)."""
    unhidden: list[str] = Field(default_factory=list)
    """Answered turn prompts (message ids) the plugin mode left visible in S2: hidden by a PATCH
    before the next turn that runs in ``patch`` mode."""
    created_at: int = 0
    updated_at: int = 0

    @property
    def active(self) -> bool:
        """True while the daemon still drives this roundtable (active or observing)."""
        return self.phase in (Phase.ACTIVE, Phase.OBSERVING)

    def observer_agent(self) -> str:
        """The OpenCode agent that runs the observer turn."""
        return observer_agent_of(self.observer)

    def recorded_history(self) -> list[HistoryEntry]:
        """The history with the settled turns of the independent round(s) that are not in it
        yet (:attr:`openings`, :attr:`second_round`: they join the history once every seat's
        is recorded), oldest first: what a running roundtable's status counts and totals
        (docs/result.md, usage)."""
        extra = [
            *(self.openings.entries() if self.openings is not None else []),
            *(self.second_round.entries() if self.second_round is not None else []),
        ]
        known = {(e.agent, e.round, e.kind, e.message_id) for e in self.history}
        return [
            *self.history,
            *(e for e in extra if (e.agent, e.round, e.kind, e.message_id) not in known),
        ]

    def seat_turns(self) -> list[HistoryEntry]:
        """History entries that are seat turns, oldest first."""
        return [e for e in self.history if e.kind == "turn"]


# ── the persisted form: signing, the state block, the markers ───────────────────────────────────


class Signer:
    """HMAC-SHA256 over what the daemon writes into sessions (trust only our own blocks).

    ``key``: at least 16 bytes (the daemon's is its key file's, read and created by
    :func:`roundtabled.service.daemon.load_signer`; signing itself does no I/O).

    Raises:
        ValueError: ``key`` is shorter than 16 bytes.
    """

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("signing key must be at least 16 bytes")
        self._key = key

    def mac(self, purpose: str, session_id: str, payload: bytes) -> str:
        """Hex MAC of ``payload`` bound to ``purpose`` and the session it is written into."""
        msg = purpose.encode() + b"\0" + session_id.encode() + b"\0" + payload
        return hmac.new(self._key, msg, hashlib.sha256).hexdigest()

    def verify(self, purpose: str, session_id: str, payload: bytes, mac: object) -> bool:
        """True when ``mac`` is the MAC of ``payload`` (constant-time comparison)."""
        if not isinstance(mac, str):
            return False
        return hmac.compare_digest(self.mac(purpose, session_id, payload), mac)


def canonical_json(data: dict[str, Any]) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


def encode_state(
    state: RoundtableState, signer: Signer, *, card: str | None = None
) -> tuple[str, dict[str, Any]]:
    """Serialize ``state`` for a text part with ``ignored: true``; returns ``(text, metadata)``.

    With ``card`` (the card form, :mod:`roundtabled.core.card`): the text is that card for people
    and the state travels as canonical JSON text in ``metadata.roundtabled.body`` (a string: numbers
    inside it survive the server's JSON round trip byte for byte, which the MAC needs). Without
    it (the seed's text form, still read): the JSON is the text between
    ``[ROUNDTABLE META …]`` and ``[/ROUNDTABLE META]``. Either way ``metadata.roundtabled.mac``
    is the HMAC of the JSON bound to S2 (docs/design.md, state format).
    """
    body = canonical_json(state.dump())
    ours: dict[str, Any] = {
        "kind": "state",
        "v": STATE_VERSION,
        "mac": signer.mac("state", state.session_id, body),
    }
    if card is not None:
        ours["body"] = body.decode()
        return card, {META_KEY: ours}
    return f"{META_HEADER}\n{body.decode()}\n{META_FOOTER}", {META_KEY: ours}


def has_meta_text(text: str) -> bool:
    """True when ``text`` contains a ``[ROUNDTABLE META`` block (trusted or not)."""
    return "[ROUNDTABLE META" in text


def decode_state(text: str, metadata: object, session_id: str, signer: Signer) -> RoundtableState:
    """Parse and authenticate a state block written by :func:`encode_state` (either form).

    Args:
        text: the part's text.
        metadata: the part's ``metadata`` (anything; only a dict with our key can verify).
        session_id: the id of the session the part was read from (S2).

    Raises:
        StateForgedError: no valid MAC (pasted, echoed or edited block): never trust it.
        StateVersionError: a block this daemon version cannot read.
        StateCorruptError: the MAC is valid but the content does not parse.
    """
    ours = metadata.get(META_KEY) if isinstance(metadata, dict) else None
    if isinstance(ours, dict) and isinstance(ours.get("body"), str):
        body = str(ours["body"]).encode()
    else:
        start = text.find(META_HEADER)
        end = text.rfind(META_FOOTER)
        if start < 0 or end < start:
            raise StateForgedError("no META block in the part")
        body = text[start + len(META_HEADER) : end].strip().encode()
    if not isinstance(ours, dict) or not signer.verify("state", session_id, body, ours.get("mac")):
        raise StateForgedError("state block is not signed by this daemon")
    if ours.get("v") != STATE_VERSION:
        raise StateVersionError(f"state version {ours.get('v')!r}, expected {STATE_VERSION}")
    try:
        data = orjson.loads(body)
        state = RoundtableState.model_validate(data)
    except (orjson.JSONDecodeError, ValidationError) as exc:
        raise StateCorruptError(f"state block does not parse: {exc}") from exc
    if state.version != STATE_VERSION:
        raise StateVersionError(f"state version {state.version}, expected {STATE_VERSION}")
    if state.session_id != session_id:
        raise StateForgedError("state block belongs to another session")
    return state


MarkerKind = Literal["turn", "observer", "delimiter", "result", "opening"]


class Marker(StateModel):
    """What the daemon stamps on each message it writes (in an ignored part's metadata).

    ``kind``: ``turn`` (a seat's prompt), ``observer`` (the observer's prompt), ``delimiter``
    (the concluded delimiter in S2), ``result`` (the result injected into S1), ``opening`` (a
    seat's independent opening prompt in its own session, or its record in S2:
    :mod:`roundtabled.core.opening`).
    ``round`` 0-indexed; ``seat`` index into ``agents`` (``-1`` for non-seat messages).
    """

    kind: MarkerKind
    round: int = 0
    seat: int = -1
    agent: str = ""
    roundtable: str = ""
    """S2's id (for a ``result`` marker written into S1, the roundtable it came from)."""
    view: ViewMode | None = None
    """``plugin`` on a prompt sent in plugin mode: the roundtable plugin then leaves the earlier
    turn prompts out of the request; absent (``patch``) it changes nothing."""
    hide: tuple[int, int] | None = None
    """0-indexed first and last round whose seat turns the plugin leaves out of this prompt's
    requests (``context: "recent"``, :func:`roundtabled.core.deliberation.rounds_to_hide`)."""


def sign_marker(marker: Marker, session_id: str, signer: Signer) -> dict[str, Any]:
    """The part ``metadata`` for ``marker`` written into ``session_id``."""
    body = marker.dump()
    return {
        META_KEY: {
            **body,
            "v": STATE_VERSION,
            "mac": signer.mac("marker", session_id, canonical_json(body)),
        }
    }


def read_marker(metadata: object, session_id: str, signer: Signer) -> Marker | None:
    """The verified marker in a part's ``metadata``, or ``None`` (absent, forged or malformed)."""
    if not isinstance(metadata, dict):
        return None
    ours = metadata.get(META_KEY)
    if not isinstance(ours, dict) or ours.get("kind") == "state":
        return None
    body = {k: v for k, v in ours.items() if k not in ("mac", "v")}
    try:
        marker = Marker.model_validate(body)
    except ValidationError:
        return None
    if not signer.verify("marker", session_id, canonical_json(marker.dump()), ours.get("mac")):
        return None
    return marker


CARRIED_RESPONSE_MAX = 240
"""Characters of each reply kept in the state a 2.x seat turn's prompt carries (docs/design.md,
"The 2.x shell", *When the state is written*): every such prompt keeps its block, so whole
replies would make S2 grow with the square of the turns; a restart takes the full texts back
from S2 (``engine.v2_features.with_replies``)."""


def carried_form(state: RoundtableState) -> RoundtableState:
    """The state as a 2.x prompt carries it: each answer's reply cut to its first
    :data:`CARRIED_RESPONSE_MAX` characters (the full text is S2's reply to that entry's
    prompt); a person's note is kept whole (S2 holds no reply of that text to restore it
    from)."""
    return state.model_copy(
        update={
            "history": [
                e.model_copy(update={"response": e.response[:CARRIED_RESPONSE_MAX]})
                if e.kind != "user" and len(e.response) > CARRIED_RESPONSE_MAX
                else e
                for e in state.history
            ]
        }
    )


def persisted_form(state: RoundtableState) -> RoundtableState:
    """The state as written to S2: no history while active (derived from S2's messages), capped
    previews once finished (see module docstring)."""
    if state.active:
        return state.model_copy(update={"history": []})
    capped = [
        e.model_copy(update={"response": e.response[:PERSISTED_RESPONSE_MAX]})
        if len(e.response) > PERSISTED_RESPONSE_MAX
        else e
        for e in state.history
    ]
    return state.model_copy(update={"history": capped})


def end_word(phase: Phase, end_reason: EndReason | None) -> str:
    """The word for an ended roundtable (:data:`END_WORDS`): ``ABORTED``, ``CANCELLED``,
    ``CONCLUDED`` (completed, converged, or no reason recorded) or ``ENDED`` (any other end:
    every seat failed, the observer failed, a budget, a timeout …). The state card opens with
    it and S2's title ends with it (docs/behaviour.md)."""
    if phase == Phase.ABORTED:
        return "ABORTED"
    if end_reason == EndReason.CANCELLED:
        return "CANCELLED"
    if end_reason in (None, EndReason.COMPLETED, EndReason.CONVERGED):
        return "CONCLUDED"
    return "ENDED"
