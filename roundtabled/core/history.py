"""The debate's history, built from S2's messages: pure functions of message views.

A turn's entry is made from the assistant messages answering its prompt (their ``parentID``); a
message nobody of ours sent is a person's entry and its reply an interjection; after a restart the
whole history is rebuilt from the signed turn markers (``docs/design.md``, "history"). No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from roundtabled.core.messages import AnswerView, MessageView, UserView, busy_text
from roundtabled.core.observer_flow import annotate
from roundtabled.core.observer_verdict import REPAIR_SEAT
from roundtabled.core.state import (
    MODE_NOTES,
    HistoryEntry,
    PendingTurn,
    RoundtableState,
    SeatEntryKind,
    Usage,
    ViewMode,
)

TURN_KINDS = ("turn", "observer")
"""Marker kinds of the daemon's prompts that start a turn."""


def answers_to(messages: Sequence[MessageView], user_id: str) -> list[AnswerView]:
    """The steps answering the user message ``user_id`` (compaction summaries excluded)."""
    return [
        m
        for m in messages
        if isinstance(m, AnswerView) and m.parent_id == user_id and not m.summary
    ]


def turn_is_final(answers: Sequence[AnswerView], *, idle: bool) -> bool:
    """Whether ``answers`` (the steps answering one turn prompt, oldest first) hold the turn's
    last step: every step completed, and the newest one ended the turn. The one rule of "this
    turn is final" of the machine and of the independent opening (``docs/design.md``).

    A step ends the turn when it failed (an error name), or finished ``stop``/``length`` (any
    finish but ``tool-calls``, ``unknown`` or none: after those the server calls the model
    again). A ``tool-calls`` step whose every tool was refused (the default
    ``permission_policy = reject``, a rejected question) is the last one too, but only once the
    session is known idle (``idle``): the server then stops its loop (regressions "permission
    prompts nobody answers", "question tool in a seat"); while the session is busy, or from an
    idle *event* that may be stale, it is not final.
    """
    if not answers or any(not a.completed for a in answers):
        return False
    last = answers[-1]
    if last.error_name:
        return True
    if last.finish == "tool-calls" and last.tool_calls:
        return idle and all(t.output_preview == "error" for t in last.tool_calls)
    return last.finish not in ("tool-calls", None, "unknown")


