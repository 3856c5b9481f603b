"""The machine's vocabulary: what it observes and the commands it gives the shell.

An :class:`Observation` is what the worker read from the server (or the handoff saw on the event
stream) for one decision; a :class:`Decision` is the machine's answer: the new state, commands in
execution order, and the next deadline. Each command says all its executor needs (no command is
read together with the one after it). Pure data; times are epoch milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from roundtabled.state import HistoryEntry, Marker, RoundtableState
from roundtabled.wire import MessageView, Status, UserView


@dataclass(frozen=True, slots=True)
class Cancel:
    """A request to stop the debate (CLI ``cancel``, control API, or the tool's S1 aborted).

    ``summarize``: let the observer consolidate what exists (else no further model request).
    """

    summarize: bool = False
    reason: str = "cancelled by the user"


@dataclass(frozen=True, slots=True)
class Observation:
    """What the engine read from the server for one decision.

    ``messages``: S2's messages from the pending turn's user message on (inclusive), oldest first
    (all of them after a recovery); ``pending_found`` says whether that user message exists.
    ``status``: S2's status from ``GET /session/status`` (events are not trusted for it).
    ``new_id``: a fresh message id the machine may use for a new turn's intent.
    """

    now: int
    status: Status
    messages: tuple[MessageView, ...] = ()
    pending_found: bool = False
    accepted: bool = False
    """The server answered 204 to the pending prompt in this process: it is stored or about to be
    (the user message is not always visible at once, e.g. on the first prompt after a server
    start), so it is never sent again; only the turn timeout bounds the wait."""
    deleted: bool = False
    parent_deleted: bool = False
    cancel: Cancel | None = None
    new_id: str = ""
    error: tuple[int, str] | None = None
    """A ``session.error`` of S2 seen since the pending prompt was sent: (epoch ms, the
    server's ``name: message``)."""


@dataclass(frozen=True, slots=True)
class PersistState:
    """Write the state block in S2 (PATCH of the state part)."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """Send a turn: ``prompt_async`` with ``message_id``, ``agent``, the agent's model, ``text``
    and the signed ``marker``. ``hide`` lists earlier turn prompts to mark ``ignored`` first (they
    must not reach later models; only the opening prompt stays visible)."""

    message_id: str
    agent: str
    text: str
    marker: Marker
    hide: tuple[UserView, ...] = ()
    send: bool = True
    """False: the prompt is already in S2 (found by its marker); only hide and persist."""


@dataclass(frozen=True, slots=True)
class Abort:
    """``POST /session/{S2}/abort``."""


@dataclass(frozen=True, slots=True)
class Toast:
    """A TUI toast: ``variant`` info | success | warning | error.

    ``progress``: a progress toast (shown only with the setting ``progress_toasts``): ``turn``
    (a finished turn; the shell shows at most one per 2 s per roundtable) or ``phase`` (a phase
    change); ``None`` for the others (start, failures, the end), always shown.
    """

    message: str
    variant: str = "info"
    progress: Literal["turn", "phase"] | None = None


@dataclass(frozen=True, slots=True)
class Finalize:
    """Phase 4 (spec §4): deliver to S1, delimiter, title, toast — each step idempotent.

    ``deliver``: ``result`` (the observer's consolidation), ``interruption`` (S2 deleted, spec
    §7.2), ``none`` (S1 deleted: nothing is posted anywhere).
    """

    deliver: Literal["result", "interruption", "none"]
    write_s2: bool = True


@dataclass(frozen=True, slots=True)
class TurnRecorded:
    """A turn finished and was added to the history (for progress feeds and logs)."""

    entry: HistoryEntry


Command = PersistState | Prompt | Abort | Toast | Finalize | TurnRecorded


@dataclass(slots=True)
class Decision:
    """The machine's output: the new state, commands in execution order, and the next deadline
    (epoch ms) at which the engine must re-observe even without an event (``None``: no deadline)."""

    state: RoundtableState
    commands: list[Command] = field(default_factory=list)
    wake_at: int | None = None
