"""The roundtable state machine: a pure function of (state, observation) → (state, commands).

No I/O, no asyncio, no clock: the engine reads S2 from the server (status + the messages from the
pending turn's prompt on), builds an :class:`Observation` and executes the returned commands in
order. Because every decision is taken from the server's truth and not from events, a missed,
duplicated, stale or reordered event can only delay a decision, never make a wrong one
(``docs/design.md``, "level-triggered").

Invariants (property-tested in ``tests/unit/test_machine_properties.py``):

1. At most one prompt in flight: a new turn is planned only when the pending one is resolved.
2. A turn is done only when S2 is idle and holds a completed, final assistant message whose
   ``parentID`` is that turn's own user message (regression "premature idle").
3. The (round, seat) position never goes backwards; every seat gets exactly one turn per round,
   unless the debate ended for a recorded reason (repetition, every agent failed, cancel, the
   panel converged, the budget: :mod:`roundtabled.core.deliberation`).
4. Exactly one prompt per turn. The intent of a turn (round, seat, agent, client-chosen message
   id) is written with the :class:`Prompt` that starts it — before the prompt goes out (a
   handoff decided from a read of S2), or right after it (``persist_first`` false: a fast
   handoff decided from the event mirror, see :mod:`roundtabled.engine.mirror`). On recovery a
   pending turn whose message is in S2 is waited for, never re-sent; one whose message is absent is
   sent with the same id; and a planned turn whose signed marker is already in S2 (the prompt
   went out, the state write after it did not) is adopted as the pending turn instead of being
   sent (``Prompt.send`` false). A turn the server accepted but swallowed (never started,
   folded into a later message, a busy database) is sent again at most once (below).
5. Nothing is prompted once the phase is ``done`` or ``aborted``.

Turns the server accepted but did not run as asked: the machine asks these questions about the
pending turn, each answered from S2's messages and the pending turn's record, never from the
order of events (docs/design.md, "Turns that never start or are swallowed"):

- **never started** (:func:`never_started`): the server answered the prompt with 204 but its
  user message was never stored, and the server reported ``session.error`` for S2 (a seat whose
  model does not exist: "Model not found"; a database write lock held by another process). The
  turn fails with the server's own message, or, once, is sent again when the error was a busy
  database (nothing was written; the same prompt may go through now).
- **folded** (:func:`folded_into`): the seat's prompt is stored but a later user message that is
  not ours (a person's, another client's) was answered instead: with two pending user messages
  the server answers only the newest one, with that message's agent, and goes idle. The seat's
  prompt will never get a reply of its own; the other reply is an interjection and the seat is
  prompted again, once.
- **busy database at the end of a reply** (:func:`busy_database_text`): a step that ended with
  the server's ``UnknownError`` after its text was stored keeps that text; a turn that stored
  nothing usable is prompted again, once (:data:`MAX_REPROMPTS`).

Times are epoch milliseconds throughout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from roundtabled.core import deliberation, observer_flow, progress, prompts
from roundtabled.core.commands import (
    Abort,
    Cancel,
    Command,
    Decision,
    Finalize,
    Observation,
    PersistState,
    Prompt,
    ReleaseResult,
    Toast,
    TurnRecorded,
)
from roundtabled.core.history import (
    TURN_KINDS,
    answers_to,
    extras_after,
    failed_entry,
    last_response_of_round,
    pending_entry,
    since_last_turn,
    turn_is_final,
)
from roundtabled.core.messages import AnswerView, MessageView, UserView, busy_text
from roundtabled.core.positions import unexplained_change
from roundtabled.core.result import cancelled_text
from roundtabled.core.similarity import is_loop
from roundtabled.core.state import (
    MODE_NOTES,
    EndReason,
    HistoryEntry,
    Marker,
    PendingTurn,
    Phase,
    RoundtableState,
    ViewMode,
)
from roundtabled.core.verdict import no_stance

REPROMPT_GRACE_MS = 5_000
"""A prompt whose user message is still absent from S2 this long after sending is sent again."""
ABORT_GRACE_MS = 5_000
"""After an abort, how long to wait for the aborted reply to be stored before skipping anyway."""
CANCEL_SETTLE_MS = 1_000
"""After the abort of a cancel, with S2 idle and no reply of the turn stored: how long before the
turn is settled as cut off (the server stopped it before creating a reply; stop must stop within
2 s)."""
ERROR_GRACE_MS = 1_000
"""After ``session.error`` with S2 idle and no reply stored (e.g. the seat's model does not
exist), how long before the turn is settled as failed: an errored reply is stored just after the
first idle, if at all; a turn that never started settles within 2 s of the server's error."""
STALE_REPLY_GRACE_MS = 10_000
"""S2 idle but a reply of the pending turn never completed (the server was killed and restarted
mid-turn: its in-flight step is lost): after this long the turn is settled as failed."""


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


