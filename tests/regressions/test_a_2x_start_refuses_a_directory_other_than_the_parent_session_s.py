"""A 2.x start refuses a ``directory`` other than its parent session's, as 1.x does.

Reported: on OpenCode 2.x, ``{"agents": ["pm", "dev"], "observer": "rv", "prompt": "Q?",
"parentSessionID": S1, "directory": OTHER}`` with OTHER an existing directory that is not S1's
started a roundtable: S2 was created in S1's directory while its seats were checked against
OTHER's agents. The 1.x start refuses it naming both directories (``launch``'s
``check_parent_directory``); the 2.x shell took the call's directory as given.
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


async def test_a_2x_start_refuses_a_directory_other_than_the_parent_session_s(
    env: V2Start, tmp_path: Path
) -> None:
    s1 = await env.parent()
    other = tmp_path / "other-project"
    other.mkdir()
    req = parse_request(
        {
            "agents": ["pm", "dev"],
            "observer": "rv",
            "prompt": "Q?",
            "parentSessionID": s1,
            "directory": str(other),
        }
    )
    for attempt in (env.runner.start, env.runner.plan_reads):  # the start and its dry run
        with pytest.raises(ValidationFailed) as caught:
            await attempt(req)
        assert caught.value.field == "directory"
        assert str(caught.value) == (
            f"Error: directory {str(other)!r} is not the directory of the parent session "
            f"{s1!r} ({env.directory!r}); omit directory (S1's is used) or give "
            f"{env.directory!r}"
        )
    assert env.runner.tables == {}
    assert await env.children(s1) == []
