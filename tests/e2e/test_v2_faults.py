"""``kill -9`` of the daemon on OpenCode 2.x, and a person's note during a seat's turn, on the real
2.1.2 server (only the model is scripted; the harness: ``v2_kill_harness.py``).

What each kill proves after the restarted daemon finished the roundtable:

- no turn is sent twice: the scripted model saw each seat once per round and the observer once,
  in order;
- the result is in S1 exactly once: in the waiting tool call's part (its signed mark beside it)
  and no fallback message, or, when nobody waits, one fallback message (a ``synthetic`` record
  with ``resume: false``, parked in S1's inbox) that S1's model reads once, at the next prompt;
- the result says the roundtable was resumed after a restart (2.x shows no toast).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from roundtabled.core.state import OBSERVER_AGENT, RESUMED_NOTE
from roundtabled.offline.scripted_actions import Text
from tests.e2e.v2_kill_harness import (
    ROUNDS,
    SEATS,
    SUMMARY,
    V2Faults,
    new_message_id,
    reply,
    said_by_user,
    script_tool_call,
    tool_results,
    v2_faults,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240), pytest.mark.e2e]

DEBATE_TURNS = [*SEATS * ROUNDS, OBSERVER_AGENT]
"""The model's turn requests of one debate, in order: each seat once per round, the observer."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[V2Faults]:
    async for e in v2_faults(tmp_path_factory.mktemp("v2faults")):
        yield e


def resumed_notes(status: dict[str, object]) -> list[str]:
    result = status.get("result")
    assert isinstance(result, dict), status
    notes = result["status"]["notes"]
    return [n for n in notes if n.startswith(RESUMED_NOTE)]


@pytest.mark.parametrize(
    "fault",
    [
        # after turn 1 a seat turn's state write follows its prompt, the plugin's report being
        # trusted first (env.plugin_trusted; docs/design.md, "The 2.x shell")
        "prompted:2",  # mid-debate: dev's round-1 prompt is accepted, its turn runs, S2's
        # block still names pm's ended turn (the write after the prompt never left)
        "prompted:3",  # the same for pm's round 2, whose turn ends while the daemon is down
        "intent-persisted:3",  # mid-debate: pm's round-2 prompt is accepted and its turn written
        "switched:3",  # mid-debate: pm's round-2 agent and model switched, its prompt not sent
        "turn-recorded:3",  # mid-debate: pm's round-2 answer is in memory, nothing written
        "observer-prompted:1",  # the observer's turn runs
        "result-taken:1",  # the tool call's poll took the result; its answer never left
        "delivered:1",  # S1's tool part holds the result; the daemon has not recorded it
    ],
)
async def test_a_kill_while_the_tool_call_waits_delivers_the_result_once(
    env: V2Faults, fault: str
) -> None:
    """S1's model calls the 2.x plugin's `roundtable` tool; the daemon is killed at ``fault``
    and restarted; the tool call, still waiting, gets the result, and nothing else reaches S1."""
    s1 = await env.s1()
    call_id = "call_" + fault.replace(":", "_").replace("-", "_")
    since = len(env.llm.requests)
    env.script_debate(slow=("dev", 0) if fault == "prompted:2" else None)
    script_tool_call(env.llm, s1, call_id)
    await env.daemon.start(env.http, fault=fault)
    await env.plugin_trusted()
    await env.port.client.prompt(s1, "hold a roundtable", message_id=new_message_id())
    await env.killed()
    await env.daemon.start(env.http)
    s2 = await env.child(s1)
    st = await env.finalized(s2)
    followup = (await env.llm.wait_for_requests(2, 60, session=s1))[1]
    await env.daemon.terminate()

    assert env.turns(since) == DEBATE_TURNS
    (returned,) = tool_results(followup)
    assert SUMMARY in returned and s2 in returned, returned
    (part,) = await env.tool_parts(s1, call_id)
    status, text, metadata = part
    assert status == "completed" and text == returned
    assert metadata.get("roundtabled", {}).get("kind") == "result", metadata
    state = await env.state(s2)
    assert state.delivery.delivered_via == "tool"
    assert await env.fallbacks(state) == (0, 0)  # no fallback message besides
    assert st["phase"] == "done" and st["result"]["status"]["endReason"] == "completed"
    assert st["result"]["status"]["roundsCompleted"] == ROUNDS
    assert resumed_notes(st), st["result"]["status"]["notes"]
    info = await env.port.client.get_session(s2)
    assert info.title is not None and info.title.endswith("CONCLUDED")