def entry_from_answers(
    answers: Sequence[AnswerView],
    *,
    agent: str,
    round_number: int,
    seat: int | None,
    kind: SeatEntryKind,
    message_id: str | None,
    cut_off: bool = False,
    timeout_s: float | None = None,
) -> HistoryEntry:
    """One history entry from a turn's steps: text, tools, files and usage summed; the error of
    the last step, ``cut_off`` (a timeout: ``timeout_s`` seconds, or a cancel), or no reply;
    the last step's finish reason and the reply's ``Position:``/``Changed:`` lines."""
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
        error = (
            f"{last.error_name}: {last.error_message}" if last.error_message else last.error_name
        )
        # The server's database was locked while it finished a step whose text it had stored:
        # the reply is whole (docs/design.md, "Turns that never start or are swallowed").
        has_error = not (busy_text(error) and text.strip())
        if not has_error:
            error = None
    entry = HistoryEntry(
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
    # The finish reason, the Position and Changed lines (docs/result.md).
    return annotate(entry, last.finish if last else None)


def pending_entry(
    pend: PendingTurn,
    answers: Sequence[AnswerView],
    *,
    cut_off: bool = False,
    timeout_s: float | None = None,
) -> HistoryEntry:
    """The entry of the pending turn ``pend`` made from ``answers`` (the steps answering its
    prompt, oldest first; empty: no reply was stored), as :func:`entry_from_answers` makes it
    with the turn's agent, 1-based round, kind and prompt id; its seat is kept for a seat turn
    and the observer's repair turn only. ``cut_off`` and ``timeout_s``: as there."""
    return entry_from_answers(
        answers,
        agent=pend.agent,
        round_number=pend.round + 1,
        seat=pend.seat if pend.kind == "turn" or pend.seat == REPAIR_SEAT else None,
        kind=pend.kind,
        message_id=pend.message_id,
        cut_off=cut_off,
        timeout_s=timeout_s,
    )


def failed_entry(pend: PendingTurn, error: str | None) -> HistoryEntry:
    """The failed entry of the pending turn, which stored no reply (``error``: why; default:
    no reply was stored)."""
    entry = pending_entry(pend, [])
    return entry.model_copy(update={"error": error}) if error else entry


def extras_after(
    messages: Sequence[MessageView], after_id: str, round_number: int
) -> list[HistoryEntry]:
    """History entries for messages not sent by the daemon, after ``after_id``'s turn.

    A person's message in S2 becomes a ``user`` entry and the server's reply to it an
    ``interjection`` entry; compaction messages and server-synthetic prompts count as nobody's
    turn, but a reply to a synthetic prompt is kept as an interjection of its agent.
    """
    out: list[HistoryEntry] = []
    ids = [m.id for m in messages]
    start = ids.index(after_id) + 1 if after_id in ids else 0
    for m in messages[start:]:
        if isinstance(m, UserView) and m.marker is not None and m.marker.kind in TURN_KINDS:
            break  # a later turn of ours (a stale stored state): what follows is that turn's
        if isinstance(m, UserView) and m.marker is None and not m.state_block:
            out.extend(person_entries(m, messages, round_number))
    return out


def person_entries(
    m: UserView, messages: Sequence[MessageView], round_number: int
) -> list[HistoryEntry]:
    """A message of S2 not sent by the daemon: a person's text becomes a ``user`` entry and
    the reply to it an ``interjection`` entry; compaction messages count as nobody's
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
    replies = answers_to(messages, m.id)
    if replies:
        out.append(
            entry_from_answers(
                replies,
                agent=replies[-1].agent,
                round_number=round_number,
                seat=None,
                kind="interjection",
                message_id=m.id,
            )
        )
    return out


def last_response_of_round(state: RoundtableState, round_number: int) -> str | None:
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


def rebuild_history(state: RoundtableState, messages: Sequence[MessageView]) -> list[HistoryEntry]:
    """The history from S2's messages, up to (not including) the pending turn's prompt.

    Used after a restart: while a roundtable is active its history is not persisted (it is derived
    from the signed turn markers and the answers' ``parentID``). A message that is the state
    block and turn 1's prompt at once is that turn's prompt; the state block's own message
    (the layout before, and a start without a first prompt) is nobody's (docs/design.md,
    "State format").
    """
    stop = state.pending.message_id if state.pending else None
    # An independent opening round ran in sessions of its own: its turns are in the state.
    done = state.openings is not None and state.openings.done
    out: list[HistoryEntry] = state.openings.entries() if state.openings and done else []
    second = state.second_round
    if done and second is not None and second.done:
        out += second.entries()  # a protocol's second independent round (docs/deliberation.md)
    for m in messages:
        if m.id == stop:
            break
        if not isinstance(m, UserView):
            continue
        mk = m.marker
        if m.state_block and mk is None:
            continue  # the state block's own message: nobody's turn (turn 1 may carry it too)
        if mk is not None and mk.kind in ("turn", "observer"):
            answers = answers_to(messages, m.id)
            if _sent_again(m, answers, messages):
                continue  # swallowed by the server, then prompted again: the later one counts
            if mk.kind == "turn":
                cut = bool(answers) and answers[-1].error_name == "MessageAbortedError"
                out.append(
                    entry_from_answers(
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
                    entry_from_answers(
                        answers,
                        agent=mk.agent,
                        round_number=mk.round + 1,
                        seat=REPAIR_SEAT if mk.seat == REPAIR_SEAT else None,
                        kind="observer",
                        message_id=m.id,
                    )
                )
            continue
        if mk is not None:
            continue
        out.extend(person_entries(m, messages, out[-1].round if out else 1))
    return out


def _sent_again(
    prompt: UserView, answers: Sequence[AnswerView], messages: Sequence[MessageView]
) -> bool:
    """A turn prompt with no usable reply whose turn was prompted again later in S2 (a prompt the
    server swallowed: docs/design.md, "Turns that never start or are swallowed")."""
    mk = prompt.marker
    if mk is None or mk.kind != "turn" or any(a.text.strip() for a in answers):
        return False
    ids = [m.id for m in messages]
    return any(
        isinstance(m, UserView)
        and m.marker is not None
        and (m.marker.kind, m.marker.round, m.marker.seat) == (mk.kind, mk.round, mk.seat)
        for m in messages[ids.index(prompt.id) + 1 :]
    )


def all_replies_exist(state: RoundtableState, messages: Sequence[MessageView]) -> bool:
    """Every expected reply of the debate is in S2 (each seat turn and the observer answered),
    although the stored phase says it is running: a crash after the last reply, before the
    state said done (an extend then takes it as done)."""
    answered = sum(
        1
        for v in messages
        if isinstance(v, UserView)
        and v.marker is not None
        and v.marker.kind in TURN_KINDS
        and any(isinstance(a, AnswerView) and a.parent_id == v.id and a.completed for a in messages)
    )
    expected = state.total_rounds * len(state.agents) + 1
    return answered >= expected


def with_modes_ran(state: RoundtableState, messages: Sequence[MessageView]) -> RoundtableState:
    """``state`` whose notes name the view modes S2's signed daemon prompts (``messages``) ran
    in and no other, in the order each first ran (a turn or observer marker with
    ``view: "plugin"`` ran in the plugin mode, one without in the patch mode; docs/plugin.md).

    After a restart the stored notes can be behind S2 (the state write after a fast handoff is
    deferred): without this, a debate whose turns ran with the plugin until the kill would say
    only the mode of the turns after it."""
    ran: list[ViewMode] = []
    for m in messages:
        if isinstance(m, UserView) and m.marker is not None and m.marker.kind in TURN_KINDS:
            mode: ViewMode = "plugin" if m.marker.view == "plugin" else "patch"
            if mode not in ran:
                ran.append(mode)
    # The stored notes name a prefix of the modes that ran (they are behind S2), but for a turn
    # planned and never sent, whose mode no prompt ran in: its note goes (the turn is planned
    # again, in the mode of the instance now, which says its own); the missing ones ran after
    # the stored ones and are appended in order.
    said = [MODE_NOTES[mode] for mode in ran]
    kept = [n for n in state.notes if n not in MODE_NOTES.values() or n in said]
    missing = [n for n in said if n not in kept]
    if kept == state.notes and not missing:
        return state
    return state.model_copy(update={"notes": [*kept, *missing]})
