"""A roundtable's life after its turns, decided: the orphan at recovery and phase 4
(finalization and delivery), as pure functions (a cancel is :func:`roundtabled.core.machine.
with_cancel`, an extend :func:`roundtabled.engine.launch.extended`).

Like :mod:`roundtabled.core.machine`, no I/O and no clock: the shell reads what a step needs (for
phase 4: :func:`final_reads`, then the facts in a :class:`FinalFacts`), calls the function and
executes the commands in order. Phase 4 is level-triggered: each call plans what is left, and
every effect is preceded by the write of the state that records it (a message id chosen before
its message is posted) or is looked for on the server before it is repeated, so a crash at any
point repeats nothing (``docs/design.md``, "exactly once"). Times are epoch milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from roundtabled.core import result
from roundtabled.core.commands import Abort, Decision, PersistState, ReleaseResult, Toast
from roundtabled.core.messages import TextPart
from roundtabled.core.observer_verdict import recorded_line, shown_text
from roundtabled.core.state import (
    END_SUFFIXES,
    META_KEY,
    RESUMED_NOTE,
    EndReason,
    Marker,
    Phase,
    RoundtableState,
    Signer,
    end_word,
    read_marker,
    sign_marker,
)

TOOL_POLL_GRACE_MS = 130_000
"""How long a finished result waits for the tool shim to poll before going to S1 as a noReply
(the shim retries for up to 120 s while the daemon restarts)."""
DELIVERY_RETRY_MS = 1_000
"""A result that cannot be delivered yet (S1 busy, the tool call still waiting) is looked at
again after this long."""
TOOL_RETURN_RETRY_MS = 100
"""A result the waiting tool call has taken is looked for in its part in S1 again after this
long (the shim returns it at once; the server stores the part within milliseconds)."""
BUSY_S2_RETRY_MS = 500
"""The delimiter waits this long for a busy S2 (a noReply into a busy session triggers a
model turn)."""

DeliverKind = Literal["result", "interruption", "none"]


def deliver_kind(state: RoundtableState) -> DeliverKind:
    """What S1 gets: ``result`` (the observer's consolidation), ``interruption`` (S2 deleted),
    ``none`` (S1 deleted: nothing is posted anywhere)."""
    if state.end_reason == EndReason.PARENT_DELETED:
        return "none"
    if state.end_reason == EndReason.SESSION_DELETED:
        return "interruption"
    return "result"


def writes_s2(state: RoundtableState) -> bool:
    """Whether the daemon still writes into S2: not once S2 or S1 is gone (S2 goes with S1)."""
    return state.end_reason not in (EndReason.SESSION_DELETED, EndReason.PARENT_DELETED)


def result_payload(state: RoundtableState) -> dict[str, Any]:
    """The result pollers get (control API) and whose ``text`` goes to S1.
    The result contract of docs/result.md is under ``result``:
    ``roundtabled.core.result.payload``."""
    return result.payload(state, deliver_kind(state))


def delivery_mark(state: RoundtableState, signer: Signer) -> dict[str, Any] | None:
    """The signed mark the tool shim stores in its tool part's ``metadata`` (under
    :data:`META_KEY`) beside the result it returns, so that S1 itself says the result reached it
    (:func:`tool_call_holds_result`); ``None`` for a roundtable without a parent session. The
    same marker as the label of the fallback message (kind ``result``, signed for S1)."""
    s1 = state.parent_session_id
    if s1 is None:
        return None
    mark: dict[str, Any] = sign_marker(
        Marker(kind="result", roundtable=state.session_id), s1, signer
    )
    return dict(mark[META_KEY])


def tool_may_take(state: RoundtableState) -> bool:
    """Whether the waiting tool call's poll may take the result: not once the fallback message
    was chosen (its id written), so that S1 never gets both; that poll is told where the result
    went instead."""
    delivery = state.delivery
    return delivery.delivered_via != "no-reply" and delivery.no_reply_message_id is None


def tool_call_holds_result(
    state: RoundtableState, status: str | None, output: str, metadata: object, signer: Signer
) -> bool:
    """Whether the tool call in S1 that started the roundtable (its part's ``status``,
    ``output`` and ``metadata``) holds the roundtable's result: its metadata carries the mark of
    :func:`delivery_mark`. A shim installed before the mark existed stores none; its only
    completed output that names S2 and is no ``Error:`` is the result. Every other end of the
    tool call (an error, an abort, the shim's ``Error:`` answers, which may name S2) holds no
    result, whatever the daemon believes it handed out (docs/design.md, "Exactly once")."""
    s1 = state.parent_session_id
    marker = read_marker(metadata, s1, signer) if s1 else None
    if marker is not None:
        return marker.kind == "result" and marker.roundtable == state.session_id
    return (
        status == "completed"
        and not output.lstrip().startswith("Error:")
        and state.session_id in output
    )


def concluded_title(title: str, word: str = "CONCLUDED") -> str:
    """S2's title once the roundtable ended: ``title`` and `` · WORD`` (``word`` one of
    :data:`~roundtabled.core.state.END_WORDS`, :func:`~roundtabled.core.state.end_word`), the
    suffix once, however often applied and whichever an earlier end left (an extension's)."""
    base = title
    while (ended := next((s for s in END_SUFFIXES if base.endswith(s)), None)) is not None:
        base = base[: -len(ended)]
    return f"{base} · {word}"


def end_toast(state: RoundtableState) -> tuple[str, str]:
    """The toast that ends a roundtable: ``(message, variant)``."""
    msg = {
        EndReason.SESSION_DELETED: "Roundtable interrupted",
        EndReason.PARENT_DELETED: "Roundtable aborted: its parent session was deleted",
        EndReason.CANCELLED: "Roundtable cancelled",
        EndReason.FAILED: "Roundtable failed",
    }.get(state.end_reason or EndReason.COMPLETED, "Roundtable concluded")
    variant = "success" if msg == "Roundtable concluded" else "warning"
    return f"{msg}: {state.title}", variant


def orphaned(state: RoundtableState) -> Decision:
    """A roundtable found at start-up whose parent session (S1) is gone: abort whatever S2 still
    runs and write it as aborted and finalized (nothing is delivered: there is nobody to tell)."""
    new = state.model_copy(
        update={
            "phase": Phase.ABORTED,
            "end_reason": EndReason.PARENT_DELETED,
            "pending": None,
            "finalization": state.finalization.model_copy(update={"toast_done": True}),
        }
    )
    return Decision(new, [Abort(), PersistState(index=True)])


def newest_state(
    stored: RoundtableState, carried: Sequence[tuple[str, RoundtableState]]
) -> RoundtableState:
    """The newest of a roundtable's states in S2, as a restarted daemon resumes it (OpenCode
    2.x: a seat turn's state rides with its prompt, the other writes go to S2's metadata;
    docs/design.md "The 2.x shell", *When the state is written*).

    Args:
        stored: the authenticated state of S2's metadata.
        carried: ``(prompt id, the authenticated state that prompt carries)``, in S2's order.

    Returns:
        The state of the newest prompt that ``stored`` does not know (neither a recorded turn's
        prompt nor its pending one) and whose own pending turn is that prompt, else ``stored``.
        One writer per roundtable: every write after a prompt was sent knows that prompt, so a
        prompt ``stored`` does not know was sent after ``stored`` was written.
    """
    known = {e.message_id for e in stored.history if e.message_id}
    if stored.pending is not None:
        known.add(stored.pending.message_id)
    for prompt_id, state in reversed(carried):
        pend = state.pending
        if prompt_id not in known and pend is not None and pend.message_id == prompt_id:
            return state
    return stored


def resumed(state: RoundtableState) -> RoundtableState:
    """``state`` as a restarted daemon resumes it, with a note saying so and where (the round
    and seat of the pending or next turn, the observer's turn, or phase 4 once it had ended):
    OpenCode 2.x shows no toast, so the result says it (docs/design.md, "The 2.x shell"). No
    turn is lost by a resume (each is the same prompt on the server), so it is information, not
    a degradation; a turn that was lost says so in its seat's notes."""
    if state.phase == Phase.ACTIVE and state.agents:
        seat = state.agents[min(state.current_agent_index, len(state.agents) - 1)]
        where = f"at round {state.current_round + 1}, {seat}'s turn"
    elif state.active:
        where = "at the observer's turn"
    else:
        where = "after the debate had ended"
    note = f"{RESUMED_NOTE} {where} (no turn was sent twice)"
    if note in state.notes:
        return state
    return state.model_copy(update={"notes": [*state.notes, note]})


# ----------------------------------------------------------------------------------------------
# Phase 4
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FinalFacts:
    """What the shell read for one step of phase 4.

    ``consumed``: the waiting tool call took the result (it polled with its call id): a hint to
    look again soon, never proof that S1 holds it.
    ``tool_call``: ``(status, holds_result)`` of the tool part in S1 that started the roundtable
    (status pending | running | completed | error, or ``None`` when its message is gone;
    ``holds_result``: :func:`tool_call_holds_result`); ``None`` when not read.
    ``s1_busy`` / ``s2_busy``: from ``GET /session/status``.
    ``released_at``: when the result was released to pollers (``None``: not yet).
    ``result_id`` / ``delimiter_id``: fresh message ids the step may use.
    ``observer_parts``: the text parts of the observer's reply (those of the replies to the
    prompts :func:`reply_reads` names that make the reply text); ``None`` when not read.
    """

    now: int
    result_id: str
    delimiter_id: str
    consumed: bool = False
    tool_call: tuple[str | None, bool] | None = None
    s1_busy: bool = False
    s2_busy: bool = False
    released_at: int | None = None
    observer_parts: tuple[TextPart, ...] | None = None


@dataclass(frozen=True, slots=True)
class WriteState:
    """Write ``state`` into S2's state block (``index``: and the session's index): the record of
    the effects that follow it."""

    state: RoundtableState
    index: bool = False


@dataclass(frozen=True, slots=True)
class PostResult:
    """Post ``text`` into S1 as one noReply message with ``message_id`` (unless a message with
    that id exists: posted before a crash), with the daemon's signed result label."""

    message_id: str
    text: str


@dataclass(frozen=True, slots=True)
class PostDelimiter:
    """Post the delimiter into S2 as a noReply message with ``message_id`` (unless it exists);
    ``label``: with the daemon's signed delimiter label (the first time)."""

    message_id: str
    label: bool = True


@dataclass(frozen=True, slots=True)
class SetTitle:
    """``PATCH /session/{S2}`` with ``title``."""

    title: str


@dataclass(frozen=True, slots=True)
class EditPart:
    """Rewrite the text part ``part`` of S2 in place with ``part.text`` (an observer's text part
    whose verdict block gives way to the verdict in words: :func:`shown_reply`)."""

    part: TextPart

    @property
    def message_id(self) -> str:
        """The message holding the part."""
        return self.part.message_id


FinalCommand = ReleaseResult | WriteState | PostResult | EditPart | PostDelimiter | SetTitle | Toast


@dataclass(slots=True)
class Final:
    """One step of phase 4: the state after it, the commands in order, and either ``done`` or
    the time to look again (``wake_at``, epoch ms)."""

    state: RoundtableState
    commands: list[FinalCommand] = field(default_factory=list)
    done: bool = False
    wake_at: int | None = None


def final_reads(state: RoundtableState) -> tuple[bool, bool]:
    """What :func:`finalize` needs read: ``(the tool call in S1, the statuses)``. The tool
    call is read even once it took the result: only S1 says whether the result reached it."""
    delivering = (
        state.delivery.delivered_via is None
        and deliver_kind(state) != "none"
        and state.parent_session_id is not None
    )
    tool = delivering and bool(state.delivery.tool_call_id and state.delivery.tool_message_id)
    f = state.finalization
    marking = writes_s2(state) and (f.delimiter_message_id is None or not f.title_done)
    return tool, delivering or marking


def _conclusion_observer(state: RoundtableState) -> list[int]:
    """Indexes in ``state.history`` of the observer's turns of the roundtable's last conclusion
    (its consolidation and its one repair turn; an extension's earlier conclusions were shown
    at their own end)."""
    rounds = [e.round for e in state.history if e.kind == "observer"]
    if not rounds:
        return []
    last = rounds[-1]
    return [i for i, e in enumerate(state.history) if e.kind == "observer" and e.round == last]


def reply_reads(state: RoundtableState) -> tuple[str, ...] | None:
    """The observer's prompts (message ids) whose replies :func:`finalize` needs read to show
    the verdict in words in S2 (``FinalFacts.observer_parts``); ``None``: nothing to read —
    shown already, S2 not written any more, or a roundtable that ended ``failed`` (S2 may refuse
    every write, and its verdict may never have been written)."""
    if (
        state.finalization.verdict_shown
        or not writes_s2(state)
        or state.end_reason == EndReason.FAILED
    ):
        return None
    return tuple(
        mid for i in _conclusion_observer(state) if (mid := state.history[i].message_id) is not None
    )


def shown_reply(
    state: RoundtableState, parts: tuple[TextPart, ...]
) -> tuple[RoundtableState, list[EditPart]]:
    """The edits that make S2 show the recorded verdict in words instead of the observer's JSON
    block, and the state whose history holds the reply as S2 will then show it (the export of a
    roundtable in memory and of one read back from S2 say the same) with
    ``finalization.verdict_shown`` set.

    Args:
        state: a roundtable whose verdict is recorded (``state.verdict``) and written.
        parts: the observer's reply text parts (:attr:`FinalFacts.observer_parts`).

    A part holding no verdict block (a reply without one, or one already edited before a
    restart) is left as it is (docs/result.md, "The observer's verdict").
    """
    line = recorded_line(state.verdict.data)
    edits: list[EditPart] = []
    for part in parts:
        text = shown_text(part.text, line)
        if text is not None:
            edits.append(EditPart(replace(part, text=text)))
    history = list(state.history)
    for i in _conclusion_observer(state):
        text = shown_text(history[i].response, line)
        if text is not None:
            history[i] = history[i].model_copy(update={"response": text})
    f = state.finalization.model_copy(update={"verdict_shown": True})
    return state.model_copy(update={"history": history, "finalization": f}), edits


def finalize(state: RoundtableState, facts: FinalFacts) -> Final:
    """The next step of phase 4 for a roundtable that is over: release the result, deliver it to
    S1 once, then the delimiter, the title and the toast, each once."""
    out = Final(state, [ReleaseResult()])
    write = writes_s2(state)
    if state.delivery.delivered_via is None:
        if not _deliver(out, facts):
            out.wake_at = facts.now + (
                TOOL_RETURN_RETRY_MS if facts.consumed else DELIVERY_RETRY_MS
            )
            return out
        if write:
            out.commands.append(WriteState(out.state))
    if write:
        if facts.observer_parts is not None and reply_reads(out.state) is not None:
            # After the delivery's write: the verdict is in the written state before the JSON
            # block leaves S2, so no restart reads it back from the edited text. The flag is
            # written with the delimiter's state (an edit repeated after a crash finds no block).
            out.state, edits = shown_reply(out.state, facts.observer_parts)
            out.commands += edits
        f = out.state.finalization
        if (f.delimiter_message_id is None or not f.title_done) and facts.s2_busy:
            out.wake_at = facts.now + BUSY_S2_RETRY_MS
            return out
        if f.delimiter_message_id is None:
            f = f.model_copy(update={"delimiter_message_id": facts.delimiter_id})
            out.state = out.state.model_copy(update={"finalization": f})
            out.commands += [WriteState(out.state), PostDelimiter(facts.delimiter_id)]
        elif not f.title_done:
            out.commands.append(PostDelimiter(f.delimiter_message_id, label=False))
        if not f.title_done:
            word = end_word(out.state.phase, out.state.end_reason)
            out.commands.append(SetTitle(concluded_title(out.state.title, word)))
            f = f.model_copy(update={"title_done": True})
            out.state = out.state.model_copy(update={"finalization": f})
    f = out.state.finalization
    if not f.toast_done:
        out.commands.append(Toast(*end_toast(out.state)))
        f = f.model_copy(update={"toast_done": True})
        out.state = out.state.model_copy(update={"finalization": f})
        if write:
            out.commands.append(WriteState(out.state, index=True))
    out.done = True
    return out


def _deliver(out: Final, facts: FinalFacts) -> bool:
    """Plan the delivery to S1 into ``out``; False: not now (look again later)."""
    state = out.state
    s1 = state.parent_session_id
    if deliver_kind(state) == "none" or s1 is None:
        out.state = _delivered(state, "none")
        return True
    if facts.tool_call is not None and state.delivery.no_reply_message_id is None:
        # Decided by what S1 holds, so that no restart point can duplicate or drop the result
        # (once the fallback's id is written, the fallback it is: the shim is told so).
        status, holds = facts.tool_call
        if holds:
            out.state = _delivered(state, "tool")  # the shim returned our result
            return True
        waited = facts.now - (facts.released_at or facts.now)
        if status in ("running", "pending") and waited < TOOL_POLL_GRACE_MS:
            return False  # the shim will poll and take it (or is returning it now)
        # The tool call ended without the result (an error, an abort, the shim's timeout) or is
        # gone: the result goes to S1 as the fallback message.
    elif facts.consumed:
        # Taken by a tool call whose part cannot be read (no message id given): its word.
        out.state = _delivered(state, "tool")
        return True
    # Nobody waits: one noReply into S1, only while S1 is idle.
    if facts.s1_busy:
        return False
    mid = state.delivery.no_reply_message_id
    if mid is None:
        mid = facts.result_id
        state = state.model_copy(
            update={"delivery": state.delivery.model_copy(update={"no_reply_message_id": mid})}
        )
        if writes_s2(state):
            out.commands.append(WriteState(state))
    out.commands.append(PostResult(mid, result_payload(state)["text"]))
    out.state = _delivered(state, "no-reply")
    return True


def _delivered(state: RoundtableState, via: str) -> RoundtableState:
    return state.model_copy(
        update={"delivery": state.delivery.model_copy(update={"delivered_via": via})}
    )