# ── helpers ─────────────────────────────────────────────────────────────────────────────────────


# ── the transition function ─────────────────────────────────────────────────────────────────────


def plan_turn(
    state: RoundtableState, obs: Observation, *, opening: bool, hide: tuple[UserView, ...] = ()
) -> Decision:
    """Persist the intent of the turn at the current position, then prompt it."""
    kind: Literal["turn", "observer"]
    if state.phase == Phase.OBSERVING:
        kind = "observer"
        agent = state.observer_agent()
        seat, text = observer_flow.observer_turn(state)  # the consolidation or its repair
        # After the last round the position is one past it: the turn belongs to the last round.
        pend_round = min(state.current_round, state.total_rounds - 1)
    else:
        kind = "turn"
        seat = state.current_agent_index
        agent = state.agents[seat]
        pend_round = state.current_round
        text = ""  # written below, once the view (and with it the digest) is known
    pend = PendingTurn(
        kind=kind,
        round=pend_round,
        seat=seat,
        agent=agent,
        message_id=obs.new_id,
        prompted_at=obs.now,
    )
    marker = Marker(
        kind=kind, round=state.current_round, seat=seat, agent=agent, roundtable=state.session_id
    )
    new, hide = _view(state.model_copy(update={"pending": pend, "updated_at": obs.now}), obs, hide)
    digest = ""
    if new.view == "plugin":
        span = None
        if pend.kind == "turn" and state.options.context == "recent":
            rounds = deliberation.rounds_to_hide(pend.round)
            if rounds:
                span = (rounds[0] - 1, rounds[-1] - 1)  # 1-based rounds, 0-indexed markers
                digest = deliberation.digest(state.history, rounds, state.agents)
        marker = marker.model_copy(update={"view": "plugin", "hide": span})
    if kind == "turn":
        text = prompts.turn_prompt(
            state,
            round_index=state.current_round,
            seat=seat,
            since=since_last_turn(state, agent),
            opening=opening,
            change=unexplained_change(
                state.history, agent, lambda label: no_stance(state, label) is None
            ),
            digest=digest,
        )
    prompt = Prompt(pend.message_id, agent, text, marker, hide, persist_first=not obs.from_events)
    return Decision(
        new,
        [prompt],
        wake_at=obs.now + int(state.options.turn_timeout * 1000),
    )


