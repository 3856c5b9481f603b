"""``roundtabled status`` on a running 2.x roundtable (the independent opening) printed ``turns:
0`` and ``usage total 0 in 0 out $0.0000`` 3 s in (a model with no price: its cost is unknown),
and ``turns: 0`` while the seats had answered: a usage total of no turn read as a measured 0, and
the opening round's settled turns were not counted until the whole round was recorded. Now a
total with nothing recorded is unknown (``null``, "unknown"), and the status counts and totals
the opening's settled turns. Replayed on the real 2.1.2 server: pm's opening answers after a
second, dev's much later."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from roundtabled.cli.show import status_lines
from roundtabled.offline.scripted_actions import Text
from tests.regressions.v2_run import V2Run, v2_run

OBSERVER = "rv"
"""The observer (the built-in one is not installed here)."""

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[V2Run]:
    async with v2_run(Path(tmp_path_factory.mktemp("v2status"))) as e:
        yield e


def total_row(st: dict[str, object]) -> str:
    (row,) = [r for r in status_lines(st, tty=False) if r.startswith("  usage     total")]
    return row


async def test_the_status_of_a_running_opening_round(env: V2Run) -> None:
    pms = len(env.llm.requests_for(agent="pm"))
    env.llm.script(Text(text="Flag.\nPosition: flag", first_byte_delay=5.0), agent="pm")
    env.llm.script(Text(text="Flag.\nPosition: flag", first_byte_delay=60.0), agent="dev")
    state = await env.start(
        agents=["pm", "dev"], rounds=2, prompt="Flag?", observer=OBSERVER, opening="independent"
    )
    s2 = state.session_id
    await env.llm.wait_for_requests(pms + 1, 30, agent="pm")
    st = env.runner.status(s2)
    assert st is not None
    total = st["usage"]["total"]  # type: ignore[index]
    assert total["input"] is None and total["cost"] is None, total
    assert "$0" not in total_row(st) and " 0 in" not in total_row(st), total_row(st)
    assert "unknown" in total_row(st)

    async def pm_settled() -> None:
        while True:
            now = env.runner.state_of(s2)
            assert now is not None and now.openings is not None
            if now.openings.seats[0].entry is not None:
                return
            await asyncio.sleep(0.1)

    await asyncio.wait_for(pm_settled(), 60)
    st = env.runner.status(s2)
    assert st is not None
    assert st["turns"] == 1, st
    total = st["usage"]["total"]  # type: ignore[index]
    assert total["input"] == 100 and total["cost"] is None, total
    assert "$0" not in total_row(st), total_row(st)
    await env.runner.cancel(s2, summarize=False, reason="cancelled by the test")
    assert await env.runner.wait_result(s2, 60) is not None
