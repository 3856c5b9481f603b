"""On OpenCode 2.x a person's note posted into S2 while a seat's turn ran (2.x steers it into
that execution and answers it there, as the seat's agent) was read past: the seat's answer was
right (the reply stops at the next user record), but the note and the reply to it never joined
the roundtable's history, so the result, the export and the observer's view of the history did
not have them (1.x records them as the person's entry and an interjection). Now the port reads
them from the same execution (``TurnOutcome.interjections``) and the machine records them once,
after the seat's turn."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from tests.e2e.v2_kill_harness import SUMMARY, V2Faults, new_message_id, reply, v2_faults

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[V2Faults]:
    async for e in v2_faults(tmp_path_factory.mktemp("v2note")):
        yield e


async def test_the_note_and_its_reply_are_recorded_after_the_seat_s_turn(env: V2Faults) -> None:
    s1 = await env.s1()
    note = "NOTE: mind the audit window."
    answer = "NOTED: the audit window."
    env.llm.script(Text(text=reply("pm", 0), first_byte_delay=2.0), Text(text=answer), agent="pm")
    env.llm.script(Text(text=reply("dev", 0)), agent="dev")
    env.llm.script(Text(text=SUMMARY), agent=OBSERVER_AGENT)
    await env.daemon.start(env.http)
    status, made = await env.call(
        "POST",
        "/v1/roundtables",
        {"agents": ["pm", "dev"], "rounds": 1, "prompt": "Flag?", "parentSessionID": s1},
    )
    assert status == 200, made
    s2 = made["sessionID"]
    await env.llm.wait_for_requests(1, 30, agent="pm")
    await env.port.client.prompt(s2, note, message_id=new_message_id())
    await env.finalized(s2)
    await env.daemon.terminate()
    state = await env.state(s2)
    assert [(e.kind, e.agent, e.response.strip()) for e in state.history[:4]] == [
        ("turn", "pm", reply("pm", 0)),
        ("user", "user", note),
        ("interjection", "pm", answer),
        ("turn", "dev", reply("dev", 0)),
    ]
