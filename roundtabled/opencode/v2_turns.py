"""The ended turn as OpenCode 2.x's event stream shows it: the records a read would return,
rebuilt from the events of the execution that answered a prompt (the V2 adapter's JSON).

A turn on 2.x is one execution (docs/opencode-server.md, "2.x"): ``session.execution.started``,
the prompt's ``session.inbox.delivered {inboxID}``, per model step ``session.step.started
{assistantMessageID, agent, model}``, its text parts (``session.text.started`` /
``session.text.ended {ordinal, text}``: the part's whole text) and ``session.step.ended {finish,
tokens}``, then ``session.execution.succeeded``. Each of these is durable: it carries
``durable.seq``, its number in the session's own sequence (:attr:`~roundtabled.opencode.v2.
V2Event.seq`), so an event missed between the execution's start and its end shows as a gap.

:class:`TurnStream` follows the executions of the sessions it is told to watch (the port's
own: :meth:`TurnStream.watch` before each prompt it sends) and keeps, per session, the records of
the last one that ended when it can vouch for all of them (:meth:`TurnStream.ended`); anything
else leaves the turn to the read (:meth:`~roundtabled.opencode.port.V2Port.turn_outcome`), which
stays the truth the shell falls back to (docs/design.md, "The 2.x shell"):

- the stream (re)connected (``server.connected``: events during a disconnection are not
  replayed) or a gap in the session's sequence, during the execution or after it;
- an execution not seen from its start, or one that failed or was interrupted (the read has the
  error's words), or a step that failed;
- an execution that delivered no prompt, or more than one (a person's note steered into the
  turn: the read finds the note and its reply), or any prompt admitted to the session after the
  execution started (a note not delivered yet);
- an event of the session this module does not know (a compaction, a shell command, …), a
  malformed one, a step or text part that started and did not end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from roundtabled.opencode.events import Event
from roundtabled.opencode.v2 import (
    EXECUTION_END_TYPES,
    AssistantRecord,
    IdleRecord,
    Record,
    UserRecord,
    V2Event,
)

__all__ = ["TurnStream"]

CONNECTED: Final = "server.connected"
STARTED: Final = "session.execution.started"
SUCCEEDED: Final = "session.execution.succeeded"
ENQUEUED: Final = "session.inbox.enqueued"
DELIVERED: Final = "session.inbox.delivered"
STEP_STARTED: Final = "session.step.started"
STEP_ENDED: Final = "session.step.ended"
TEXT_STARTED: Final = "session.text.started"
TEXT_ENDED: Final = "session.text.ended"

TRACKED: Final = frozenset(
    {STARTED, ENQUEUED, DELIVERED, STEP_STARTED, STEP_ENDED, TEXT_STARTED, TEXT_ENDED}
    | EXECUTION_END_TYPES
)
"""The events a turn's records are rebuilt from; each is durable (carries ``durable.seq``)."""

NEUTRAL: Final = frozenset(
    {
        "session.instructions.updated",
        "session.step.streamed",
        "session.text.delta",
        "session.reasoning.started",
        "session.reasoning.delta",
        "session.reasoning.ended",
        "session.tool.input.started",
        "session.tool.input.delta",
        "session.tool.input.ended",
        "session.tool.called",
        "session.tool.progress",
        "session.tool.success",
        "session.tool.failed",
        "session.retry.scheduled",
        "session.usage.updated",
        "session.metadata.updated",
        "session.agent.selected",
        "session.model.selected",
        "session.renamed",
        "permission.asked",
        "permission.replied",
    }
)
"""Events of a session that change nothing a read of the turn's reply text, finish, tokens,
agent and model would show (reasoning and tool parts are not the reply's text: :attr:`~roundtabled.
opencode.v2.AssistantRecord.text`; a switch or a metadata write changes no record of the turn)."""


@dataclass
class _Step:
    id: str
    agent: Any
    model: Any
    texts: dict[int, str] = field(default_factory=dict)
    open: set[int] = field(default_factory=set)
    finish: Any = None
    tokens: Any = None
    ended: bool = False


@dataclass
class _Execution:
    delivered: list[str] = field(default_factory=list)
    steps: dict[str, _Step] = field(default_factory=dict)
    broken: bool = False


@dataclass
class _Session:
    last_seq: int | None = None
    running: _Execution | None = None
    ended: tuple[str, list[Record]] | None = None
    """The prompt id and the records from the prompt to the ``idle`` record, oldest first."""


