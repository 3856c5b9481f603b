"""The worker's failure policy over the fake server (roundtabled.core.failures): a refusal that no
retry cures and a bug that repeats end the roundtable as failed, delivered to S1 once; transient
failures are waited out; an error that names no session is logged and is nobody's turn."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest

from roundtabled.errors import TransportError
from roundtabled.offline.scripted_actions import Text

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]

REFUSED = TransportError(
    'PATCH /session/x/message/y/part/z: HTTP 400: {"name":"BadRequest"}',
    status=400,
    retryable=False,
)


async def test_a_refused_state_write_ends_the_roundtable_failed_and_tells_s1_once(
    harness: H,
) -> None:
    h = await harness()
    s1 = await h.parent()
    h.fake.script(Text(text="PM: a view."), agent="pm")
    s2 = await h.start(parentSessionID=s1, rounds=2)
    h.fake.fail_next("update_part", REFUSED, times=1000)
    result = await h.result(s2)
    assert result["endReason"] == "failed", result
    errors = h.errors(s2)
    assert "HTTP 400" in errors[-1] and "start a new roundtable" in errors[-1], errors
    await h.finalized(s2)
    delivered = [t for t in await h.no_reply_texts(s1) if "HTTP 400" in t]
    assert len(delivered) == 1, await h.no_reply_texts(s1)


async def test_six_unexpected_exceptions_in_a_row_end_the_roundtable_failed(harness: H) -> None:
    h = await harness()
    s1 = await h.parent()
    s2 = await h.start(parentSessionID=s1)
    h.fake.fail_next("update_part", RuntimeError("a bug in a pass"), times=50)
    result = await h.result(s2)
    assert result["endReason"] == "failed", result
    assert "6 times in a row" in h.errors(s2)[-1] and "RuntimeError" in h.errors(s2)[-1]
    await h.finalized(s2)
    assert len([t for t in await h.no_reply_texts(s1) if "times in a row" in t]) == 1


async def test_transient_failures_are_waited_out_and_the_debate_completes(harness: H) -> None:
    h = await harness()
    s2 = await h.start()
    h.fake.fail_next("statuses", TransportError("connection refused", retryable=True), times=20)
    result = await h.result(s2)
    assert result["endReason"] == "completed", result
    assert h.prompted_agents(s2) == ["pm", "dev", "roundtable-observer"]


async def test_a_session_error_without_a_session_is_logged_and_nobody_s_turn(
    harness: H, caplog: pytest.LogCaptureFixture
) -> None:
    h = await harness()
    h.fake.script(Text(text="PM: slow but sure.", first_byte_delay=20), agent="pm")
    caplog.set_level(logging.WARNING, logger="roundtabled")
    s2 = await h.start(turnTimeout=300)
    await h.clock.advance(5)
    h.fake.emit("session.error", {"error": {"name": "MCPFailed", "data": {"message": "mcp x"}}})
    await h.result(s2)
    pm = h.entries(s2)[0]
    assert (pm.response, pm.has_error) == ("PM: slow but sure.", False)
    assert h.errors(s2) == []
    warned = [r.getMessage() for r in caplog.records if "outside any session" in r.getMessage()]
    assert warned == ["OpenCode reported an error outside any session: MCPFailed: mcp x"]


async def test_five_unexpected_exceptions_in_a_row_are_still_retried(harness: H) -> None:
    h = await harness()
    s2 = await h.start()
    h.fake.fail_next("update_part", RuntimeError("a bug in a pass"), times=5)
    result = await h.result(s2)
    assert result["endReason"] == "completed", result
