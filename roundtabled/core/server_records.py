"""The product's own records of what a roundtable needs from an OpenCode server, of either major.

The engine and the rules of the core reason about these, never about a server's JSON: each
major's adapter (:mod:`roundtabled.opencode.port`, ``V1Port`` and ``V2Port``) reads its server's
shapes into them. docs/design.md, "The server port", says what each major does for each record.

Pure: no I/O, no clock. Token counts are tokens; an unknown count is ``None``, never 0
(docs/result.md, "Usage").
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from roundtabled.core.messages import MessageView
from roundtabled.core.state import ModelRef, Usage, tokens_in_out

__all__ = [
    "AgentRecord",
    "IndexedSession",
    "Interjection",
    "PromptRecord",
    "ProviderModels",
    "ServerCapabilities",
    "SessionMarks",
    "SessionMessages",
    "SessionRef",
    "SignedState",
    "StateBlock",
    "TurnKey",
    "TurnOutcome",
    "TurnPrompt",
    "TurnStatus",
    "stable_digest",
    "usage_in_out",
]


@dataclass(frozen=True, slots=True)
class AgentRecord:
    """An agent of a directory as a roundtable needs it.

    ``id``: the name a seat is given (``"pm"``). ``mode``: ``"primary"``, ``"subagent"``,
    ``"all"`` or ``None`` when the server says nothing. ``hidden``: not offered to people (the
    observer). ``color``: ``"#3498db"`` or ``None``. ``model``: the agent's configured model, or
    ``None`` (then a turn runs on the directory's default model). ``has_system_prompt``: the
    agent carries a prompt of its own (a seat without one speaks as the server's default agent).
    ``prompt``: that prompt's text (``None``: none; what the low-diversity warning and the dry
    run's estimate read, docs/deliberation.md). ``description``: the agent's one-line
    description (``None``: none). ``native``: one of OpenCode's own agents (``build``, ``plan``
    …), seatable but without a debater prompt (``GET /v1/agents`` lists it, docs/control-api.md).
    """

    id: str
    mode: str | None
    hidden: bool
    color: str | None
    model: ModelRef | None
    has_system_prompt: bool
    prompt: str | None = None
    description: str | None = None
    native: bool = False


@dataclass(frozen=True, slots=True)
class SessionRef:
    """A session: its ``id`` (``ses_…``), the project ``directory`` it runs in (``None`` when the
    server did not say), its parent's id, and its title."""

    id: str
    directory: str | None
    parent_id: str | None = None
    title: str | None = None


@dataclass(frozen=True, slots=True)
class SessionMarks:
    """What a session's metadata says it is to a roundtable in the 1.x engine's layout
    (docs/design.md, "State format"): ``indexed``: it holds a roundtable's index (it is a
    roundtable's own session, S2); ``opening_of``: S2's id when it is a seat's session of that
    roundtable's independent opening, else ``None``. A start checks S1 by them
    (:func:`roundtabled.core.validation.check_parent_session`)."""

    indexed: bool
    opening_of: str | None = None


@dataclass(frozen=True, slots=True)
class IndexedSession:
    """A session whose metadata holds a roundtable's index (1.x: ``metadata.roundtabled``,
    docs/design.md "State format"), as a listing of roundtables reads it: the ``session``, the
    index's ``phase`` (``"active"`` …; ``None`` when the index names none) and when the session
    was last ``updated`` (epoch ms; 0 when the server did not say). Only the signed state block
    decides whether it is a roundtable of this daemon."""

    session: SessionRef
    phase: str | None
    updated: int


@dataclass(frozen=True, slots=True)
class ProviderModels:
    """The models a directory's providers list (1.x: ``GET /config/providers``).

    ``labels``: every listed model as ``provider/model``. ``prices``: ``provider/model`` → its
    price as listed, (input, output) in USD per million tokens; a model listed without a price
    (or with 0 for both, which the server reports for every model without a configured cost) is
    left out: its price is unknown, never 0 (docs/result.md, "Usage").
    """

    labels: frozenset[str]
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TurnKey:
    """Which turn a prompt is: the roundtable (S2's id), the 0-based ``round``, the ``seat``
    (index into the seats; ``-1`` for the observer) and the ``attempt`` (0, then 1 for a turn the
    server swallowed and the machine prompts again: docs/design.md, "Turns that never start or
    are swallowed"). Two sends of the same key are the same turn."""

    roundtable: str
    round: int
    seat: int
    attempt: int = 0

    OBSERVER = -1

    def as_dict(self) -> dict[str, Any]:
        """The JSON form a prompt carries in its metadata."""
        return {
            "roundtable": self.roundtable,
            "round": self.round,
            "seat": self.seat,
            "attempt": self.attempt,
        }

    @classmethod
    def from_dict(cls, raw: object) -> TurnKey | None:
        """The key :meth:`as_dict` wrote, or ``None`` for anything else."""
        if not isinstance(raw, Mapping):
            return None
        roundtable, rnd, seat = raw.get("roundtable"), raw.get("round"), raw.get("seat")
        attempt = raw.get("attempt", 0)
        if not isinstance(roundtable, str):
            return None
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (rnd, seat, attempt)):
            return None
        assert isinstance(rnd, int) and isinstance(seat, int) and isinstance(attempt, int)
        return cls(roundtable, rnd, seat, attempt)

    def header(self, agent: str) -> str:
        """The line people read above the turn when the caller gives none:
        ``── pm · round 1 ──`` (rounds counted from 1), ``── observer · after round 2 ──``."""
        if self.seat == self.OBSERVER:
            return f"── {agent} · observer after round {self.round + 1} ──"
        return f"── {agent} · round {self.round + 1} ──"

    def digest(self) -> str:
        """26 lowercase hex digits that only this key gives (SHA-256 of its canonical form): the
        tail of a prompt id the server keeps, so that sending the turn again names the same
        prompt (OpenCode 2.x answers a used id with the original admission)."""
        return stable_digest("turn", self.roundtable, self.round, self.seat, self.attempt)