def _finish(
    state: RoundtableState, obs: Observation, *, phase: Phase = Phase.DONE, write: bool = True
) -> Decision:
    """The debate ends (its end reason already set): the final state is written unless S2 is
    gone (``write``); a completed debate's result is released before that write, any other's
    after it (:func:`roundtabled.core.lifecycle.finalize` releases it first thing)."""
    new = state.model_copy(update={"phase": phase, "pending": None, "updated_at": obs.now})
    cmds: list[Command] = []
    if write:
        if new.end_reason in (None, EndReason.COMPLETED):
            cmds.append(ReleaseResult())
        cmds.append(PersistState())
    cmds.append(Finalize())
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
    hide = (turn_msg,) if turn_msg is not None and _answered_prompt_hidden(state) else ()
    if entry.has_error:
        errors.append(f"{entry.agent} (round {entry.round}): {entry.error}")
        update["errors"] = errors

    if pend.kind == "observer":  # the verdict: done, its one repair turn, or the ledger's
        new, repair = observer_flow.observed(state, entry, update)
        if repair:
            return _with(cmds, plan_turn(new, obs, opening=False))
        return _with(cmds, _finish(new, obs))

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
        and (prev := last_response_of_round(state, rnd)) is not None
        and is_loop(entry.response, prev, state.options.loop_threshold)
    ):
        end = EndReason.REPETITION
    elif seat == n - 1:
        round_turns = [e for e in history if e.kind == "turn" and e.round == rnd + 1]
        if round_turns and all(e.has_error for e in round_turns):
            end = EndReason.ALL_FAILED
    if end is None and (stop := deliberation.stop_after_seat_turn(new, obs.now, obs.messages)):
        end, new = stop.reason, stop.recorded(new)

    if entry.has_error:  # failed or cut off: a warning toast; nobody is next once it ends
        nxt = new.agents[next_seat] if next_round < new.total_rounds and end is None else None
        cmds.append(Toast(prompts.failure_toast(entry.agent, rnd + 1, nxt), "warning"))
    cmds += progress.turn_toasts(new, entry, end, next_round)  # shown per progress_toasts

    if end is not None:
        new = new.model_copy(update={"end_reason": end})
        if end == EndReason.CANCELLED and not state.options.cancel_summarize:
            new = new.model_copy(update={"summary": cancelled_text(new)})
            return _with(cmds, _finish(new, obs))
    if end is not None or next_round >= new.total_rounds:
        new = new.model_copy(update={"phase": Phase.OBSERVING})
        if observer_flow.skip_observer(new):  # no seat spoke: nothing to consolidate
            new = new.model_copy(update={"end_reason": new.end_reason or EndReason.COMPLETED})
            return _with(cmds, _finish(new, obs))
    return _with(cmds, plan_turn(new, obs, opening=False, hide=hide))


def hides_prompt(state: RoundtableState) -> bool:
    """Whether the pending turn's prompt is hidden by a PATCH once the turn is over: a seat's
    prompt is, unless it opened the debate (it carries the topic), hiding is off, or the turn
    runs in plugin mode (the plugin leaves it out of later requests, :func:`_view`); the
    observer's is not (nothing follows it)."""
    return state.view == "patch" and _answered_prompt_hidden(state)


def _answered_prompt_hidden(state: RoundtableState) -> bool:
    """Whether the pending turn's prompt must leave later model requests (by either mode)."""
    pend = state.pending
    return (
        state.options.hide_past_prompts
        and pend is not None
        and pend.kind == "turn"
        and not (pend.round == 0 and pend.seat == 0)
    )


def view_mode(state: RoundtableState, obs: Observation) -> ViewMode:
    """The mode of the turn planned now: ``plugin`` only on a positive signal that the plugin
    is loaded in S2's server instance (``obs.plugin``) and with hiding on; else ``patch``."""
    return "plugin" if obs.plugin and state.options.hide_past_prompts else "patch"


def _view(
    state: RoundtableState, obs: Observation, hide: tuple[UserView, ...]
) -> tuple[RoundtableState, tuple[UserView, ...]]:
    """Record the mode of the turn planned now and what its :class:`Prompt` hides by a PATCH.

    ``hide``: the earlier turn prompts the patch mode hides now. In plugin mode nothing is
    written (their ids are kept in ``unhidden``); a turn back in patch mode hides them all
    first, so a roundtable whose server lost the plugin mid-way sends no old prompt again.

    Returns:
        The state with ``view`` and ``unhidden`` set, and the prompts to hide.
    """
    mode = view_mode(state, obs)
    hide = tuple(v for v in hide if v.visible_parts)  # already hidden: nothing to do
    known = {v.id for v in hide}
    if MODE_NOTES[mode] not in state.notes:
        state = state.model_copy(update={"notes": [*state.notes, MODE_NOTES[mode]]})
    if mode == "plugin":
        unhidden = [*state.unhidden, *(v.id for v in hide if v.id not in state.unhidden)]
        return state.model_copy(update={"view": mode, "unhidden": unhidden}), ()
    later = tuple(_unhidden_view(mid) for mid in state.unhidden if mid not in known)
    notes = state.notes
    if (
        state.view == "plugin"
        and state.options.context == "recent"
        and RECENT_LOST_NOTE not in notes
    ):
        notes = [*notes, RECENT_LOST_NOTE]
    update: dict[str, Any] = {"view": mode, "unhidden": [], "notes": notes}
    return state.model_copy(update=update), (*later, *hide)