@pytest.mark.parametrize(
    "fault",
    [
        "observer-prompted:1",  # the observer's turn runs
        "final-persisted:1",  # the end is written; nothing delivered
        "delivered:1",  # the fallback message is in S1; the daemon has not recorded it
        "title-set:1",  # S2's title is concluded; the end of phase 4 not yet written
    ],
)
async def test_a_kill_when_nobody_waits_posts_the_result_into_s1_once(
    env: V2Faults, fault: str
) -> None:
    """A roundtable started through the control API with a parent session and no tool call:
    the daemon is killed at ``fault`` and restarted; S1 gets one fallback message, parked in its
    inbox, which S1's model reads once, before the person's next prompt."""
    s1 = await env.s1()
    since = len(env.llm.requests)
    env.script_debate()
    await env.daemon.start(env.http, fault=fault)
    await env.plugin_trusted()
    status, made = await env.call(
        "POST",
        "/v1/roundtables",
        {
            "agents": list(SEATS),
            "rounds": ROUNDS,
            "prompt": "Ship the payments change behind a flag?",
            "parentSessionID": s1,
        },
    )
    assert status == 200, made
    s2 = made["sessionID"]
    await env.killed()
    await env.daemon.start(env.http)
    st = await env.finalized(s2)
    await env.daemon.terminate()

    assert env.turns(since) == DEBATE_TURNS
    state = await env.state(s2)
    assert state.delivery.delivered_via == "no-reply"
    assert await env.fallbacks(state) == (1, 0)  # parked in S1's inbox, once
    assert resumed_notes(st), st["result"]["status"]["notes"]

    # The person's next prompt delivers it: S1's model reads the result once, before it.
    env.llm.script(Text(text="noted"), session=s1)
    await env.port.client.prompt(s1, "what came of it?", message_id=new_message_id())
    (seen,) = await env.llm.wait_for_requests(1, 60, session=s1)
    users = said_by_user(seen)
    assert sum(SUMMARY in u for u in users) == 1, users
    assert users[-1] == "what came of it?"
    async with asyncio.timeout(30):
        while True:  # delivered into S1's history, once, and out of its inbox
            if await env.fallbacks(state) == (0, 1):
                break
            await asyncio.sleep(0.1)


async def test_a_person_s_note_during_a_seat_s_turn_is_answered_without_a_second_turn(
    env: V2Faults,
) -> None:
    """A person posts a note into S2 while pm's round-1 turn runs (2.x steers it into that
    execution and answers it there): the note gets its reply in S2, pm's turn is recorded once
    with its own answer (not the note's reply), the turn order is unchanged, the note and its
    reply are in the history as the person's and an interjection, and dev sees the note."""
    s1 = await env.s1()
    since = len(env.llm.requests)
    pms = len(env.llm.requests_for(agent="pm"))
    note = "NOTE FROM A PERSON: remember the audit window in March."
    answer = "REPLY TO THE NOTE: the audit window is noted."
    env.llm.script(Text(text=reply("pm", 0), first_byte_delay=2.0), agent="pm")
    env.llm.script(Text(text=answer), agent="pm")  # the note is answered as pm, the session's agent
    env.llm.script(Text(text=reply("pm", 1)), agent="pm")
    for rnd in range(ROUNDS):
        env.llm.script(Text(text=reply("dev", rnd)), agent="dev")
    env.llm.script(Text(text=SUMMARY), agent=OBSERVER_AGENT)
    await env.daemon.start(env.http)
    status, made = await env.call(
        "POST",
        "/v1/roundtables",
        {
            "agents": list(SEATS),
            "rounds": ROUNDS,
            "prompt": "Ship the payments change behind a flag?",
            "parentSessionID": s1,
        },
    )
    assert status == 200, made
    s2 = made["sessionID"]
    await env.llm.wait_for_requests(pms + 1, 30, agent="pm")  # pm's turn reached the model
    await env.port.client.prompt(s2, note, message_id=new_message_id())
    st = await env.finalized(s2)
    await env.daemon.terminate()

    requests = [r for r in env.llm.requests[since:] if r.agent in (*SEATS, OBSERVER_AGENT)]
    lasts = [said_by_user(r)[-1] for r in requests]
    to_note = [r for r, last in zip(requests, lasts, strict=True) if last == note]
    assert len(to_note) == 1 and to_note[0].agent == "pm"  # the note got one reply
    turns = [r.agent for r, last in zip(requests, lasts, strict=True) if last != note]
    assert turns == DEBATE_TURNS  # no seat turn twice, the order unchanged
    dev_first = next(r for r in requests if r.agent == "dev")
    assert note in said_by_user(dev_first)  # a later seat sees the note

    state = await env.state(s2)
    kinds = [(e.kind, e.agent) for e in state.history]
    assert kinds == [
        ("turn", "pm"),
        ("user", "user"),
        ("interjection", "pm"),
        ("turn", "dev"),
        ("turn", "pm"),
        ("turn", "dev"),
        ("observer", OBSERVER_AGENT),
    ], kinds
    pm_first = state.history[0]
    assert pm_first.response.strip() == reply("pm", 0)  # its own answer, not the note's reply
    assert state.history[1].response == note
    assert state.history[2].response.strip() == answer
    contract = st["result"]
    assert contract["status"]["roundsCompleted"] == ROUNDS
    assert [s["answered"] for s in contract["status"]["seats"]] == [ROUNDS, ROUNDS]
    assert not resumed_notes(st)
    # S2 holds the note and the reply to it, in that order
    records = await env.port.client.all_messages(s2)
    texts = [getattr(r, "text", "") for r in records]
    at = texts.index(note)
    assert any(answer in t for t in texts[at + 1 :]), texts


