"""On OpenCode 2.x with a local model that reports usage per step, usage the server recorded was
thrown away and called "not reported": a seat's turn cut at the output limit had ``{"input":
3136, "output": 256}`` in the server's records, yet the result said ``unknown (the server
reported no usage)``; the observer, cut at the output limit on every try, read the same, and the
export said ``"observerTruncated": 0``. A turn's usage was kept only when the turn ended
answered. Now every ended turn keeps what the server recorded for its steps, and an observer
turn cut at the output limit is counted in ``observerTruncated``. Replayed on the real 2.1.2
server: each step ends with finish ``length`` and reports its usage."""

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
    async with v2_run(Path(tmp_path_factory.mktemp("v2usage"))) as e:
        yield e


def cut(text: str, prompt: int) -> Text:
    return Text(text=text, finish_reason="length", prompt_tokens=prompt, completion_tokens=256)


async def test_usage_of_turns_cut_at_the_output_limit_is_what_the_server_recorded(
    env: V2Run,
) -> None:
    # 2.x continues a step cut at the output limit (twice at most, then fails the execution)
    env.llm.script(
        cut("Ship it behind a flag, because", 3136),
        Text(text="it rolls back.\nPosition: flag", prompt_tokens=64, completion_tokens=30),
        agent="pm",
    )
    env.llm.script(Text(text="Agreed.\nPosition: flag", prompt_tokens=500), agent="dev")
    # the observer is cut at the output limit at every step: the server fails its turn
    for prompt in (1344, 43, 43):
        env.llm.script(cut("SUMMARY: the seats", prompt), agent=OBSERVER)
    state = await env.start(agents=["pm", "dev"], rounds=1, prompt="Flag?", observer=OBSERVER)
    result = await env.runner.wait_result(state.session_id, 120)
    assert result is not None, "no result within 120 s"
    contract = result["result"]
    assert contract["status"]["observer"] == "failed", contract["status"]
    per_agent = contract["usage"]["perAgent"]
    # every step's usage as the server recorded it, never "not reported"
    assert per_agent["pm"] == {"input": 3200, "output": 286, "cost": None, "unreportedTurns": 0}
    assert per_agent[OBSERVER] == {
        "input": 1344 + 43 + 43,
        "output": 3 * 256,
        "cost": None,
        "unreportedTurns": 0,
    }
    assert contract["usage"]["input"] == 3200 + 500 + 1430, contract["usage"]
    # the observer's turn was cut at the output limit, though the server then failed it
    assert contract["status"]["observerTruncated"] == 1, contract["status"]
    assert (
        "the observer's reply was cut at the output limit (truncated)"
        in (contract["status"]["notes"])
    )
