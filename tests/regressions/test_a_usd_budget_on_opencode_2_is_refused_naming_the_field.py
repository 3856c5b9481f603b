"""A USD budget on OpenCode 2.x is refused in one line naming the field, as on 1.x for a model
without a price.

Reported: ``{"agents": ["pm", "dev"], "observer": "rv", "prompt": "Q?", "budget": {"usd": 1.0},
"parentSessionID": S1}`` started a roundtable on 2.x although 2.x lists no model price: every
seat's cost is unknown, so the budget could never stop the debate (the 1.x start refuses a USD
budget for an unpriced model, `launch.check_usd_budget`; the 2.x shell never called it).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from roundtabled.core.state import Signer
from roundtabled.core.validation import parse_request
from roundtabled.engine.settings import Settings
from roundtabled.engine.v2run import V2Runner
from roundtabled.errors import ValidationFailed
from roundtabled.offline.opencode_server import OpenCodeServer, offline_config
from roundtabled.opencode.port import V2Port, port_for

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]


@pytest_asyncio.fixture
async def port(tmp_path: Path) -> AsyncIterator[V2Port]:
    server = OpenCodeServer(tmp_path / "v2", offline_config("http://127.0.0.1:9/v1"), major=2)
    await server.start()
    try:
        found = await port_for(server.url, password=server.password)
        assert isinstance(found, V2Port)
        try:
            yield found
        finally:
            await found.close()
    finally:
        await server.stop()


async def test_a_usd_budget_on_opencode_2_is_refused_naming_the_field(port: V2Port) -> None:
    runner = V2Runner(port, Signer(secrets.token_bytes(32)), Settings())
    s1 = await port.client.create_session(title="S1")
    req = parse_request(
        {
            "agents": ["pm", "dev"],
            "observer": "rv",
            "prompt": "Q?",
            "budget": {"usd": 1.0},
            "parentSessionID": s1.id,
        }
    )
    with pytest.raises(ValidationFailed) as caught:
        await runner.start(req)
    assert caught.value.field == "budget.usd"
    (line,) = str(caught.value).splitlines()
    assert "budget.usd (--budget-usd)" in line and "pm (" in line and "dev (" in line
    assert runner.tables == {}  # nothing started
    assert await port.client.children(s1.id) == []
