"""Regression: ``cancel`` and ``cancel --summarize`` at once both said they worked, and the
summary was dropped ("the observer did not run").

Proves, on the real ``opencode serve`` with the scripted model: with pm's turn running, the
two requests (the bodies the CLI sends) sent at once: the plain one is granted; the summarize
one either gets its observer (its summary in the result) or a 400 ``Error:`` that says the
observer will not run (``summarize``) or that the roundtable is no longer active, and then no
observer runs.
"""

from __future__ import annotations

import asyncio

import pytest

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Hang, Text
from tests.e2e.conftest import RT
from tests.e2e.edge_helpers import wait_for


@pytest.mark.parametrize("summarize_first", [True, False])
async def test_cancel_and_cancel_summarize_at_once(rt: RT, summarize_first: bool) -> None:
    """Exact input: pm, dev × 2 rounds; pm's model hangs; cancel --summarize and cancel at
    once (each order; the summarize first lost its observer)."""
    rt.llm.script(Hang(max_seconds=120), agent="pm")
    rt.llm.script(Text(text="OBSERVER: the gist so far."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Ship it?", rounds=2)
    await wait_for(lambda: rt.llm.requests_for(session=s2, agent="pm"), 60, "pm's model call")
    path = f"/v1/roundtables/{s2}/cancel"
    plain = rt.api("POST", path, {})
    summary = rt.api("POST", path, {"summarize": True})
    if summarize_first:
        (ss, ds), (sp, dp) = await asyncio.gather(summary, plain)
    else:
        (sp, dp), (ss, ds) = await asyncio.gather(plain, summary)
    assert sp == 200, dp
    result = await rt.result(s2)
    assert result["endReason"] == "cancelled"
    observer = rt.llm.requests_for(session=s2, agent=OBSERVER_AGENT)
    if ss == 200:
        assert len(observer) == 1, "a granted summary whose observer never ran"
        assert "OBSERVER: the gist so far." in result["text"]
    else:
        # Refused: after the plain cancel was taken, or once it had ended the roundtable.
        assert ss == 400 and ds["field"] in ("summarize", "sessionID"), (ss, ds)
        assert "observer will not run" in ds["error"] or "no active" in ds["error"], ds
        assert observer == []
