"""Turns the server accepted but did not run as asked: what they look like in S2 (pure).

The machine (:mod:`roundtabled.core.machine`) asks these questions about the pending turn; each
answer is read from S2's messages and the pending turn's record, never from the order of events
(docs/design.md, "Turns that never start or are swallowed"):

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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from roundtabled.core.history import TURN_KINDS, answers_to
from roundtabled.core.state import PendingTurn, RoundtableState
from roundtabled.core.wire import AnswerView, MessageView, UserView
from roundtabled.opencode.retries import busy_text

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
