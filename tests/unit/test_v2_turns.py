"""The ended turn from the 2.x event stream (roundtabled/opencode/v2_turns.py), without a server:
a turn's frames as 2.1.2 sends them (``durable.seq`` numbered in the session's sequence) rebuild
the records a read returns; whatever is missed, duplicated or interrupted by a reconnect leaves
the turn to the read, never a turn rebuilt from part of its events. The real server's side is
``tests/contract/test_v2_turn_stream.py``."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from roundtabled.opencode.events import Event
from roundtabled.opencode.v2 import AssistantRecord, IdleRecord, UserRecord, parse_v2_event
from roundtabled.opencode.v2_turns import TurnStream

SID = "ses_x"
PROMPT = "msg_prompt"
MODEL = {"id": "debater-1", "providerID": "scripted", "variant": "default"}


def frame(etype: str, seq: int | None, **data: Any) -> Event:
    """One ``GET /api/event`` frame of session ``SID`` through the adapter's parser."""
    obj: dict[str, Any] = {"id": f"evt_{etype}_{seq}", "type": etype, "data": {"sessionID": SID}}
    obj["data"].update(data)
    if seq is not None:
        obj["durable"] = {"aggregateID": SID, "seq": seq, "version": 1}
    ev = parse_v2_event(orjson.dumps(obj))
    assert ev is not None
    return ev


def turn(first_seq: int = 1) -> list[Event]:
    """A prompt answered in two steps (a tool step with text, then the answer), as 2.1.2 sends
    it; volatile events (deltas, usage) carry no ``seq``."""
    seq = iter(range(first_seq, first_seq + 100))
    a, b = "msg_step_a", "msg_step_b"
    return [
        frame("session.inbox.enqueued", next(seq), inboxID=PROMPT),
        frame("session.execution.started", next(seq)),
        frame("session.instructions.updated", next(seq)),
        frame("session.inbox.delivered", next(seq), inboxID=PROMPT),
        frame("session.step.started", next(seq), assistantMessageID=a, agent="pm", model=MODEL),
        frame("session.text.started", next(seq), assistantMessageID=a, ordinal=0),
        frame("session.text.delta", None, assistantMessageID=a, ordinal=0, delta="Look"),
        frame("session.text.ended", next(seq), assistantMessageID=a, ordinal=0, text="Looking."),
        frame("session.tool.called", next(seq), assistantMessageID=a, id="call_1"),
        frame("session.tool.success", next(seq), assistantMessageID=a, id="call_1"),
        frame(
            "session.step.ended",
            next(seq),
            assistantMessageID=a,
            finish="tool-calls",
            tokens={"input": 100, "output": 5},
        ),
        frame("session.step.started", next(seq), assistantMessageID=b, agent="pm", model=MODEL),
        frame("session.text.started", next(seq), assistantMessageID=b, ordinal=0),
        frame("session.text.ended", next(seq), assistantMessageID=b, ordinal=0, text="Found."),
        frame(
            "session.step.ended",
            next(seq),
            assistantMessageID=b,
            finish="stop",
            tokens={"input": 120, "output": 7},
        ),
        frame("session.usage.updated", None, tokens={"input": 220, "output": 12}),
        frame("session.execution.succeeded", next(seq)),
    ]


def ended(events: list[Event]) -> Any:
    stream = TurnStream()
    stream.follow(Event("server.connected"))
    stream.watch(SID)  # as the port does before it prompts
    for ev in events:
        stream.follow(ev)
    return stream.ended(SID, PROMPT)


def test_a_whole_turn_rebuilds_the_records_a_read_returns() -> None:
    records = ended(turn())
    assert records is not None
    user, step_a, step_b, idle = records
    assert isinstance(user, UserRecord) and user.id == PROMPT
    assert isinstance(step_a, AssistantRecord) and isinstance(step_b, AssistantRecord)
    assert (step_a.text, step_a.finish, step_a.tokens) == (
        "Looking.",
        "tool-calls",
        {"input": 100, "output": 5},
    )
    assert (step_b.text, step_b.finish, step_b.agent) == ("Found.", "stop", "pm")
    assert step_b.model is not None and step_b.model.id == "debater-1"
    assert isinstance(idle, IdleRecord) and idle.outcome == "succeeded"


