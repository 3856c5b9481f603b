"""On OpenCode 2.x a restarted daemon resumed no roundtable older than its directory's newest 200
sessions: ``V2Port.unfinished`` listed one page of ``GET /api/session?limit=200`` and looked for
state blocks there only. Found by figure 6 on 2.x (``python -m bench.run recovery --opencode
2``: 1,000 sessions, the 50 roundtables made first; 0 of 50 resumed). 1.x had the same fault
once (bench/README.md, "Findings").

Replayed with the shape that failed, smaller: one roundtable (a signed state block and an
active index in its metadata), then 200 plain sessions after it in the same directory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from roundtabled.core.server_records import SessionRef, SignedState
from roundtabled.core.state import Signer, encode_state
from roundtabled.opencode.port import V2Port
from tests.contract.v2_env import V2Env, start_v2_env, stop_v2_env
from tests.states import fresh

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def v2(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[V2Env]:
    env = await start_v2_env(tmp_path_factory.mktemp("v2old"))
    try:
        yield env
    finally:
        await stop_v2_env(env)


async def test_a_roundtable_behind_200_newer_sessions_is_found(v2: V2Env) -> None:
    port = V2Port(v2.client)
    made = await v2.client.create_session(directory=v2.directory, title="roundtable")
    s2 = SessionRef(made.id, v2.directory)
    text, meta = encode_state(fresh(s2.id, ["pm", "dev"], 2), Signer(b"k" * 32))
    await port.write_state(s2, SignedState(text, meta), hidden=[], phase="active")
    sem = asyncio.Semaphore(8)

    async def plain(i: int) -> None:
        async with sem:
            await v2.client.create_session(directory=v2.directory, title=f"plain {i}")

    await asyncio.gather(*(plain(i) for i in range(200)))
    assert made.id not in {s.id for s in await v2.client.sessions(v2.directory, limit=200)}
    assert [(s.id, b) for s, b in await port.unfinished(v2.directory)] == [
        (made.id, (SignedState(text, meta),))
    ]