class TurnStream:
    """Follows the executions of the watched sessions on one 2.x event stream (:meth:`follow`,
    every event in the stream's order) and answers which prompt's execution ended and with which
    records (:meth:`ended`). Not thread-safe; no I/O."""

    KEPT = 1024
    """How many sessions are watched at once (the one watched least recently is forgotten first:
    its next turn is read). Each holds at most the records of its last ended turn, so a daemon
    that ran many roundtables keeps the last reply of at most this many; ten times the 100
    roundtables at once of the memory figure (docs/testing.md)."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}

    def watch(self, session_id: str) -> None:
        """Follow ``session_id``'s executions from now on (call it before sending a prompt, so
        its execution is seen from the start); a session already watched is kept as it is."""
        s = self._sessions.pop(session_id, None) or _Session()
        self._sessions[session_id] = s  # the most recently watched last
        if len(self._sessions) > self.KEPT:
            del self._sessions[next(iter(self._sessions))]

    def reset(self) -> None:
        """Forget every session (the stream reconnected: what happened meanwhile is not
        replayed); each is followed again from its next :meth:`watch`."""
        self._sessions.clear()

    def follow(self, event: Event) -> None:
        """Take one event of the stream, in the stream's order."""
        if event.type == CONNECTED:
            self.reset()
            return
        sid = event.session_id
        s = self._sessions.get(sid) if sid is not None else None
        if s is None:
            return  # not watched
        if event.type == "session.deleted":
            del self._sessions[sid]  # type: ignore[arg-type]
            return
        seq = event.seq if isinstance(event, V2Event) else None
        if seq is not None:
            if s.last_seq is not None and seq != s.last_seq + 1:
                self._lost(s)  # an event of this session was missed
            s.last_seq = seq
        elif event.type in TRACKED:
            self._lost(s)  # cannot tell whether one was missed
            return
        if event.type == STARTED:
            s.running, s.ended = _Execution(), None
            return
        run = s.running
        if run is None:
            if event.type not in NEUTRAL:
                s.ended = None  # a prompt admitted, or anything else: the read tells
            return
        if event.type in EXECUTION_END_TYPES:
            s.running = None
            s.ended = _records(run, event) if event.type == SUCCEEDED else None
        elif not run.broken and event.type not in NEUTRAL:
            run.broken = not _took(run, event)

    def ended(self, session_id: str, prompt_id: str) -> list[Record] | None:
        """The records of the execution that answered ``prompt_id`` in ``session_id``, as
        :meth:`~roundtabled.opencode.v2.V2Client.messages` gives them from the prompt on (the
        user record, one assistant record per step, the ``idle`` record), when the stream showed
        all of that execution and nothing since that a read could see differently; ``None``:
        read it."""
        s = self._sessions.get(session_id)
        if s is None or s.ended is None or s.ended[0] != prompt_id:
            return None
        return s.ended[1]

    @staticmethod
    def _lost(s: _Session) -> None:
        if s.running is not None:
            s.running.broken = True
        s.ended = None


def _took(run: _Execution, event: Event) -> bool:
    """Apply one tracked event to the running execution; ``False``: it cannot be vouched for."""
    p = event.properties
    kind = event.type
    if kind == DELIVERED:
        inbox = p.get("inboxID")
        run.delivered.append(inbox if isinstance(inbox, str) else "")
        return isinstance(inbox, str) and len(run.delivered) == 1
    if kind == STEP_STARTED:
        sid = p.get("assistantMessageID")
        if not run.delivered or not isinstance(sid, str) or sid in run.steps:
            return False
        run.steps[sid] = _Step(sid, p.get("agent"), p.get("model"))
        return True
    if kind not in (TEXT_STARTED, TEXT_ENDED, STEP_ENDED):
        return False  # a prompt admitted into the running execution, a failed step, or unknown
    step = run.steps.get(p.get("assistantMessageID"))  # type: ignore[arg-type]
    if step is None or step.ended:
        return False
    if kind == STEP_ENDED:
        step.ended, step.finish, step.tokens = True, p.get("finish"), p.get("tokens")
        return True
    ordinal = p.get("ordinal")
    if type(ordinal) is not int:
        return False
    if kind == TEXT_STARTED:
        step.open.add(ordinal)
        return True
    text = p.get("text")
    if not isinstance(text, str) or ordinal not in step.open:
        return False
    step.open.discard(ordinal)
    step.texts[ordinal] = text
    return True


def _records(run: _Execution, end: Event) -> tuple[str, list[Record]] | None:
    """The records of a succeeded execution, or ``None`` when it cannot be vouched for."""
    if run.broken or len(run.delivered) != 1 or not run.steps:
        return None
    if any(not s.ended or s.open for s in run.steps.values()):
        return None
    prompt_id = run.delivered[0]
    records: list[Record] = [UserRecord(type="user", id=prompt_id)]
    try:
        for s in run.steps.values():
            records.append(
                AssistantRecord.model_validate(
                    {
                        "type": "assistant",
                        "id": s.id,
                        "agent": s.agent,
                        "model": s.model,
                        "content": [{"type": "text", "text": s.texts[o]} for o in sorted(s.texts)],
                        "finish": s.finish,
                        "tokens": s.tokens,
                    }
                )
            )
    except ValidationError:
        return None
    # the idle record's id is the end event's with the ``msg_`` prefix (docs/opencode-server.md)
    idle_id = "msg_" + (end.id or "").removeprefix("evt_")
    records.append(IdleRecord(type="idle", id=idle_id, outcome="succeeded"))
    return prompt_id, records