EXECUTION = range(1, len(turn()))
"""Indices of the execution's events (from ``session.execution.started`` to its end)."""
INSIDE = range(2, len(turn()))
"""Indices of the events after ``session.execution.started``."""
LAST = turn()[-1].seq or 0


@given(st.sets(st.sampled_from([i for i in EXECUTION if turn()[i].seq is not None]), min_size=1))
def test_a_turn_with_any_of_its_events_missed_is_left_to_the_read(missed: set[int]) -> None:
    events = turn()
    assert ended([e for i, e in enumerate(events) if i not in missed]) is None


@given(st.sampled_from(list(INSIDE)))
def test_a_reconnect_during_the_execution_leaves_the_turn_to_the_read(at: int) -> None:
    events = turn()
    events.insert(at, Event("server.connected"))
    assert ended(events) is None


@given(st.sampled_from([i for i in INSIDE if turn()[i].seq is not None]))
def test_an_event_seen_twice_leaves_the_turn_to_the_read(at: int) -> None:
    events = turn()
    events.insert(at, events[at])
    assert ended(events) is None


def test_what_the_read_must_tell_is_left_to_it() -> None:
    events = turn()
    # a failed step, or an execution that failed
    failed = [*events[:-1], frame("session.execution.failed", events[-1].seq)]
    assert ended(failed) is None
    at = events[10].seq or 0
    step_failed = [
        *events[:10],
        frame("session.step.failed", at, assistantMessageID="msg_step_a"),
        frame("session.execution.succeeded", at + 1),
    ]
    assert ended(step_failed) is None
    interrupted = [*events[:-1], frame("session.execution.interrupted", events[-1].seq)]
    assert ended(interrupted) is None
    # a person's note admitted during the turn, or after it (before the next prompt)
    note = frame("session.inbox.enqueued", events[5].seq, inboxID="msg_note")
    renumbered = turn(first_seq=2)
    assert ended([*events[:5], note, *renumbered[5:]]) is None
    assert ended([*events, frame("session.inbox.enqueued", LAST + 1, inboxID="msg_note")]) is None
    # an event of the session this adapter does not know
    assert ended([*events, frame("session.compaction.started", LAST + 1)]) is None
    # a frame of a tracked type without its number
    assert ended([*events[:-1], frame("session.execution.succeeded", None)]) is None
    # a deleted session, a session never seen
    assert ended([*events, frame("session.deleted", LAST + 1)]) is None
    stream = TurnStream()
    assert stream.ended("ses_other", PROMPT) is None
    # a session not watched (not prompted by this port): not followed at all
    for ev in events:
        stream.follow(ev)
    assert stream.ended(SID, PROMPT) is None


def test_what_follows_the_end_and_changes_no_record_keeps_the_turn() -> None:
    events = turn()
    after = [
        frame("session.metadata.updated", LAST + 1, metadata={}),
        frame("session.agent.selected", LAST + 2, agent="dev"),
        frame("session.model.selected", LAST + 3, model=MODEL),
    ]
    assert ended([*events, *after]) == ended(events) is not None


def test_the_session_watched_least_recently_is_forgotten_first() -> None:
    stream = TurnStream()
    stream.watch(SID)
    for ev in turn():
        stream.follow(ev)
    assert stream.ended(SID, PROMPT) is not None
    for i in range(TurnStream.KEPT - 1):
        stream.watch(f"ses_other_{i}")
    stream.watch(SID)  # watched again before its next prompt: kept, the ended turn with it
    stream.watch("ses_one_more")
    assert stream.ended(SID, PROMPT) is not None
    for i in range(TurnStream.KEPT):
        stream.watch(f"ses_later_{i}")
    assert stream.ended(SID, PROMPT) is None  # forgotten: its turn is read
