"""The roundtable state machine: a pure function of (state, observation) → (state, commands).

No I/O, no asyncio, no clock: the engine reads S2 from the server (status + the messages from the
pending turn's prompt on), builds an :class:`Observation` and executes the returned commands in
order. Because every decision is taken from the server's truth and not from events, a missed,
duplicated, stale or reordered event can only delay a decision, never make a wrong one
(design §1, "level-triggered").

Invariants (property-tested in ``tests/unit/test_machine_properties.py``):

1. At most one prompt in flight: a new turn is planned only when the pending one is resolved.
2. A turn is done only when S2 is idle and holds a completed, final assistant message whose
   ``parentID`` is that turn's own user message (regression "premature idle").
3. The (round, seat) position never goes backwards; every seat gets exactly one turn per round,
   unless the debate ended for a recorded reason (repetition, every agent failed, cancel).
4. Exactly one prompt per turn. The intent of a turn (round, seat, agent, client-chosen message
   id) is persisted with ``PersistState`` — before the prompt (a handoff decided from a read of
   S2), or right after it (a fast handoff decided from the event mirror, see
   :mod:`roundtabled.mirror`). On recovery a pending turn whose message is in S2 is waited for,
   never re-sent; one whose message is absent is sent with the same id; and a planned turn whose
   signed marker is already in S2 (the prompt went out, the state write after it did not) is
   adopted as the pending turn instead of being sent (``Prompt.send`` false).
5. Nothing is prompted once the phase is ``done`` or ``aborted``.

Times are epoch milliseconds throughout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from roundtabled import prompts
from roundtabled.similarity import is_loop
from roundtabled.state import (
    TOOL_OUTPUT_PREVIEW_MAX,
    EndReason,
    HistoryEntry,
    Marker,
    PendingTurn,
    Phase,
    RoundtableState,
    Signer,
    ToolCallSummary,
    Usage,
    read_marker,
)

REPROMPT_GRACE_MS = 5_000
"""A prompt whose user message is still absent from S2 this long after sending is sent again."""
ABORT_GRACE_MS = 5_000
"""After an abort, how long to wait for the aborted reply to be stored before skipping anyway."""
CANCEL_SETTLE_MS = 1_000
"""After the abort of a cancel, with S2 idle and no reply of the turn stored: how long before the
turn is settled as cut off (the server stopped it before creating a reply; regression 5 asks for
the stop within 2 s)."""
ERROR_GRACE_MS = 2_000
STALE_REPLY_GRACE_MS = 10_000
"""S2 idle but a reply of the pending turn never completed (the server was killed and restarted
mid-turn: its in-flight step is lost): after this long the turn is settled as failed."""
"""After ``session.error`` with nothing stored (e.g. unknown agent), how long before skipping."""

Status = Literal["idle", "busy", "retry", "unknown"]
_TURN_KINDS = ("turn", "observer")


# ----------------------------------------------------------------------------------------------
# Views of S2's messages (pure conversion from the server's JSON)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UserView:
    """A user message of S2.

    ``marker``: the daemon's verified marker, or ``None`` for a person's (or the server's)
    message. ``text``: visible text (parts neither ignored nor synthetic). ``synthetic``: every
    visible part is server-generated (e.g. auto-compaction's "Continue…"). ``compaction``: the
    message starts a compaction. ``visible_parts``: raw visible text parts (to hide them later).
    """

    id: str
    created: int
    marker: Marker | None
    text: str
    synthetic: bool
    compaction: bool
    state_block: bool
    visible_parts: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class AnswerView:
    """An assistant message (one model step) of S2 (API notes §5)."""

    id: str
    parent_id: str | None
    agent: str
    created: int
    completed: bool
    finish: str | None
    error_name: str | None
    error_message: str | None
    text: str
    tool_calls: tuple[ToolCallSummary, ...]
    files: tuple[str, ...]
    usage: Usage
    summary: bool


MessageView = UserView | AnswerView


def _text_of(parts: Sequence[dict[str, Any]]) -> str:
    """Reply text: non-empty text parts after the last ``step-start`` (a retried step keeps the
    failed attempt's empty parts before it, API notes §7)."""
    last_start = -1
    for i, p in enumerate(parts):
        if p.get("type") == "step-start":
            last_start = i
    texts = [
        str(p.get("text") or "")
        for i, p in enumerate(parts)
        if p.get("type") == "text" and (i > last_start or last_start < 0)
    ]
    joined = "\n\n".join(t for t in texts if t.strip())
    if joined or last_start < 0:
        return joined
    return "\n\n".join(
        str(p.get("text") or "") for p in parts if p.get("type") == "text" and p.get("text")
    )


def _tool_summary(part: dict[str, Any]) -> ToolCallSummary:
    st = part.get("state") or {}
    status = st.get("status")
    if status == "completed":
        preview = str(st.get("output") or "")[:TOOL_OUTPUT_PREVIEW_MAX]
    elif status == "error":
        preview = "error"
    else:
        preview = f"({status or 'pending'})"
    return ToolCallSummary(tool_name=str(part.get("tool") or "?"), output_preview=preview)


def message_view(raw: dict[str, Any], session_id: str, signer: Signer) -> MessageView:
    """Convert one ``{info, parts}`` of ``GET /session/{id}/message`` into a view.

    Markers are verified with ``signer`` against ``session_id``: a forged marker reads as none.
    """
    info = raw.get("info") or {}
    parts: list[dict[str, Any]] = list(raw.get("parts") or [])
    created = int((info.get("time") or {}).get("created") or 0)
    if info.get("role") == "user":
        marker = None
        state_block = False
        for p in parts:
            md = p.get("metadata")
            if p.get("ignored") and isinstance(md, dict) and "roundtabled" in md:
                if isinstance(md["roundtabled"], dict) and md["roundtabled"].get("kind") == "state":
                    state_block = True
                    continue
                marker = marker or read_marker(md, session_id, signer)
        visible = tuple(p for p in parts if p.get("type") == "text" and not p.get("ignored"))
        text = "\n\n".join(str(p.get("text") or "") for p in visible if not p.get("synthetic"))
        synthetic = bool(visible) and all(p.get("synthetic") for p in visible)
        compaction = any(p.get("type") == "compaction" for p in parts)
        return UserView(
            id=str(info.get("id")),
            created=created,
            marker=marker,
            text=text,
            synthetic=synthetic,
            compaction=compaction,
            state_block=state_block,
            visible_parts=visible,
        )
    tokens = info.get("tokens") or {}
    cache = tokens.get("cache") or {}
    error = info.get("error") or None
    return AnswerView(
        id=str(info.get("id")),
        parent_id=info.get("parentID"),
        agent=str(info.get("agent") or info.get("mode") or "?"),
        created=created,
        completed=bool((info.get("time") or {}).get("completed")),
        finish=info.get("finish"),
        error_name=(error or {}).get("name") if error else None,
        error_message=str(((error or {}).get("data") or {}).get("message") or "")
        if error
        else None,
        text=_text_of(parts),
        tool_calls=tuple(_tool_summary(p) for p in parts if p.get("type") == "tool"),
        files=tuple(
            str(p.get("filename") or p.get("url") or "file")
            for p in parts
            if p.get("type") == "file"
        ),
        usage=Usage(
            input=int(tokens.get("input") or 0),
            output=int(tokens.get("output") or 0),
            reasoning=int(tokens.get("reasoning") or 0),
            cache_read=int(cache.get("read") or 0),
            cache_write=int(cache.get("write") or 0),
            cost=float(info.get("cost") or 0.0),
        ),
        summary=bool(info.get("summary")),
    )


# ----------------------------------------------------------------------------------------------
# Observation and commands
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cancel:
    """A request to stop the debate (CLI ``cancel``, control API, or the tool's S1 aborted).

    ``summarize``: let the observer consolidate what exists (else no further model request).
    """

    summarize: bool = False
    reason: str = "cancelled by the user"


def with_cancel(state: RoundtableState, cancel: Cancel) -> RoundtableState:
    """``state`` with ``cancel`` recorded: end reason ``cancelled``, the reason among the errors
    and whether the observer is to summarize. Nothing else changes (the turn in flight is
    aborted by the caller). Used by the machine and by ``Engine.cancel``, which writes it to S2
    before aborting so that a crash cannot lose the cancel."""
    return state.model_copy(
        update={
            "end_reason": EndReason.CANCELLED,
            "errors": [*state.errors, f"cancelled: {cancel.reason}"],
            "options": state.options.model_copy(update={"cancel_summarize": cancel.summarize}),
        }
    )


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
    """A TUI toast (spec §10): ``variant`` info | success | warning | error."""

    message: str
    variant: str = "info"


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


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------


def _answers(messages: Sequence[MessageView], user_id: str) -> list[AnswerView]:
    return [
        m
        for m in messages
        if isinstance(m, AnswerView) and m.parent_id == user_id and not m.summary
    ]


def _entry_from_answers(
    answers: Sequence[AnswerView],
    *,
    agent: str,
    round_number: int,
    seat: int | None,
    kind: Literal["turn", "observer", "interjection"],
    message_id: str | None,
    cut_off: bool = False,
    timeout_s: float | None = None,
) -> HistoryEntry:
    text = "\n\n".join(a.text for a in answers if a.text.strip())
    tools = [t for a in answers for t in a.tool_calls]
    files = [f for a in answers for f in a.files]
    usage = Usage()
    for a in answers:
        usage = usage.plus(a.usage)
    last = answers[-1] if answers else None
    error: str | None = None
    has_error = False
    if cut_off:
        has_error = True
        error = f"timed out after {timeout_s:g} s" if timeout_s is not None else "cut off"
    elif last is None:
        has_error = True
        error = "no reply was stored"
    elif last.error_name:
        has_error = True
        error = (
            f"{last.error_name}: {last.error_message}" if last.error_message else last.error_name
        )
    return HistoryEntry(
        agent=agent,
        round=round_number,
        response=text,
        tool_calls=tools,
        files=files,
        has_error=has_error,
        error=error,
        cut_off=cut_off,
        kind=kind,
        seat=seat,
        message_id=message_id,
        usage=usage,
        started_at=answers[0].created if answers else None,
        finished_at=last.created if last else None,
    )


def _final(answers: Sequence[AnswerView]) -> bool:
    if not answers or any(not a.completed for a in answers):
        return False
    last = answers[-1]
    if last.finish == "tool-calls" and last.tool_calls:
        # Called only when S2 is idle: the server stops the loop after a step whose tools were
        # all refused (permission or question rejected), so that step is the turn's last one
        # (regressions "permission prompts nobody answers", "question tool in a seat").
        return all(t.output_preview == "error" for t in last.tool_calls)
    return bool(last.error_name) or last.finish not in ("tool-calls", None, "unknown")


def extras_after(
    messages: Sequence[MessageView], after_id: str, round_number: int
) -> list[HistoryEntry]:
    """History entries for messages not sent by the daemon, after ``after_id``'s turn.

    A person's message in S2 becomes a ``user`` entry (spec §7.4) and the server's reply to it an
    ``interjection`` entry; compaction messages and server-synthetic prompts count as nobody's
    turn, but a reply to a synthetic prompt is kept as an interjection of its agent.
    """
    out: list[HistoryEntry] = []
    ids = [m.id for m in messages]
    start = ids.index(after_id) + 1 if after_id in ids else 0
    for m in messages[start:]:
        if isinstance(m, UserView) and m.marker is not None and m.marker.kind in _TURN_KINDS:
            break  # a later turn of ours (a stale stored state): what follows is that turn's
        if isinstance(m, UserView) and m.marker is None and not m.state_block:
            out.extend(_person_entries(m, messages, round_number))
    return out


def _person_entries(
    m: UserView, messages: Sequence[MessageView], round_number: int
) -> list[HistoryEntry]:
    """A message of S2 not sent by the daemon: a person's text becomes a ``user`` entry (spec
    §7.4) and the reply to it an ``interjection`` entry; compaction messages count as nobody's
    turn and a server-synthetic prompt has no entry of its own (its reply still has one)."""
    if m.compaction:
        return []
    out: list[HistoryEntry] = []
    if m.text.strip() and not m.synthetic:
        out.append(
            HistoryEntry(
                agent="user",
                round=round_number,
                response=m.text,
                kind="user",
                message_id=m.id,
                started_at=m.created,
                finished_at=m.created,
            )
        )
    replies = _answers(messages, m.id)
    if replies:
        out.append(
            _entry_from_answers(
                replies,
                agent=replies[-1].agent,
                round_number=round_number,
                seat=None,
                kind="interjection",
                message_id=m.id,
            )
        )
    return out


def _last_response_of_round(state: RoundtableState, round_number: int) -> str | None:
    for e in reversed(state.history):
        if e.kind == "turn" and e.round == round_number and not e.has_error and e.response:
            return e.response
    return None


def since_last_turn(state: RoundtableState, agent: str) -> list[HistoryEntry]:
    """Entries since ``agent``'s last seat turn (all entries if it has not spoken yet)."""
    out: list[HistoryEntry] = []
    for e in reversed(state.history):
        if e.kind == "turn" and e.agent == agent:
            break
        if e.kind == "observer":
            continue
        out.append(e)
    out.reverse()
    return out


def opening_message_id(messages: Sequence[MessageView]) -> str | None:
    """The first turn prompt of S2 (it stays visible: it carries the topic)."""
    for m in messages:
        if isinstance(m, UserView) and m.marker is not None and m.marker.kind == "turn":
            return m.id
    return None


# ----------------------------------------------------------------------------------------------
# The transition function
# ----------------------------------------------------------------------------------------------


def plan_turn(
    state: RoundtableState, obs: Observation, *, opening: bool, hide: tuple[UserView, ...] = ()
) -> Decision:
    """Persist the intent of the turn at the current position, then prompt it."""
    if state.phase == Phase.OBSERVING:
        agent = state.observer_agent()
        pend = PendingTurn(
            kind="observer",
            round=min(state.current_round, state.total_rounds - 1),
            seat=-1,
            agent=agent,
            message_id=obs.new_id,
            prompted_at=obs.now,
        )
        history = state.history
        if state.observer == "built-in":
            text = prompts.observer_prompt(state, history)
        else:
            text = prompts.named_observer_prompt(state, history, observer=state.observer)
        marker = Marker(
            kind="observer",
            round=state.current_round,
            seat=-1,
            agent=agent,
            roundtable=state.session_id,
        )
    else:
        seat = state.current_agent_index
        agent = state.agents[seat]
        pend = PendingTurn(
            kind="turn",
            round=state.current_round,
            seat=seat,
            agent=agent,
            message_id=obs.new_id,
            prompted_at=obs.now,
        )
        text = prompts.turn_prompt(
            state,
            round_index=state.current_round,
            seat=seat,
            since=since_last_turn(state, agent),
            opening=opening,
        )
        marker = Marker(
            kind="turn",
            round=state.current_round,
            seat=seat,
            agent=agent,
            roundtable=state.session_id,
        )
    new = state.model_copy(update={"pending": pend, "updated_at": obs.now})
    return Decision(
        new,
        [PersistState(), Prompt(pend.message_id, agent, text, marker, hide)],
        wake_at=obs.now + int(state.options.turn_timeout * 1000),
    )


def _finish(
    state: RoundtableState,
    obs: Observation,
    deliver: Literal["result", "interruption", "none"],
    *,
    phase: Phase = Phase.DONE,
    write_s2: bool = True,
) -> Decision:
    new = state.model_copy(update={"phase": phase, "pending": None, "updated_at": obs.now})
    cmds: list[Command] = []
    if write_s2:
        cmds.append(PersistState())
    cmds.append(Finalize(deliver, write_s2=write_s2))
    return Decision(new, cmds)


def _advance(
    state: RoundtableState,
    obs: Observation,
    entry: HistoryEntry,
    extras: list[HistoryEntry],
    turn_msg: UserView | None,
) -> Decision:
    """Record a finished seat or observer turn and plan what comes next."""
    pend = state.pending
    assert pend is not None
    history = [*state.history, entry, *extras]
    errors = list(state.errors)
    cmds: list[Command] = [TurnRecorded(entry), *(TurnRecorded(e) for e in extras)]
    update: dict[str, Any] = {"history": history, "pending": None, "updated_at": obs.now}
    is_opening = pend.kind == "turn" and pend.round == 0 and pend.seat == 0
    hide = (
        (turn_msg,)
        if (state.options.hide_past_prompts and turn_msg is not None and not is_opening)
        else ()
    )
    if entry.has_error:
        errors.append(f"{entry.agent} (round {entry.round}): {entry.error}")
        update["errors"] = errors

    if pend.kind == "observer":
        summary = entry.response.strip()
        if state.end_reason == EndReason.CANCELLED and not state.options.cancel_summarize:
            update["summary"] = prompts.cancelled_text(
                state.model_copy(update={"history": history})
            )
        elif entry.has_error or not summary:
            errors.append(f"observer {entry.agent}: {entry.error or 'empty reply'}")
            update["errors"] = errors
            update["summary"] = (
                f"(The observer {entry.agent} failed: {entry.error or 'empty reply'}.)\n\n"
                + prompts.cancelled_text(state.model_copy(update={"history": history}))
            )
            if state.end_reason is None:
                update["end_reason"] = EndReason.OBSERVER_FAILED
        else:
            update["summary"] = summary
        if state.end_reason is None and "end_reason" not in update:
            update["end_reason"] = EndReason.COMPLETED
        new = state.model_copy(update=update)
        return _with(cmds, _finish(new, obs, "result"))

    # A seat turn.
    n = len(state.agents)
    seat, rnd = pend.seat, pend.round
    next_seat, next_round = seat + 1, rnd
    if next_seat >= n:
        next_seat, next_round = 0, rnd + 1
    update["current_agent_index"] = next_seat
    update["current_round"] = next_round
    new = state.model_copy(update=update)

    end: EndReason | None = None
    if state.end_reason == EndReason.CANCELLED:
        end = EndReason.CANCELLED
    elif (
        not entry.has_error
        and rnd > 0
        and (prev := _last_response_of_round(state, rnd)) is not None
        and is_loop(entry.response, prev, state.options.loop_threshold)
    ):
        end = EndReason.REPETITION
    elif seat == n - 1:
        round_turns = [e for e in history if e.kind == "turn" and e.round == rnd + 1]
        if round_turns and all(e.has_error for e in round_turns):
            end = EndReason.ALL_FAILED

    if entry.has_error:  # failed or cut off (spec §7.1 toast); nobody is next once it ends
        nxt = new.agents[next_seat] if next_round < new.total_rounds and end is None else None
        cmds.append(Toast(prompts.failure_toast(entry.agent, rnd + 1, nxt), "warning"))

    if end is not None:
        new = new.model_copy(update={"end_reason": end})
        if end == EndReason.CANCELLED and not state.options.cancel_summarize:
            new = new.model_copy(update={"summary": prompts.cancelled_text(new)})
            return _with(cmds, _finish(new, obs, "result"))
        new = new.model_copy(update={"phase": Phase.OBSERVING})
        return _with(cmds, plan_turn(new, obs, opening=False, hide=hide))
    if next_round >= new.total_rounds:
        new = new.model_copy(update={"phase": Phase.OBSERVING})
    return _with(cmds, plan_turn(new, obs, opening=False, hide=hide))


def _with(cmds: list[Command], d: Decision) -> Decision:
    d.commands[:0] = cmds
    return d


def decide(state: RoundtableState, obs: Observation) -> Decision:
    """One step of the machine. See the module docstring for the invariants.

    Args:
        state: the roundtable's current state (not modified; a new one is returned).
        obs: what the engine just read from the server (or saw on the event stream, for a
            fast handoff: the same shape, see :mod:`roundtabled.mirror`).

    Returns:
        The new state, the commands to execute in order, and the next deadline.
    """
    return _adopt_sent(_decide(state, obs), obs)


def _adopt_sent(d: Decision, obs: Observation) -> Decision:
    """Invariant 4, last clause: a planned prompt whose turn is already in S2 is not sent again.

    After a fast handoff the prompt is sent before the state that names it is written; a crash in
    between leaves the previous turn pending in the stored state while S2 already holds the next
    turn's prompt (its signed marker says which turn it is). Planning from the stored state then
    reaches the same turn: adopt the message in S2 as the pending turn instead of prompting.
    """
    pend = d.state.pending
    for i, cmd in enumerate(d.commands):
        if not isinstance(cmd, Prompt) or not cmd.send or pend is None:
            continue
        want = (cmd.marker.kind, cmd.marker.round, cmd.marker.seat)
        sent = next(
            (
                m
                for m in obs.messages
                if isinstance(m, UserView)
                and m.marker is not None
                and m.id != cmd.message_id
                and (m.marker.kind, m.marker.round, m.marker.seat) == want
            ),
            None,
        )
        if sent is None:
            continue
        d.commands[i] = Prompt(sent.id, cmd.agent, cmd.text, cmd.marker, cmd.hide, send=False)
        d.state = d.state.model_copy(
            update={
                "pending": pend.model_copy(
                    update={"message_id": sent.id, "prompted_at": sent.created}
                )
            }
        )
    return d


def _decide(state: RoundtableState, obs: Observation) -> Decision:
    if not state.active:
        return Decision(state)

    if obs.deleted:
        # Spec §7.2 (S2 closed) and §7.3 (S1 closed; S2 goes with it): abort first — a deleted
        # busy session keeps streaming (API notes §3) — then deliver, never write to S2 again.
        reason = EndReason.PARENT_DELETED if obs.parent_deleted else EndReason.SESSION_DELETED
        new = state.model_copy(update={"end_reason": reason})
        d = _finish(
            new,
            obs,
            "none" if obs.parent_deleted else "interruption",
            phase=Phase.ABORTED,
            write_s2=False,
        )
        d.commands.insert(0, Abort())
        return d
    if obs.parent_deleted:
        new = state.model_copy(update={"end_reason": EndReason.PARENT_DELETED})
        d = _finish(new, obs, "none", phase=Phase.ABORTED)
        d.commands.insert(0, Abort())
        return d

    cmds: list[Command] = []
    if obs.cancel is not None and state.end_reason != EndReason.CANCELLED:
        state = with_cancel(state, obs.cancel)
        pend = state.pending
        if pend is None:
            if obs.cancel.summarize and state.phase == Phase.ACTIVE:
                return plan_turn(
                    state.model_copy(update={"phase": Phase.OBSERVING}), obs, opening=False
                )
            state = state.model_copy(update={"summary": prompts.cancelled_text(state)})
            return _finish(state, obs, "result")
        if not (pend.kind == "observer" and obs.cancel.summarize):
            # Stop must stop: abort the turn in flight; it is recorded as cut off once S2 is
            # idle, then the debate ends (with the observer only when asked to summarize).
            pend = pend.model_copy(update={"abort_requested_at": obs.now})
            state = state.model_copy(update={"pending": pend})
            cmds.extend([Abort(), PersistState()])

    pend = state.pending
    if pend is None:
        return _with(
            cmds,
            plan_turn(
                state,
                obs,
                opening=not state.history
                and state.current_round == 0
                and state.current_agent_index == 0
                and not state.extensions,
            ),
        )

    if not obs.pending_found:
        # The intent is persisted but the prompt is not in S2 (crash between persisting and
        # prompting, or the POST failed): send it again with the same id — it cannot be a
        # duplicate, the message does not exist.
        waited = obs.now - (pend.prompted_at or 0)
        if obs.accepted:
            timeout_at = (pend.prompted_at or obs.now) + int(state.options.turn_timeout * 1000)
            if obs.now < timeout_at:
                return _with(cmds, Decision(state, [], wake_at=timeout_at))
            # Accepted but never stored within the turn timeout: skip it as failed.
            entry = _entry_from_answers(
                [],
                agent=pend.agent,
                round_number=pend.round + 1,
                seat=pend.seat if pend.kind == "turn" else None,
                kind=pend.kind,
                message_id=pend.message_id,
            )
            return _with(cmds, _advance(state, obs, entry, [], None))
        if pend.prompted_at is None or (waited >= REPROMPT_GRACE_MS and obs.status == "idle"):
            return _with(cmds, _reprompt(state, obs))
        return _with(
            cmds, Decision(state, [], wake_at=(pend.prompted_at or obs.now) + REPROMPT_GRACE_MS)
        )

    turn_msg = next(
        (m for m in obs.messages if isinstance(m, UserView) and m.id == pend.message_id), None
    )
    answers = _answers(obs.messages, pend.message_id)
    others_running = any(isinstance(m, AnswerView) and not m.completed for m in obs.messages)
    idle = obs.status == "idle"
    timeout_ms = int(state.options.turn_timeout * 1000)
    started = pend.prompted_at or (turn_msg.created if turn_msg else obs.now)
    round_number = pend.round + 1
    seat: int | None = pend.seat if pend.kind == "turn" else None
    kind: Literal["turn", "observer"] = pend.kind

    # A later turn prompt of ours in S2 means the pending turn is over even if S2 is busy: the
    # state write after a fast handoff was lost (crash), and S2 is running the next turn.
    moved_on = any(
        isinstance(m, UserView)
        and m.marker is not None
        and m.marker.kind in _TURN_KINDS
        and m.id != pend.message_id
        for m in obs.messages
    )
    if ((idle and not others_running) or moved_on) and _final(answers):
        aborted = bool(answers[-1].error_name == "MessageAbortedError")
        # A stored cancel without its abort time: the cancel was written, then the daemon
        # crashed before deciding on it (Engine.cancel writes it before aborting).
        cut = aborted and (
            pend.abort_requested_at is not None or state.end_reason == EndReason.CANCELLED
        )
        entry = _entry_from_answers(
            answers,
            agent=pend.agent,
            round_number=round_number,
            seat=seat,
            kind=kind,
            message_id=pend.message_id,
            cut_off=cut,
            timeout_s=state.options.turn_timeout
            if state.end_reason != EndReason.CANCELLED
            else None,
        )
        if cut and state.end_reason == EndReason.CANCELLED:
            entry = entry.model_copy(update={"error": "cut off by the cancel"})
        extras = extras_after(obs.messages, pend.message_id, round_number)
        return _with(cmds, _advance(state, obs, entry, extras, turn_msg))

    stale = [a for a in answers if not a.completed]
    if idle and stale and pend.abort_requested_at is None:
        # The server says idle, yet a step of this turn never completed: the server restarted
        # mid-turn and dropped it. Settle the turn (with its partial text) instead of waiting
        # for the turn timeout.
        since = max(a.created for a in stale)
        if obs.now - since >= STALE_REPLY_GRACE_MS:
            entry = _entry_from_answers(
                answers,
                agent=pend.agent,
                round_number=round_number,
                seat=seat,
                kind=kind,
                message_id=pend.message_id,
            )
            entry = entry.model_copy(
                update={
                    "has_error": True,
                    "error": "the reply was never completed (the server stopped during the turn)",
                }
            )
            extras = extras_after(obs.messages, pend.message_id, round_number)
            return _with(cmds, _advance(state, obs, entry, extras, turn_msg))
        return _with(cmds, Decision(state, [], wake_at=since + STALE_REPLY_GRACE_MS))

    if pend.abort_requested_at is not None:
        cancelled = state.end_reason == EndReason.CANCELLED
        # A cancel that stopped the turn before the server created any reply: once S2 is idle
        # nothing is coming, so the grace is short (stop must stop, regression 5; a cancel right
        # after the start hit the 5 s grace).
        grace = CANCEL_SETTLE_MS if cancelled and not answers else ABORT_GRACE_MS
        if idle and obs.now - pend.abort_requested_at >= grace:
            entry = _entry_from_answers(
                answers,
                agent=pend.agent,
                round_number=round_number,
                seat=seat,
                kind=kind,
                message_id=pend.message_id,
                cut_off=True,
                timeout_s=None if cancelled else state.options.turn_timeout,
            )
            if cancelled:
                entry = entry.model_copy(update={"error": "cut off by the cancel"})
            extras = extras_after(obs.messages, pend.message_id, round_number)
            return _with(cmds, _advance(state, obs, entry, extras, turn_msg))
        abort_at: int = pend.abort_requested_at
        if not idle and obs.now - abort_at >= ABORT_GRACE_MS:
            abort_at = obs.now
            pend = pend.model_copy(update={"abort_requested_at": abort_at})
            state = state.model_copy(update={"pending": pend})
            cmds.append(Abort())
        wait = grace if idle else ABORT_GRACE_MS
        return _with(cmds, Decision(state, [], wake_at=abort_at + wait))

    if obs.now - started >= timeout_ms:
        # Spec §7.6: abort and skip. The reply is recorded once S2 is idle again.
        pend = pend.model_copy(update={"abort_requested_at": obs.now})
        state = state.model_copy(update={"pending": pend})
        cmds.extend([Abort(), PersistState()])
        return _with(cmds, Decision(state, [], wake_at=obs.now + ABORT_GRACE_MS))

    if pend.error_seen_at is not None and idle and not answers and not others_running:
        if obs.now - pend.error_seen_at >= ERROR_GRACE_MS:
            entry = _entry_from_answers(
                [],
                agent=pend.agent,
                round_number=round_number,
                seat=seat,
                kind=kind,
                message_id=pend.message_id,
            )
            entry = entry.model_copy(
                update={"error": "the server reported an error and stored no reply"}
            )
            return _with(cmds, _advance(state, obs, entry, [], turn_msg))
        return _with(cmds, Decision(state, [], wake_at=pend.error_seen_at + ERROR_GRACE_MS))

    return _with(cmds, Decision(state, [], wake_at=started + timeout_ms))


def _reprompt(state: RoundtableState, obs: Observation) -> Decision:
    pend = state.pending
    assert pend is not None
    fresh = Observation(
        now=obs.now, status=obs.status, messages=obs.messages, new_id=pend.message_id
    )
    opening = (
        pend.kind == "turn"
        and pend.round == 0
        and pend.seat == 0
        and not state.extensions
        and not state.history
    )
    base = state.model_copy(update={"pending": None})
    d = plan_turn(base, fresh, opening=opening)
    return d


def rebuild_history(state: RoundtableState, messages: Sequence[MessageView]) -> list[HistoryEntry]:
    """The history from S2's messages, up to (not including) the pending turn's prompt.

    Used after a restart: while a roundtable is active its history is not persisted (it is derived
    from the signed turn markers and the answers' ``parentID``).
    """
    stop = state.pending.message_id if state.pending else None
    out: list[HistoryEntry] = []
    for m in messages:
        if m.id == stop:
            break
        if not isinstance(m, UserView) or m.state_block:
            continue
        mk = m.marker
        if mk is not None and mk.kind in ("turn", "observer"):
            answers = _answers(messages, m.id)
            if mk.kind == "turn":
                cut = bool(answers) and answers[-1].error_name == "MessageAbortedError"
                out.append(
                    _entry_from_answers(
                        answers,
                        agent=mk.agent,
                        round_number=mk.round + 1,
                        seat=mk.seat,
                        kind="turn",
                        message_id=m.id,
                        cut_off=cut,
                        timeout_s=state.options.turn_timeout,
                    )
                )
            else:
                out.append(
                    _entry_from_answers(
                        answers,
                        agent=mk.agent,
                        round_number=mk.round + 1,
                        seat=None,
                        kind="observer",
                        message_id=m.id,
                    )
                )
            continue
        if mk is not None:
            continue
        out.extend(_person_entries(m, messages, out[-1].round if out else 1))
    return out