async def test_a_tool_call_ended_while_the_daemon_is_down_leaves_the_result_to_the_fallback(
    env: V2Faults,
) -> None:
    """The daemon is killed mid-debate and S1 is interrupted before it is back (the tool call
    ends without the result, its cancel reaching nobody): the restarted daemon finishes the
    debate and, the tool part holding no result, puts it into S1 as the one fallback message."""
    s1 = await env.s1()
    call_id = "call_interrupted"
    since = len(env.llm.requests)
    env.script_debate(slow=("dev", 0))
    script_tool_call(env.llm, s1, call_id)
    await env.daemon.start(env.http, fault="prompted:2")
    await env.plugin_trusted()
    await env.port.client.prompt(s1, "hold a roundtable", message_id=new_message_id())
    await env.killed()
    assert await env.port.client.interrupt(s1)  # the tool call was still waiting
    async with asyncio.timeout(30):
        while True:  # the interrupt ends the tool part (the signal of the tool call's end)
            if [p[0] for p in await env.tool_parts(s1, call_id)] == ["error"]:
                break
            await asyncio.sleep(0.1)
    await env.daemon.start(env.http)
    s2 = await env.child(s1)
    st = await env.finalized(s2)
    await env.daemon.terminate()

    assert env.turns(since) == DEBATE_TURNS
    assert st["result"]["status"]["endReason"] == "completed"
    state = await env.state(s2)
    assert state.delivery.delivered_via == "no-reply"
    assert await env.fallbacks(state) == (1, 0)
    assert [p[0] for p in await env.tool_parts(s1, call_id)] == ["error"]


@pytest.mark.parametrize(
    "fault",
    [
        "intent-persisted:1",  # inside the start: turn 1's state is written, its prompt not sent
        "prompted:1",  # inside the start: turn 1's prompt is accepted, the start not answered
    ],
)
async def test_a_kill_inside_the_start_leaves_the_result_to_the_fallback_once(
    env: V2Faults, fault: str
) -> None:
    """The daemon dies inside the tool call's start request: the tool answers with an error at
    once (no roundtable id to wait for), the restarted daemon runs the roundtable all the same,
    each turn once, and the result reaches S1 as the one fallback message."""
    s1 = await env.s1()
    call_id = "call_start_" + fault.replace(":", "_").replace("-", "_")
    since = len(env.llm.requests)
    env.script_debate()
    script_tool_call(env.llm, s1, call_id)
    await env.daemon.start(env.http, fault=fault)
    await env.plugin_trusted()
    await env.port.client.prompt(s1, "hold a roundtable", message_id=new_message_id())
    await env.killed()
    followup = (await env.llm.wait_for_requests(2, 60, session=s1))[1]
    (answered,) = tool_results(followup)
    assert answered.startswith("Error:"), answered
    await env.daemon.start(env.http)
    s2 = await env.child(s1)
    st = await env.finalized(s2)
    await env.daemon.terminate()

    assert env.turns(since) == DEBATE_TURNS
    assert st["result"]["status"]["endReason"] == "completed"
    state = await env.state(s2)
    assert state.delivery.delivered_via == "no-reply"
    assert await env.fallbacks(state) == (1, 0)
    assert resumed_notes(st), st["result"]["status"]["notes"]
