"""A 2.x start refuses a ``directory`` that does not exist, naming it, as 1.x does.

Reported: on OpenCode 2.x, ``{"agents": ["pm", "dev"], "observer": "rv", "prompt": "Q?",
"parentSessionID": S1, "directory": "<tmp>/no-such-project"}`` was not refused with the 1.x
start's line (``launch.check_directory_exists``): the 2.x shell read the agents of a directory
that does not exist, so the caller was told about an agent it lacks, not the typo.
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


async def test_a_2x_start_refuses_a_directory_that_does_not_exist(
    env: V2Start, tmp_path: Path
) -> None:
    s1 = await env.parent()
    missing = str(tmp_path / "no-such-project")
    req = parse_request(
        {
            "agents": ["pm", "dev"],
            "observer": "rv",
            "prompt": "Q?",
            "parentSessionID": s1,
            "directory": missing,
        }
    )
    for attempt in (env.runner.start, env.runner.plan_reads):  # the start and its dry run
        with pytest.raises(ValidationFailed) as caught:
            await attempt(req)
        assert caught.value.field == "directory"
        assert str(caught.value) == (
            f"Error: directory {missing!r} does not exist (give the project directory OpenCode "
            "serves, or omit it for the server's own)"
        )
    assert env.runner.tables == {}
    assert await env.children(s1) == []
