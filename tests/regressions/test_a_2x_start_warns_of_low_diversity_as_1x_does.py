"""A 2.x start warns that the panel is one voice several times, as 1.x does.

Reported: on OpenCode 2.x, ``{"agents": ["twin1", "twin2"], "observer": "rv", "prompt": "Tabs
or spaces?", "parentSessionID": S1}`` with both seats on ``scripted/debater-1`` and the same
prompt started without the low-diversity warning the 1.x start puts first in its notes
(docs/deliberation.md, "Diversity warning"); a panel of distinct seats gets none on either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from roundtabled.core.validation import parse_request
from tests.regressions.v2_start import V2Start, v2_start

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120), pytest.mark.e2e]

TWIN_PROMPT = "You are a careful analyst in a roundtable debate. Argue your case briefly."
TWINS = {
    name: {"mode": "subagent", "model": "scripted/debater-1", "prompt": TWIN_PROMPT}
    for name in ("twin1", "twin2")
}


@pytest_asyncio.fixture
async def env(tmp_path: Path) -> AsyncIterator[V2Start]:
    async with v2_start(tmp_path, extra_agents=TWINS) as started:
        yield started


async def test_a_2x_start_warns_of_low_diversity_as_1x_does(env: V2Start) -> None:
    body = {"observer": "rv", "prompt": "Tabs or spaces?"}
    twins = await env.runner.start(
        parse_request({**body, "agents": ["twin1", "twin2"], "parentSessionID": await env.parent()})
    )
    assert twins.notes[0].startswith(
        "low diversity: every seat (twin1, twin2) runs scripted/debater-1"
    ), twins.notes
    mixed = await env.runner.start(
        parse_request({**body, "agents": ["pm", "dev"], "parentSessionID": await env.parent()})
    )
    assert not any("low diversity" in n for n in mixed.notes), mixed.notes
