"""On OpenCode 2.x a daemon killed mid-debate and restarted finished the roundtable, but its
result did not say that it had been resumed: 2.x shows no toast (1.x's "Roundtable resumed after
a restart"), so nothing told the caller. Now the result's notes say it, and where
(``resumed after a restart of roundtabled at round 1, dev's turn …``). Replayed: ``kill -9`` while
dev's round-1 turn runs (the signal: its request reached the scripted model)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from roundtabled.core.state import RESUMED_NOTE
from tests.e2e.v2_kill_harness import ROUNDS, SEATS, V2Faults, v2_faults

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[V2Faults]:
    async for e in v2_faults(tmp_path_factory.mktemp("v2resumed")):
        yield e


async def test_a_resumed_roundtable_says_so_in_its_result(env: V2Faults) -> None:
    s1 = await env.s1()
    devs = len(env.llm.requests_for(agent="dev"))
    env.script_debate(slow=("dev", 0))
    await env.daemon.start(env.http)
    status, made = await env.call(
        "POST",
        "/v1/roundtables",
        {"agents": list(SEATS), "rounds": ROUNDS, "prompt": "Flag?", "parentSessionID": s1},
    )
    assert status == 200, made
    s2 = made["sessionID"]
    await env.llm.wait_for_requests(devs + 1, 30, agent="dev")
    env.daemon.proc.kill()
    await env.daemon.proc.wait()
    await env.daemon.start(env.http)
    st = await env.finalized(s2)
    await env.daemon.terminate()
    notes = st["result"]["status"]["notes"]
    resumed = [n for n in notes if n.startswith(RESUMED_NOTE)]
    assert resumed == [f"{RESUMED_NOTE} at round 1, dev's turn (no turn was sent twice)"], notes
    assert st["result"]["status"]["degraded"] is False  # no turn was lost