RECENT_LOST_NOTE = (
    "the roundtable plugin stopped answering for S2's server instance: the later turns ran "
    "with every earlier reply in view (context 'recent' needs the plugin; "
    "run `roundtabled install-tool` and restart opencode serve)"
)
"""The note of a ``context: "recent"`` roundtable whose later turns ran in patch mode."""


def _unhidden_view(message_id: str) -> UserView:
    """A prompt known by id only: the engine reads its visible parts to hide them."""
    return UserView(id=message_id, created=0, marker=None, text="")


def _with(cmds: list[Command], d: Decision) -> Decision:
    d.commands[:0] = cmds
    return d


def decide(state: RoundtableState, obs: Observation) -> Decision:
    """One step of the machine. See the module docstring for the invariants.

    Args:
        state: the roundtable's current state (not modified; a new one is returned).
        obs: what the engine just read from the server (or saw on the event stream, for a
            fast handoff: the same shape, see :mod:`roundtabled.engine.mirror`).

    Returns:
        The new state, the commands to execute in order, and the next deadline.
    """
    return _indexed(_adopt_sent(_decide(state, obs), obs), state.phase)


def _indexed(d: Decision, phase: Phase) -> Decision:
    """The writes of a decision that changes the phase also update the session's index."""
    if d.state.phase != phase:
        d.commands = [
            replace(c, index=True) if isinstance(c, PersistState | Prompt) else c
            for c in d.commands
        ]
    return d


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
                and m.id not in pend.superseded
                and (m.marker.kind, m.marker.round, m.marker.seat) == want
            ),
            None,
        )
        if sent is None:
            continue
        d.commands[i] = replace(cmd, message_id=sent.id, send=False, persist_first=True)
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
        # S2 deleted, or S1 (S2 goes with it): abort first — a deleted busy session keeps
        # streaming (docs/opencode-server.md, "sessions") — then deliver, never write to S2.
        reason = EndReason.PARENT_DELETED if obs.parent_deleted else EndReason.SESSION_DELETED
        new = state.model_copy(update={"end_reason": reason})
        d = _finish(new, obs, phase=Phase.ABORTED, write=False)
        d.commands.insert(0, Abort())
        return d
    if obs.parent_deleted:
        new = state.model_copy(update={"end_reason": EndReason.PARENT_DELETED})
        d = _finish(new, obs, phase=Phase.ABORTED)
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
            state = state.model_copy(update={"summary": cancelled_text(state)})
            return _finish(state, obs)
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

    state = noted(state, obs.error)
    pend = state.pending
    assert pend is not None
    if not obs.pending_found:
        # The intent is persisted but the prompt is not in S2 (crash between persisting and
        # prompting, or the POST failed): send it again with the same id — it cannot be a
        # duplicate, the message does not exist.
        waited = obs.now - (pend.prompted_at or 0)
        if obs.accepted:
            timeout_at = (pend.prompted_at or obs.now) + int(state.options.turn_timeout * 1000)
            # The server accepted the prompt, then reported an error and never stored it.
            verdict, wake = never_started(pend, idle=obs.status == "idle", now=obs.now)
            if verdict == "reprompt":  # a busy database: nothing was written, send it once more
                return _with(cmds, _reprompt(state, obs))
            if verdict == "fail":
                return _with(cmds, _advance(state, obs, failed_entry(pend, pend.error), [], None))
            if obs.now < timeout_at:
                return _with(cmds, Decision(state, [], wake_at=min(wake or timeout_at, timeout_at)))
            # Accepted but never stored within the turn timeout: skip it as failed.
            return _with(cmds, _advance(state, obs, failed_entry(pend, None), [], None))
        if pend.prompted_at is None or (waited >= REPROMPT_GRACE_MS and obs.status == "idle"):
            return _with(cmds, _reprompt(state, obs))
        return _with(
            cmds, Decision(state, [], wake_at=(pend.prompted_at or obs.now) + REPROMPT_GRACE_MS)
        )

    turn_msg = next(
        (m for m in obs.messages if isinstance(m, UserView) and m.id == pend.message_id), None
    )
    answers = answers_to(obs.messages, pend.message_id)
    others_running = any(isinstance(m, AnswerView) and not m.completed for m in obs.messages)
    idle = obs.status == "idle"
    timeout_ms = int(state.options.turn_timeout * 1000)
    started = pend.prompted_at or (turn_msg.created if turn_msg else obs.now)
    round_number = pend.round + 1

    # A later turn prompt of ours in S2 means the pending turn is over even if S2 is busy: the
    # state write after a fast handoff was lost (crash), and S2 is running the next turn.
    moved_on = any(
        isinstance(m, UserView)
        and m.marker is not None
        and m.marker.kind in TURN_KINDS
        and m.id != pend.message_id
        for m in obs.messages
    )
    if ((idle and not others_running) or moved_on) and turn_is_final(answers, idle=True):
        if unusable_busy_end(answers) and pend.reprompts < MAX_REPROMPTS:
            return _with(cmds, _reprompt(state, obs, turn_msg))  # the database was busy
        aborted = bool(answers[-1].error_name == "MessageAbortedError")
        # A stored cancel without its abort time: the cancel was written, then the daemon
        # crashed before deciding on it (Engine.cancel writes it before aborting).
        cut = aborted and (
            pend.abort_requested_at is not None or state.end_reason == EndReason.CANCELLED
        )
        return _settle(state, obs, cmds, _answered_entry(state, answers, cut_off=cut), turn_msg)

    if idle and not others_running and pend.abort_requested_at is None:
        folded = folded_into(obs.messages, pend.message_id)
        if folded is not None:
            # The server answered a later message instead: keep it, then prompt the seat again.
            extras = extras_after(obs.messages, pend.message_id, round_number)
            if pend.reprompts < MAX_REPROMPTS:
                return _with(cmds, _reprompt(state, obs, turn_msg, extras))
            error = "its prompt got no reply: a later message in the session was answered instead"
            return _with(cmds, _advance(state, obs, failed_entry(pend, error), extras, turn_msg))

    if idle and not others_running and pend.abort_requested_at is None:
        overflow = failed_compaction(obs.messages, pend.message_id)
        if overflow is not None:
            # OpenCode compacted S2 inside this turn and the compaction failed: the turn will
            # never get its reply. Recorded as failed now, not at the turn timeout.
            entry = pending_entry(pend, answers).model_copy(
                update={"has_error": True, "error": overflow}
            )
            return _settle(state, obs, cmds, entry, turn_msg)

    stale = [a for a in answers if not a.completed]
    if idle and stale and pend.abort_requested_at is None:
        # The server says idle, yet a step of this turn never completed: the server restarted
        # mid-turn and dropped it. Settle the turn (with its partial text) instead of waiting
        # for the turn timeout.
        since = max(a.created for a in stale)
        if obs.now - since >= STALE_REPLY_GRACE_MS:
            entry = pending_entry(pend, answers).model_copy(
                update={
                    "has_error": True,
                    "error": "the reply was never completed (the server stopped during the turn)",
                }
            )
            return _settle(state, obs, cmds, entry, turn_msg)
        return _with(cmds, Decision(state, [], wake_at=since + STALE_REPLY_GRACE_MS))

    if pend.abort_requested_at is not None:
        cancelled = state.end_reason == EndReason.CANCELLED
        # A cancel that stopped the turn before the server created any reply: once S2 is idle
        # nothing is coming, so the grace is short (stop must stop; a cancel right
        # after the start hit the 5 s grace).
        grace = CANCEL_SETTLE_MS if cancelled and not answers else ABORT_GRACE_MS
        if idle and obs.now - pend.abort_requested_at >= grace:
            entry = _answered_entry(state, answers, cut_off=True)
            return _settle(state, obs, cmds, entry, turn_msg)
        abort_at: int = pend.abort_requested_at
        if not idle and obs.now - abort_at >= ABORT_GRACE_MS:
            abort_at = obs.now
            pend = pend.model_copy(update={"abort_requested_at": abort_at})
            state = state.model_copy(update={"pending": pend})
            cmds.append(Abort())
        wait = grace if idle else ABORT_GRACE_MS
        return _with(cmds, Decision(state, [], wake_at=abort_at + wait))

    if obs.now - started >= timeout_ms:
        # The turn timeout: abort and skip. The reply is recorded once S2 is idle again.
        pend = pend.model_copy(update={"abort_requested_at": obs.now})
        state = state.model_copy(update={"pending": pend})
        cmds.extend([Abort(), PersistState()])
        return _with(cmds, Decision(state, [], wake_at=obs.now + ABORT_GRACE_MS))

    if pend.error_seen_at is not None and idle and not answers and not others_running:
        if obs.now - pend.error_seen_at >= ERROR_GRACE_MS:
            error = pend.error or "the server reported an error and stored no reply"
            return _with(cmds, _advance(state, obs, failed_entry(pend, error), [], turn_msg))
        return _with(cmds, Decision(state, [], wake_at=pend.error_seen_at + ERROR_GRACE_MS))

    return _with(cmds, Decision(state, [], wake_at=started + timeout_ms))


