"""On OpenCode 2.x a roundtable started with a parent session and nobody waiting for its result
(``POST /v1/roundtables`` with ``parentSessionID``, no tool call) never put its result into S1:
the 2.x shell released it to pollers only. And a daemon killed once the debate was over found
nothing to resume: the index in S2's metadata already said ``done``, so a result not yet
delivered was lost for good.

Now the result goes into S1 once, as a ``synthetic`` record with ``resume: false`` (parked in
S1's inbox), only while S1 is idle; the index says ``finalizing`` until it is there, and a
restarted daemon takes phase 4 up. Replayed: S1 runs a turn of its own (its model hangs), the
debate ends, the daemon is killed while the result waits for S1, the daemon is restarted, S1's
turn is interrupted: S1 holds the result once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from roundtabled.offline.scripted_actions import Hang
from tests.e2e.v2_kill_harness import ROUNDS, SEATS, V2Faults, new_message_id, v2_faults

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[V2Faults]:
    async for e in v2_faults(tmp_path_factory.mktemp("v2busy")):
        yield e


async def test_the_result_waits_for_a_busy_s1_across_a_kill_and_lands_once(env: V2Faults) -> None:
    s1 = await env.s1()
    env.llm.script(Hang(max_seconds=120), session=s1)
    await env.port.client.prompt(s1, "think about something else", message_id=new_message_id())
    await env.llm.wait_for_requests(1, 30, session=s1)  # S1 is busy now
    env.script_debate()
    await env.daemon.start(env.http)
    status, made = await env.call(
        "POST",
        "/v1/roundtables",
        {"agents": list(SEATS), "rounds": ROUNDS, "prompt": "Flag?", "parentSessionID": s1},
    )
    assert status == 200, made
    s2 = made["sessionID"]
    async with asyncio.timeout(60):
        while True:  # the debate is over; its result waits for S1
            status, st = await env.call("GET", f"/v1/roundtables/{s2}")
            if st.get("phase") == "done":
                break
            await asyncio.sleep(0.1)
    assert not st["finalized"], st
    env.daemon.proc.kill()
    await env.daemon.proc.wait()
    assert await env.port.busy(s1)  # the kill came while the result waited for S1
    await env.daemon.start(env.http)
    await env.port.client.interrupt(s1)  # S1's own turn ends: now the result may go in
    st = await env.finalized(s2)
    await env.daemon.terminate()
    state = await env.state(s2)
    assert state.delivery.delivered_via == "no-reply"
    assert await env.fallbacks(state) == (1, 0)  # parked in S1's inbox, once
