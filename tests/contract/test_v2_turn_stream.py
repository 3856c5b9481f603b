"""Contract: the ended turn from OpenCode 2.x's event stream (roundtabled/opencode/v2_turns.py)
against the real 2.1.2 server. What the V2 adapter relies on to take a turn's outcome from the
stream instead of a read (docs/design.md, "The 2.x shell"):

- every event of a turn that the outcome is rebuilt from is durable, numbered in its session's
  own sequence with no gap from ``session.execution.started`` to its end, so a missed event shows;
- ``session.inbox.delivered`` names the prompt by the id the client gave it;
- ``session.text.ended`` holds the text part's whole text, ``session.step.started`` the step's
  agent and model, ``session.step.ended`` its finish and tokens: the outcome built from them is
  the one the read gives (a reasoning part and a tool step included);
- an interrupted turn and a turn with a note steered into it are left to the read.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Sequence

import pytest
import pytest_asyncio

from roundtabled.core.server_records import SessionRef, TurnStatus
from roundtabled.offline.scripted_actions import Hang, Text, ToolCall, ToolCalls
from roundtabled.opencode.events import Event
from roundtabled.opencode.port import V2Port
from roundtabled.opencode.v2 import turn_end
from roundtabled.opencode.v2_turns import TRACKED, TurnStream
from tests.contract.v2_env import V2Env, start_v2_env, stop_v2_env

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def v2(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[V2Env]:
    env = await start_v2_env(tmp_path_factory.mktemp("v2turns"))
    try:
        yield env
    finally:
        await stop_v2_env(env)


def msg_id() -> str:
    return "msg_" + secrets.token_hex(13)


def port_after(v2: V2Env, session_id: str, events: Sequence[Event]) -> V2Port:
    """A port on the env's client that has seen ``events`` (its own stream is not started),
    watching ``session_id`` from the stream's connection on (as its ``start_turn`` would before
    the prompt)."""
    port = V2Port(v2.client, "2.1.2")
    assert events[0].type == "server.connected"
    port.seen(events[0])
    port.watch(SessionRef(session_id, v2.directory))
    for ev in events[1:]:
        port.seen(ev)
    return port


async def one_turn(v2: V2Env, session_id: str, text: str, **prompt: object) -> str:
    since = len(v2.events)
    mid = msg_id()
    await v2.client.prompt(session_id, text, message_id=mid, **prompt)  # type: ignore[arg-type]
    await v2.wait_event(
        lambda e: turn_end(e) is not None and e.session_id == session_id, since=since
    )
    return mid


def execution_of(events: Sequence[Event], session_id: str) -> list[Event]:
    """The session's events from its last ``session.execution.started`` to that execution's end."""
    mine = [e for e in events if e.session_id == session_id]
    start = max(i for i, e in enumerate(mine) if e.type == "session.execution.started")
    end = next(i for i in range(start, len(mine)) if turn_end(mine[i]) is not None)
    return mine[start : end + 1]


async def test_a_turn_s_events_are_numbered_without_gaps_and_rebuild_what_the_read_gives(
    v2: V2Env,
) -> None:
    c = v2.client
    seat = await c.create_session(directory=v2.directory, agent="pm")
    v2.llm.script(
        Text(text="A reply streamed in many small deltas.", chunk_size=3, reasoning="Hmm."),
        session=seat.id,
    )
    mid = await one_turn(v2, seat.id, "Your opening statement?")
    run = execution_of(v2.events, seat.id)
    seqs = [e.seq for e in run if e.seq is not None]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), [(e.type, e.seq) for e in run]
    assert all(e.seq is not None for e in run if e.type in TRACKED), [
        e.type for e in run if e.type in TRACKED and e.seq is None
    ]
    delivered = [e.properties.get("inboxID") for e in run if e.type == "session.inbox.delivered"]
    assert delivered == [mid]
    (text_ended,) = [e for e in run if e.type == "session.text.ended"]
    assert text_ended.properties["text"] == "A reply streamed in many small deltas."

    port = port_after(v2, seat.id, v2.events)
    ref = SessionRef(seat.id, v2.directory)
    streamed = port.ended_turn(ref, mid)
    read = await port.turn_outcome(ref, mid)
    assert read.status is TurnStatus.ANSWERED
    assert streamed == read
    assert (streamed.agent, streamed.finish, streamed.tokens_in) == ("pm", "stop", read.tokens_in)


async def test_a_turn_of_two_steps_with_a_tool_call_rebuilds_what_the_read_gives(
    v2: V2Env,
) -> None:
    c = v2.client
    seat = await c.create_session(directory=v2.directory, agent="build")
    v2.llm.script(
        ToolCalls(calls=[ToolCall(name="glob", arguments={"pattern": "*.json"})], text="Looking."),
        Text(text="Found the config."),
        session=seat.id,
    )
    mid = await one_turn(v2, seat.id, "Which config files are there?")
    run = execution_of(v2.events, seat.id)
    assert sum(e.type == "session.step.started" for e in run) == 2
    port = port_after(v2, seat.id, v2.events)
    ref = SessionRef(seat.id, v2.directory)
    streamed = port.ended_turn(ref, mid)
    read = await port.turn_outcome(ref, mid)
    assert streamed is not None and streamed == read
    assert "Found the config." in streamed.text


async def test_each_event_missed_leaves_the_turn_to_the_read(v2: V2Env) -> None:
    c = v2.client
    seat = await c.create_session(directory=v2.directory, agent="pm")
    v2.llm.script(Text(text="Every event of mine counts.", chunk_size=4), session=seat.id)
    mid = await one_turn(v2, seat.id, "Go.")
    ref = SessionRef(seat.id, v2.directory)
    assert port_after(v2, seat.id, v2.events).ended_turn(ref, mid) is not None
    run = execution_of(v2.events, seat.id)
    for dropped in (e for e in run if e.seq is not None):
        port = port_after(v2, seat.id, [e for e in v2.events if e is not dropped])
        assert port.ended_turn(ref, mid) is None, dropped.type
    # a reconnect during the execution: the stream does not replay what it missed
    reconnected = [*v2.events]
    at = reconnected.index(run[1])
    reconnected.insert(at, Event("server.connected"))
    assert port_after(v2, seat.id, reconnected).ended_turn(ref, mid) is None
    stream = TurnStream()
    stream.watch(seat.id)
    for ev in v2.events[1:]:
        stream.follow(ev)
    assert stream.ended(seat.id, "msg_another") is None  # another prompt's turn: not this one


async def test_an_interrupted_turn_is_left_to_the_read(v2: V2Env) -> None:
    c = v2.client
    seat = await c.create_session(directory=v2.directory, agent="pm")
    v2.llm.script(Hang(max_seconds=60), session=seat.id)
    since = len(v2.events)
    mid = msg_id()
    await c.prompt(seat.id, "hang", message_id=mid)
    await v2.llm.wait_for_requests(1, within=30, session=seat.id)
    assert await c.interrupt(seat.id) is True
    await v2.wait_event(lambda e: turn_end(e) is not None and e.session_id == seat.id, since=since)
    port = port_after(v2, seat.id, v2.events)
    ref = SessionRef(seat.id, v2.directory)
    assert port.ended_turn(ref, mid) is None
    assert (await port.turn_outcome(ref, mid)).status is TurnStatus.INTERRUPTED


async def test_a_note_steered_into_the_turn_is_left_to_the_read(v2: V2Env) -> None:
    c = v2.client
    seat = await c.create_session(directory=v2.directory, agent="pm")
    v2.llm.script(
        Text(text="the seat's reply", chunk_size=2, chunk_delay=0.1),
        Text(text="the note's reply"),
        session=seat.id,
    )
    since = len(v2.events)
    mid = msg_id()
    await c.prompt(seat.id, "the seat's turn", message_id=mid)
    await v2.llm.wait_for_requests(1, within=30, session=seat.id)
    await c.prompt(seat.id, "a person's note", message_id=msg_id(), delivery="steer")
    await v2.wait_event(lambda e: turn_end(e) is not None and e.session_id == seat.id, since=since)
    port = port_after(v2, seat.id, v2.events)
    ref = SessionRef(seat.id, v2.directory)
    assert port.ended_turn(ref, mid) is None
    read = await port.turn_outcome(ref, mid)
    assert [n.reply for n in read.interjections] == ["the note's reply"]