def _answered_entry(
    state: RoundtableState, answers: Sequence[AnswerView], *, cut_off: bool
) -> HistoryEntry:
    """The pending turn's entry from ``answers`` (its steps, oldest first); ``cut_off``: it was
    aborted, by the cancel when the roundtable is cancelled (its error says so), else at the
    turn timeout."""
    pend = state.pending
    assert pend is not None
    cancelled = state.end_reason == EndReason.CANCELLED
    timeout_s = None if cancelled else state.options.turn_timeout
    entry = pending_entry(pend, answers, cut_off=cut_off, timeout_s=timeout_s)
    if cut_off and cancelled:
        entry = entry.model_copy(update={"error": "cut off by the cancel"})
    return entry


def _settle(
    state: RoundtableState,
    obs: Observation,
    cmds: list[Command],
    entry: HistoryEntry,
    turn_msg: UserView | None,
) -> Decision:
    """Record ``entry`` as the pending turn's, followed by the messages nobody of ours sent
    after its prompt (a person's, and their replies), and plan what comes next; ``cmds`` go
    first. ``turn_msg``: the turn's prompt in S2 (``None``: not seen), hidden once answered."""
    pend = state.pending
    assert pend is not None
    extras = extras_after(obs.messages, pend.message_id, pend.round + 1)
    return _with(cmds, _advance(state, obs, entry, extras, turn_msg))


