"""``roundtabled.opencode.port.together``: the calls a 2.x turn sends at once (the state write
beside the agent and model switches, docs/design.md "The 2.x shell") fail as one call would."""

from __future__ import annotations

import asyncio

import pytest

from roundtabled.errors import NotFound
from roundtabled.opencode.port import together


async def test_both_calls_run_at_once() -> None:
    started: list[str] = []
    both = asyncio.Event()

    async def call(name: str) -> None:
        started.append(name)
        if len(started) == 2:
            both.set()
        await both.wait()  # returns only when the other one runs too

    async with asyncio.timeout(5):
        await together(call("write"), call("switch"))
    assert sorted(started) == ["switch", "write"]


async def test_a_failure_is_raised_as_it_is_and_the_other_call_is_cancelled() -> None:
    cancelled = asyncio.Event()
    entered = asyncio.Event()

    async def slow() -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def gone() -> None:
        await entered.wait()
        raise NotFound("session ses_x is gone")

    # the failure policy classifies by type: never an ExceptionGroup
    with pytest.raises(NotFound, match="ses_x"):
        await together(slow(), gone())
    assert cancelled.is_set()
