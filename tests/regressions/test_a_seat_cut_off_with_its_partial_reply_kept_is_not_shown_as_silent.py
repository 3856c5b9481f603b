"""On OpenCode 2.x a seat cut off at the time limit whose partial text (with its ``Position:``
line) was kept was shown in the verdict table as ``(did not speak)``: a kept partial reply did
speak. Now the seat's entry of ``verdict.positions`` says how its last turn was cut off
(``cutOff: "timedOut"``) and the table says "cut off at the time limit, partial text kept"; a
seat cut off before it wrote anything still did not speak. Replayed on the real 2.1.2 server:
pm streams its reply (its ``Position:`` line first) slower than the time limit, dev's model
never answers in time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from roundtabled.cli.verdict import positions_table
from roundtabled.offline.scripted_actions import Text
from tests.regressions.v2_run import V2Run, v2_run

OBSERVER = "rv"
"""The observer (the built-in one is not installed here)."""

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[V2Run]:
    async with v2_run(Path(tmp_path_factory.mktemp("v2cutspoke"))) as e:
        yield e


async def test_a_seat_whose_cut_off_reply_was_kept_spoke(env: V2Run) -> None:
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
    seats = {p["agent"]: p for p in contract["verdict"]["positions"]}
    assert seats["pm"]["cutOff"] == "timedOut", seats["pm"]
    assert seats["dev"]["cutOff"] is None, seats["dev"]  # it kept nothing: it did not speak
    table = positions_table(contract["verdict"])
    (pm_row,) = [r for r in table if r.startswith("pm")]
    assert "cut off at the time limit, partial text kept" in pm_row, table
    assert "did not speak" not in pm_row, table
    (dev_row,) = [r for r in table if r.startswith("dev")]
    assert "(did not speak)" in dev_row, table