def _reprompt(
    state: RoundtableState,
    obs: Observation,
    stored: UserView | None = None,
    extras: Sequence[HistoryEntry] = (),
) -> Decision:
    """Send the pending turn again: with the same message id when its prompt was never stored,
    else (``stored``: the prompt in S2) with a fresh one, hiding the old prompt; ``extras``
    (the messages that took its turn) go into the history first."""
    pend = state.pending
    assert pend is not None
    new_id = pend.message_id if stored is None else obs.new_id
    fresh = Observation(
        now=obs.now, status=obs.status, messages=obs.messages, new_id=new_id, plugin=obs.plugin
    )
    opening = (
        pend.kind == "turn"
        and pend.round == 0
        and pend.seat == 0
        and not state.extensions
        and not state.history
    )
    history = [*state.history, *extras]
    base = state.model_copy(update={"pending": None, "history": history})
    hide = (stored,) if stored is not None and not opening else ()
    if not state.options.hide_past_prompts:
        hide = ()
    d = plan_turn(base, fresh, opening=opening, hide=hide)
    if stored is not None or pend.error_seen_at is not None:
        d.state = counted(d.state, pend, superseded=stored is not None)
    d.commands[:0] = [TurnRecorded(e) for e in extras]
    return d


# ── turns the server accepted but did not run as asked (see the module docstring) ───────────────

MAX_REPROMPTS = 1
"""A turn is sent again at most this often (a second failure of the same kind settles it)."""
NEVER_STARTED_GRACE_MS = 500
"""After ``session.error`` for a prompt whose user message is not stored, with S2 idle: how long
before the turn is settled (ms). Long enough for an error of the previous turn that arrived just
after this prompt was sent to be followed by this prompt's own busy status or stored message;
short enough to settle within 2 s of the server's error."""

Verdict = Literal["wait", "reprompt", "fail"]


def error_text(answer: AnswerView) -> str | None:
    """``name: message`` of a step's error (``None`` without one)."""
    if not answer.error_name:
        return None
    if answer.error_message:
        return f"{answer.error_name}: {answer.error_message}"
    return answer.error_name


