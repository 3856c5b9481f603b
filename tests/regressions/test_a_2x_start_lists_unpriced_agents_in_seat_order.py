"""A 2.x start lists the agents without a price in seat order, as 1.x does.

Reported: on OpenCode 2.x (which lists no model price), ``{"agents": ["pm", "dev"], "observer":
"rv", "prompt": "Q?", "parentSessionID": S1}`` recorded ``unpriced`` as ``["dev", "pm", "rv"]``
(sorted), and with ``"budget": {"usd": 1.0}`` the refusal named ``dev`` before ``pm``; the 1.x
start lists them in seat order, then the observer's agent (``launch.unpriced_agents``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from roundtabled.core.validation import RoundtableRequest, parse_request
from roundtabled.errors import ValidationFailed
from roundtabled.service import plan
from tests.regressions.v2_start import V2Start, v2_start

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120), pytest.mark.e2e]


@pytest_asyncio.fixture
async def env(tmp_path: Path) -> AsyncIterator[V2Start]:
    async with v2_start(tmp_path) as started:
        yield started


async def test_a_2x_start_lists_unpriced_agents_in_seat_order(env: V2Start) -> None:
    body = {"agents": ["pm", "dev"], "observer": "rv", "prompt": "Q?"}
    state = await env.runner.start(parse_request({**body, "parentSessionID": await env.parent()}))
    assert state.unpriced == ["pm", "dev", "rv"]
    budget = parse_request({**body, "budget": {"usd": 1.0}, "parentSessionID": await env.parent()})

    async def dry_run(req: RoundtableRequest) -> object:
        return await plan.dry_run_v2(env.runner, req)

    models = state.models
    for attempt in (env.runner.start, dry_run):  # the start and its dry run
        with pytest.raises(ValidationFailed) as caught:
            await attempt(budget)
        assert caught.value.field == "budget.usd"
        assert str(caught.value).startswith(
            f"Error: budget.usd (--budget-usd): the price of pm ({models['pm'].label()}), "
            f"dev ({models['dev'].label()}), rv ({models['rv'].label()}) is unknown"
        ), str(caught.value)
