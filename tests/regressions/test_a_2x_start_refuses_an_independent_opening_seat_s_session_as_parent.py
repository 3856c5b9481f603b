"""A 2.x start refuses a seat's session of an independent opening as its parent session, as 1.x
does.

Reported: on OpenCode 2.x, ``{"agents": ["pm", "dev"], "observer": "rv", "prompt": "Q?",
"parentSessionID": SEAT}`` with SEAT the session a seat answers round 1 of S2's independent
opening in (created with ``opening_metadata(S2, 0)``, as ``engine/v2_opening.py`` creates it)
started a roundtable there: its result would become part of that seat's opening. The 1.x start
refuses it (``core.validation.check_parent_session``); the 2.x shell did not look.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from roundtabled.core.validation import parse_request
from roundtabled.errors import ValidationFailed
from roundtabled.opencode.session_metadata import opening_metadata
from tests.regressions.v2_start import V2Start, v2_start

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120), pytest.mark.e2e]


@pytest_asyncio.fixture
async def env(tmp_path: Path) -> AsyncIterator[V2Start]:
    async with v2_start(tmp_path) as started:
        yield started


async def test_a_2x_start_refuses_an_independent_opening_seat_s_session_as_parent(
    env: V2Start,
) -> None:
    s1 = await env.parent()
    s2 = await env.port.create_child(
        await env.port.session(s1), "rt", None, {"roundtabled": {"phase": "active"}}
    )
    seat = await env.port.create_child(
        s2, "pm · round 1 (independent opening)", "pm", opening_metadata(s2.id, 0)
    )
    req = parse_request(
        {"agents": ["pm", "dev"], "observer": "rv", "prompt": "Q?", "parentSessionID": seat.id}
    )
    for attempt in (env.runner.start, env.runner.plan_reads):  # the start and its dry run
        with pytest.raises(ValidationFailed) as caught:
            await attempt(req)
        assert caught.value.field == "parentSessionID"
        assert str(caught.value) == (
            f"Error: parent session {seat.id!r} is a seat's session of roundtable {s2.id}'s "
            "independent opening; name the session that convenes the roundtable (or none)"
        )
    assert env.runner.tables == {}
    assert await env.children(seat.id) == []