def never_started(pend: PendingTurn, *, idle: bool, now: int) -> tuple[Verdict, int | None]:
    """For a prompt the server accepted but whose user message is not in S2: ``("fail", _)``
    once the server's error was seen and S2 stayed idle for :data:`NEVER_STARTED_GRACE_MS`,
    ``("reprompt", _)`` instead when that error was a busy database and the turn was not sent
    again yet, else ``("wait", wake_at)`` (epoch ms; ``None``: no error seen, the turn timeout
    bounds the wait)."""
    seen = pend.error_seen_at
    if seen is None:
        return "wait", None
    settle_at = seen + NEVER_STARTED_GRACE_MS
    if not idle or now < settle_at:
        return "wait", settle_at
    if busy_text(pend.error) and pend.reprompts < MAX_REPROMPTS:
        return "reprompt", None
    return "fail", None


def folded_into(messages: Sequence[MessageView], prompt_id: str) -> UserView | None:
    """The later user message that took the turn of ``prompt_id``: not the daemon's, after the
    prompt, and answered by a completed reply, while the prompt itself has no reply. ``None``
    when the prompt was answered or nothing else was (call only with S2 idle and no step
    running)."""
    if answers_to(messages, prompt_id):
        return None
    ids = [m.id for m in messages]
    if prompt_id not in ids:
        return None
    for m in messages[ids.index(prompt_id) + 1 :]:
        if not isinstance(m, UserView):
            continue
        if m.marker is not None and m.marker.kind in TURN_KINDS:
            return None  # a later turn of ours: the pending turn is over anyway
        if m.marker is None and not m.state_block and not m.compaction:
            replies = answers_to(messages, m.id)
            if replies and all(r.completed for r in replies):
                return m
    return None


def failed_compaction(messages: Sequence[MessageView], prompt_id: str) -> str | None:
    """The error of a compaction that OpenCode ran after the prompt ``prompt_id`` and that
    failed (its ``compaction`` reply ended with an error, e.g. ``ContextOverflowError`` when the
    conversation no longer fits the model's context even to be summarised), while the prompt
    has no finished reply: the server's words, ``None`` when there is none (call only with S2
    idle and no step running; docs/design.md, "Turns that never start or are swallowed")."""
    ids = [m.id for m in messages]
    if prompt_id not in ids or turn_is_final(answers_to(messages, prompt_id), idle=True):
        return None
    for m in messages[ids.index(prompt_id) + 1 :]:
        if isinstance(m, UserView) and m.marker is not None and m.marker.kind in TURN_KINDS:
            return None  # a later turn of ours: the pending turn is over anyway
        if isinstance(m, AnswerView) and m.agent == "compaction" and m.error_name:
            detail = f": {m.error_message}" if m.error_message else ""
            return f"OpenCode's compaction of the session failed ({m.error_name}{detail})"
    return None


def unusable_busy_end(answers: Sequence[AnswerView]) -> bool:
    """The turn's last step ended with a busy database and no step stored any text."""
    return (
        bool(answers)
        and busy_text(error_text(answers[-1]))
        and not any(a.text.strip() for a in answers)
    )


def noted(state: RoundtableState, error: tuple[int, str] | None) -> RoundtableState:
    """``state`` with the server's ``session.error`` (epoch ms, ``name: message``) noted on the
    pending turn: only the first one counts (the server often reports a failure twice)."""
    pend = state.pending
    if error is None or pend is None or pend.error_seen_at is not None:
        return state
    update = {"error_seen_at": error[0], "error": error[1]}
    return state.model_copy(update={"pending": pend.model_copy(update=update)})


def counted(state: RoundtableState, swallowed: PendingTurn, *, superseded: bool) -> RoundtableState:
    """``state`` whose pending turn is the re-prompt of ``swallowed``: one more re-prompt
    counted, and (``superseded``: the swallowed prompt stays in S2) its id never adopted."""
    again = state.pending
    assert again is not None
    ids = [*swallowed.superseded, *([swallowed.message_id] if superseded else [])]
    update = {"reprompts": swallowed.reprompts + 1, "superseded": ids}
    return state.model_copy(update={"pending": again.model_copy(update=update)})
