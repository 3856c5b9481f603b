"""A 2.x start refuses a roundtable's own session (S2) as its parent session, as 1.x does.

Reported: on OpenCode 2.x, ``{"agents": ["pm", "dev"], "observer": "rv", "prompt": "Q?",
"parentSessionID": S2}`` with S2 a running roundtable's own session started a second roundtable
inside the first: its result would be delivered into S2 and become part of that debate, fed to
its seats on a later extend. The 1.x start refuses it
(``core.validation.check_parent_session``); the 2.x shell read S1 without looking at what it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from roundtabled.core.validation import parse_request
from roundtabled.errors import ValidationFailed
from tests.regressions.v2_start import V2Start, v2_start

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120), pytest.mark.e2e]


@pytest_asyncio.fixture
async def env(tmp_path: Path) -> AsyncIterator[V2Start]:
    async with v2_start(tmp_path) as started:
        yield started


async def test_a_2x_start_refuses_a_roundtable_s_own_session_as_parent(env: V2Start) -> None:
    s1 = await env.parent()
    first = await env.runner.start(
        parse_request(
            {"agents": ["pm", "dev"], "observer": "rv", "prompt": "Q?", "parentSessionID": s1}
        )
    )
    s2 = first.session_id
    req = parse_request(
        {"agents": ["pm", "dev"], "observer": "rv", "prompt": "Q?", "parentSessionID": s2}
    )
    for attempt in (env.runner.start, env.runner.plan_reads):  # the start and its dry run
        with pytest.raises(ValidationFailed) as caught:
            await attempt(req)
        assert caught.value.field == "parentSessionID"
        assert str(caught.value) == (
            f"Error: parent session {s2!r} is a roundtable's own session; name the session "
            "that convenes the roundtable (or none)"
        )
    assert list(env.runner.tables) == [s2]  # nothing else started
    assert await env.children(s2) == []
