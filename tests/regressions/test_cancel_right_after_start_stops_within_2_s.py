"""Regression: a cancel right after the start took 5 s and called the turn timed out.

Field failure (a fresh engineer's attempt to break commit 92fd674): once the start prompted turn
1 without reading S2, a cancel sent as soon as the start returned reached the server before it
had created pm's reply. The abort left S2 idle with no reply at all, and the machine waited the
whole 5 s abort grace (``ABORT_GRACE_MS``) for a reply that could not come; the turn was then
recorded "CUT OFF at the time limit … timed out after 300 s", although the user had cancelled it
a moment after the start (4 runs of 4).

Proves, on the real ``opencode serve``: the result of that cancel is there within 2 s (stop must
stop), pm's turn says it was cut off by the cancel and never mentions a time
limit, and no further model request is made.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from roundtabled.offline.scripted_actions import Hang
from tests.e2e.conftest import RT


@pytest.mark.timing
async def test_cancel_as_soon_as_the_start_returns(rt_factory: Any) -> None:
    """Exact failing input: pm scripted ``Hang(max_seconds=60)``; start agents pm, dev (default
    turn timeout 300 s); ``POST …/cancel {"summarize": false}`` as soon as the start returns."""
    rt: RT = await rt_factory()
    s1 = await rt.new_parent()
    rt.llm.script(Hang(max_seconds=60), agent="pm")
    s2 = await rt.start(agents=["pm", "dev"], prompt="Cancel?", parentSessionID=s1)
    t0 = time.monotonic()
    status, data = await rt.api("POST", f"/v1/roundtables/{s2}/cancel", {"summarize": False})
    assert status == 200, data
    result = await rt.result(s2, timeout=20)
    took = time.monotonic() - t0
    assert result["endReason"] == "cancelled", result
    assert took < 2.0, f"stop must stop: the result of the cancel came after {took:.2f} s"
    text = str(result["text"])
    assert "time limit" not in text and "timed out" not in text, text
    assert "cancel" in text.lower(), text
    # Drained, not a quiet window: once S2 is idle on the server nothing more can be asked of
    # the model in it.
    await rt.wait_idle(s2)
    agents = [r.agent for r in rt.llm.requests if r.session_id == s2 and r.kind == "turn"]
    assert agents in ([], ["pm"]), agents
