"""On OpenCode 2.x a person's note posted into S2 between two turns (after one seat's turn
ended, before the next seat's prompt; here while the daemon was down after pm's turn) runs an
execution of its own. The 2.x shell read only what the turn's own execution delivered: it never
recorded the note or the reply to it, and it prompted the next seat while the note's execution
ran (2.x steers that prompt into it). Now the port reads every prompt nobody of ours sent up to
our next turn (``v2.later_prompts``), the machine waits while such a prompt's execution runs,
then records the note and its reply once, after pm's turn, and prompts dev."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import content_text
from tests.e2e.v2_kill_harness import (
    ROUNDS,
    SEATS,
    SUMMARY,
    V2Faults,
    new_message_id,
    reply,
    said_by_user,
    v2_faults,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]

DEBATE_TURNS = [*SEATS * ROUNDS, OBSERVER_AGENT]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[V2Faults]:
    async for e in v2_faults(tmp_path_factory.mktemp("v2between")):
        yield e


async def test_a_note_posted_while_the_daemon_is_down_between_turns_is_recorded_once(
    env: V2Faults,
) -> None:
    """The daemon dies once pm's turn is over and before dev's is written; a person posts a note
    into the idle S2 (2.x answers it in an execution of its own, as pm, the session's agent).
    The restarted daemon prompts dev only once that execution has ended, and records the note
    and its reply once, after pm's turn."""
    s1 = await env.s1()
    since = len(env.llm.requests)
    note = "NOTE WHILE DOWN: check the rollback drill first."
    answer = "ROLLBACK DRILL: noted, it is scheduled."
    env.llm.script(Text(text=reply("pm", 0)), agent="pm")
    env.llm.script(Text(text=answer, first_byte_delay=2.0), agent="pm")
    env.llm.script(Text(text=reply("pm", 1)), agent="pm")
    for rnd in range(ROUNDS):
        env.llm.script(Text(text=reply("dev", rnd)), agent="dev")
    env.llm.script(Text(text=SUMMARY), agent=OBSERVER_AGENT)
    await env.daemon.start(env.http, fault="turn-recorded:1")
    status, made = await env.call(
        "POST",
        "/v1/roundtables",
        {"agents": list(SEATS), "rounds": ROUNDS, "prompt": "Flag?", "parentSessionID": s1},
    )
    assert status == 200, made
    s2 = made["sessionID"]
    await env.killed()
    await env.port.client.prompt(s2, note, message_id=new_message_id())
    await env.daemon.start(env.http)
    st = await env.finalized(s2)
    await env.daemon.terminate()

    requests = [r for r in env.llm.requests[since:] if r.agent in (*SEATS, OBSERVER_AGENT)]
    lasts = [said_by_user(r)[-1] for r in requests]
    assert [r.agent for r, last in zip(requests, lasts, strict=True) if last != note] == (
        DEBATE_TURNS
    )
    assert [r.agent for r, last in zip(requests, lasts, strict=True) if last == note] == ["pm"]
    dev_first = next(r for r in requests if r.agent == "dev")
    assert (
        dev_first.t_mono
        > next(r for r, last in zip(requests, lasts, strict=True) if last == note).t_mono
    )
    assistant = [
        content_text(m.get("content")) for m in dev_first.messages if m.get("role") == "assistant"
    ]
    assert any(answer in a for a in assistant), assistant  # dev came after the note's reply
    state = await env.state(s2)
    assert [(e.kind, e.agent) for e in state.history[:4]] == [
        ("turn", "pm"),
        ("user", "user"),
        ("interjection", "pm"),
        ("turn", "dev"),
    ]
    assert state.history[2].response.strip() == answer
    assert st["result"]["status"]["roundsCompleted"] == ROUNDS
