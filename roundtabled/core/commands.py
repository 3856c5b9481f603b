"""The core's vocabulary: what it observes and the commands it gives the shell.

An :class:`Observation` is what the worker read from the server (or the handoff saw on the event
stream) for one decision; a :class:`Decision` is the machine's answer: the new state, commands in
execution order, and the next deadline. Each command says all its executor needs (no command is
read together with the one after it). One vocabulary for every protocol: the machine's commands
(:data:`Command`) and those of the independent rounds every seat answers in its own session
(:data:`OpeningCommand`, decided by :mod:`roundtabled.core.opening`), all carried out by the one
executor (:mod:`roundtabled.engine.executor`). Pure data; times are epoch milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from roundtabled.core.messages import MessageView, Status, UserView
from roundtabled.core.state import HistoryEntry, Marker, RoundtableState


@dataclass(frozen=True, slots=True)
class Cancel:
    """A request to stop the debate (CLI ``cancel``, control API, or the tool's S1 aborted).

    ``summarize``: let the observer consolidate what exists (else no further model request).
    """

    summarize: bool = False
    reason: str = "cancelled by the user"


@dataclass(frozen=True, slots=True)
class CancelAnswer:
    """What one ``cancel`` request gets (:func:`join_cancel`).

    ``pending``: the cancel the worker is to decide on next (``None``: leave it as it is);
    ``refusal``: why the request is refused (the caller is told, in an ``Error:`` line naming
    ``summarize``), ``None`` when it is granted; ``joined``: it joined a cancel already under
    way (no second write, no second abort).
    """

    pending: Cancel | None
    refusal: str | None = None
    joined: bool = False


def join_cancel(pending: Cancel | None, taken: Cancel | None, new: Cancel) -> CancelAnswer:
    """Decide one ``cancel`` request against the cancels already asked for a roundtable, so two
    callers at once each get an honest answer (``docs/design.md``, "Two callers at once").

    Args:
        pending: a cancel asked for and not yet taken by the roundtable's worker.
        taken: a cancel the worker has taken (decided on, or deciding on now), or the one
            recorded in the state (end reason ``cancelled``).
        new: the request.

    Rules: nothing under way → ``new`` is the pending cancel. A cancel still pending absorbs
    ``new``: the observer runs if either asked for it (a plain cancel's caller still gets its
    stop). Once a cancel is taken, a request asking no more than it asked joins it; a
    ``summarize`` meeting a plain cancel already taken is refused (the observer will not run),
    never dropped silently.
    """
    if taken is not None:
        if new.summarize and not taken.summarize:
            return CancelAnswer(
                None,
                refusal="summarize: the roundtable is already being cancelled without a "
                "summary; the observer will not run",
            )
        return CancelAnswer(None, joined=True)
    if pending is not None:
        merged = Cancel(summarize=pending.summarize or new.summarize, reason=pending.reason)
        return CancelAnswer(merged, joined=True)
    return CancelAnswer(new)


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
    plugin: str | None = None
    """The version of the roundtable plugin that reported itself loaded in S2's server instance
    (a positive signal, :mod:`roundtabled.engine.plugins`), or ``None``: no such signal."""
    from_events: bool = False
    """Taken from the event mirror (a fast handoff) instead of a read of S2: a turn planned from
    it is prompted first and its intent written after (:attr:`Prompt.persist_first` false)."""


@dataclass(frozen=True, slots=True)
class PersistState:
    """Write the decision's state into S2's state block (PATCH of the state part); ``index``:
    also the session's index metadata (the start-up scan reads it), when the phase changed."""

    index: bool = False


@dataclass(frozen=True, slots=True)
class Prompt:
    """Start a turn: write its intent (the decision's state, which names it as pending), hide
    earlier turn prompts, and send ``prompt_async`` with ``message_id``, ``agent``, the agent's
    model, ``text`` and the signed ``marker``.

    ``hide`` lists earlier turn prompts to mark ``ignored`` before the prompt goes out (they must
    not reach later models; only the opening prompt stays visible). ``persist_first``: the
    intent is written (with the hiding, concurrently) before the prompt; false for a fast
    handoff, where the prompt goes first and the intent is written after it (the prompt's signed
    marker is the durable record meanwhile, machine invariant 4). ``index``: the intent's write
    also updates the session's index (the phase changed)."""

    message_id: str
    agent: str
    text: str
    marker: Marker
    hide: tuple[UserView, ...] = ()
    send: bool = True
    """False: the prompt is already in S2 (found by its marker); only persist and hide."""
    persist_first: bool = True
    index: bool = False


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
class ReleaseResult:
    """Make the result of the debate available to pollers (once; later ones do nothing). A
    completed debate's result goes before its final state is written (it is derived from S2's
    messages alone); every other end's after (it lives only in that state)."""


@dataclass(frozen=True, slots=True)
class Finalize:
    """The debate is over: announce it; phase 4 (:mod:`roundtabled.core.lifecycle`) follows."""


@dataclass(frozen=True, slots=True)
class TurnRecorded:
    """A turn finished and was added to the history (for progress feeds and logs)."""

    entry: HistoryEntry


Command = PersistState | Prompt | Abort | Toast | ReleaseResult | Finalize | TurnRecorded


# ── the independent rounds' commands (roundtabled.core.opening: every protocol's parallel turns) ──


@dataclass(frozen=True, slots=True)
class CreateSeatSession:
    """Create the seat's session as a child of the roundtable (S2), with ``title``; the adapter
    marks it with the roundtable and the seat (the session's metadata), so that the next read
    adopts it from S2's children."""

    seat: int
    title: str


@dataclass(frozen=True, slots=True)
class PromptSeat:
    """``prompt_async`` into the seat's session with ``message_id``, the agent's model, the text
    and the signed ``marker`` (signed for that session). The state naming it is written first."""

    seat: int
    session_id: str
    message_id: str
    agent: str
    text: str
    marker: Marker
    label: str = ""
    """The header people read above the prompt (:meth:`roundtabled.core.opening.Setup.header`;
    ``""``: the opening's, which the executor makes with the seat's side)."""


@dataclass(frozen=True, slots=True)
class AbortSeat:
    """``POST /session/{session_id}/abort``: the seat timed out or the round is cancelled."""

    session_id: str


@dataclass(frozen=True, slots=True)
class SeatSettled:
    """A seat's opening turn is over (in memory; its record follows once all are settled)."""

    entry: HistoryEntry


@dataclass(frozen=True, slots=True)
class RecordOpening:
    """Post a ``noReply`` message into the roundtable's session with ``message_id`` unless it
    exists: ``text`` visible, ``marker`` signed (``seat`` -1: the topic record)."""

    message_id: str
    text: str
    marker: Marker


@dataclass(frozen=True, slots=True)
class PersistRound:
    """Write the state naming the round as it now is (before any prompt it names goes out)."""


OpeningCommand = (
    CreateSeatSession | PromptSeat | AbortSeat | SeatSettled | RecordOpening | PersistRound
)


@dataclass(slots=True)
class Decision:
    """The machine's output: the new state, commands in execution order, and the next deadline
    (epoch ms) at which the engine must re-observe even without an event (``None``: no deadline)."""

    state: RoundtableState
    commands: list[Command] = field(default_factory=list)
    wake_at: int | None = None