def stable_digest(*parts: object) -> str:
    """26 lowercase hex digits of SHA-256 over ``parts`` (joined by a unit separator): the
    tail of an id that names the same thing every time it is made (a turn, a delivery)."""
    canon = "\x1f".join(str(p) for p in parts)
    return hashlib.sha256(canon.encode()).hexdigest()[:26]


class TurnStatus(StrEnum):
    """Where a turn stands, read from the server (level-triggered: docs/design.md)."""

    QUEUED = "queued"
    """Admitted, and no execution of it seen yet (2.x: in the session's inbox; 1.x: stored with
    no reply while the session is idle: not started yet, or never will be, which 1.x says only
    in a ``session.error`` event)."""
    RUNNING = "running"
    ANSWERED = "answered"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    MISSING = "missing"
    """The server holds no prompt of that id: never stored (1.x: an unknown agent), or, on 1.x,
    not stored yet (``prompt_async`` stores its message milliseconds after answering)."""


@dataclass(frozen=True, slots=True)
class Interjection:
    """A prompt nobody of the roundtable sent that the server delivered after the pending
    turn's prompt and before the next turn's, and the reply to it (2.x: a person's note posted
    into S2 while a seat's turn runs is steered into that execution and gets a reply of its own
    after the turn's; one posted right after the turn runs an execution of its own;
    docs/design.md, "The 2.x shell").

    ``prompt_id``: the note's message id. ``text``: what the person wrote. ``created``: epoch ms
    it was delivered. ``reply``: the reply's text (the steps' text joined); ``agent``/``model``:
    who answered (the session's agent then: the seat's), ``None`` without a reply.
    ``tokens_in``/``tokens_out``: as :class:`TurnOutcome`'s (``None``: unknown). ``completed``:
    the execution that answered it has ended (until then the next turn waits, as it waits for
    a busy session on 1.x). ``error``: the server's words for a failed reply.
    """

    prompt_id: str
    text: str
    created: int
    reply: str = ""
    agent: str | None = None
    model: ModelRef | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    finish: str | None = None
    completed: bool = False
    error: str | None = None


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What a turn gave.

    ``text``: the reply's text (the steps' text joined; partial when interrupted). ``agent`` and
    ``model``: who actually answered (the last step's), ``None`` without a reply. ``tokens_in``
    (prompt tokens, cached ones included) and ``tokens_out`` (output and reasoning), summed over
    the steps, ``None`` when unknown (no reply, or a provider that reported no usage).
    ``finish``: the last step's finish reason (``stop``, ``length``, …). ``truncated``: the
    reply was cut at the output limit (finish ``length``). ``error``: the server's words for a
    failed turn (``"provider.invalid-request: …"``, ``"APIError: …"``), else ``None``.
    ``interjections``: the prompts nobody of ours sent that the same execution delivered after
    the turn's reply, each with its reply (:class:`Interjection`; 1.x: always empty, its engine
    reads a person's message from S2 itself).
    """

    status: TurnStatus
    text: str = ""
    agent: str | None = None
    model: ModelRef | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    finish: str | None = None
    truncated: bool = False
    error: str | None = None
    interjections: tuple[Interjection, ...] = ()

    @property
    def over(self) -> bool:
        """The turn ended (answered, failed or interrupted)."""
        return self.status in (TurnStatus.ANSWERED, TurnStatus.FAILED, TurnStatus.INTERRUPTED)

    def words(self) -> str:
        """One line for people: ``answered by pm on scripted/debater-1``, ``failed: …``."""
        who = ""
        if self.agent:
            who = f" by {self.agent}" + (f" on {self.model.label()}" if self.model else "")
        if self.status is TurnStatus.FAILED:
            return f"failed{who}: {self.error or 'the server gave no reason'}"
        if self.status is TurnStatus.ANSWERED and self.truncated:
            return f"answered{who}, cut at the output limit"
        return f"{self.status.value}{who}"


@dataclass(frozen=True, slots=True)
class PromptRecord:
    """A user message of a roundtable's session as the hiding rule and the export read it.

    ``id``: the message's id. ``key``: the :class:`TurnKey` it carries when the daemon sent it
    as a turn (``None``: a person's message, or another kind). ``replies``: the ids of the
    assistant messages that answer it, oldest first (what a request holds of its reply).
    ``text``: the reply's text (the steps' text joined). ``state``: the state block the prompt
    carries (2.x: a seat turn's state rides with its prompt, docs/design.md "The 2.x shell",
    *When the state is written*; ``None``: none), trusted only once decoded."""

    id: str
    key: TurnKey | None
    replies: tuple[str, ...] = ()
    text: str = ""
    state: SignedState | None = None


def usage_in_out(usage: Usage, *, ended: bool) -> tuple[int | None, int | None]:
    """``(tokens in, tokens out)`` of a turn's summed ``usage`` (every step's: a turn that failed,
    was interrupted or was cut at the output limit after steps the server recorded usage for
    used those tokens). Usage that is all 0 reads as unknown, never as a measured 0 (a provider
    that reports no usage leaves the same zeros: docs/opencode-server.md, "Usage a provider
    never reports"); so does a turn still running (``ended`` false: its sum is not final)."""
    if not ended or not usage.recorded:
        return None, None
    return tokens_in_out(usage.dump())


@dataclass(frozen=True, slots=True)
class SessionMessages:
    """Every message of a 1.x session as one read gives them (docs/design.md, "The server
    port"): ``views`` (oldest first) and ``pasted_meta``, the ids of the user messages other
    than the state block's holding a [ROUNDTABLE META] block in their text (pasted by a person:
    text, never state; docs/design.md, "State format")."""

    views: tuple[MessageView, ...]
    pasted_meta: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SignedState:
    """A roundtable's state block as the daemon signs it (:func:`roundtabled.core.state.
    encode_state`): ``text`` (the card people read) and ``metadata`` (``{"roundtabled": {"kind":
    "state", "v", "mac", "body"}}``). The adapters store and return it as is; only
    :func:`roundtabled.core.state.decode_state` decides whether to trust it."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StateBlock:
    """The state block as the 1.x engine lays it out (docs/design.md, "State format"): the
    signed ``state`` in the part ``part_id`` of S2's message that holds it (written in place
    later)."""

    part_id: str
    state: SignedState


@dataclass(frozen=True, slots=True)
class TurnPrompt:
    """A turn's prompt as the 1.x engine sends it (the machine chose the id and adopts a stored
    prompt by its marker, so sending it reads nothing first; docs/design.md, "Exactly once").

    ``message_id``: the prompt's id (``msg_…``, fresh and ascending). ``agent``: the seat's or
    the observer's agent. ``text``: what the model reads. ``label``: the header people read.
    ``marker``: the daemon's signed marker metadata (:func:`roundtabled.core.state.sign_marker`).
    ``model``: the seat's own model (``None``: the agent's, as the server chooses). ``block``:
    the state block when this prompt's message is the block's too (turn 1 of a fresh
    roundtable)."""

    message_id: str
    agent: str
    text: str
    label: str
    marker: Mapping[str, Any]
    model: ModelRef | None = None
    block: StateBlock | None = None


HidingMode = Literal["edit", "plugin"]


@dataclass(frozen=True, slots=True)
class ServerCapabilities:
    """What one server can do for a roundtable.

    ``major``/``version``: ``1``/``"1.18.33"``, ``2``/``"2.1.2"``. ``exact_no_reply``: a message
    can be stored without a model turn (1.x ``noReply``). ``toasts``: the daemon can show a toast
    in the person's TUI over HTTP. ``hiding``: how earlier turns are kept out of later model
    requests: ``"edit"`` (the daemon edits stored parts) or ``"plugin"`` (only a server plugin can,
    in the request it builds). ``model_per_prompt``: a prompt names its agent and model (1.x);
    else both are session state switched before each turn (2.x).
    """

    major: int
    version: str | None
    exact_no_reply: bool
    toasts: bool
    hiding: HidingMode
    model_per_prompt: bool

    def limits(self) -> tuple[str, ...]:
        """What this server cannot do, one sentence each (empty: nothing missing)."""
        name = f"OpenCode {self.version or f'{self.major}.x'}"
        out: list[str] = []
        if not self.exact_no_reply:
            out.append(
                f"{name} cannot store a message without a model turn: the result waits in the "
                "asking session's inbox and its model reads it with the next prompt."
            )
        if not self.toasts:
            out.append(
                f"{name} has no HTTP route for a toast: progress and the end are shown in the "
                "TUI only by the TUI part of the plugin (install-tool --opencode 2)."
            )
        if self.hiding == "plugin":
            out.append(
                f"{name} cannot edit a stored message: earlier turns are kept out of later "
                "requests only by the roundtable plugin."
            )
        return tuple(out)
