"""On OpenCode 2.x with ``--turn-timeout 5``, two seat turns whose model requests were sent and
then aborted at the time limit (the server recorded no tokens) counted as a measured 0: the total
``3.3k in / 12 out`` was shown without "at least", and after a cancel a seat's row read ``0 in 0
out``. A turn counted as unreported usage only when it had written text. Now a turn cut off by
the time limit or a cancel is unreported usage even with no text, and a total with nothing
recorded is unknown (``null``). Replayed on the real 2.1.2 server: pm streams its reply slower
than the time limit, dev's model never answers in time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from roundtabled.offline.scripted_actions import Text
from tests.regressions.v2_run import V2Run, v2_run

OBSERVER = "rv"
"""The observer (the built-in one is not installed here)."""

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[V2Run]:
    async with v2_run(Path(tmp_path_factory.mktemp("v2cutusage"))) as e:
        yield e


async def test_turns_cut_off_at_the_time_limit_are_unreported_usage(env: V2Run) -> None:
    pms = len(env.llm.requests_for(agent="pm"))
    devs = len(env.llm.requests_for(agent="dev"))
    # pm's closing line streams first, then the rest far slower than the time limit
    env.llm.script(
        Text(text="Ship behind a flag.\nPosition: flag\n" + "more " * 400, chunk_delay=0.5),
        agent="pm",
    )
    env.llm.script(Text(text="Agreed.\nPosition: flag", first_byte_delay=60.0), agent="dev")
    env.llm.script(Text(text="SUMMARY: nobody finished."), agent=OBSERVER)
    state = await env.start(
        agents=["pm", "dev"], rounds=1, prompt="Flag?", observer=OBSERVER, turnTimeout=3
    )
    result = await env.runner.wait_result(state.session_id, 150)
    assert result is not None, "no result within 150 s"
    # both requests reached the model (and were aborted): the model worked
    assert len(env.llm.requests_for(agent="pm")) > pms
    assert len(env.llm.requests_for(agent="dev")) > devs
    contract = result["result"]
    per_agent = contract["usage"]["perAgent"]
    for seat in ("pm", "dev"):
        assert per_agent[seat] == {
            "input": None,
            "output": None,
            "cost": None,
            "unreportedTurns": 1,
        }, (seat, per_agent)
    assert contract["usage"]["unreportedTurns"] >= 2, contract["usage"]
