"""Regression: a "cancelled" result handed to a poller before the cancel was written to S2.

Field failure (a fresh engineer's attempt to break commit 92fd674): to save a round trip the
result of a finished debate was released before its ``done`` state was written. For a cancel
that state is the only record of the decision, so a crash in that window left the poller (or
the tool) holding "cancelled" while the restarted daemon resumed the debate: new requests for
dev and the observer, S2 concluded ``completed``, and a second, different result in S1.

Proves, on the real ``opencode serve``: while the write of the final state of a cancelled
debate is held in flight, no poller gets a result; after a crash in that window and a restart
the debate ends ``cancelled`` without another model request, and S1 gets exactly one result.
"""

from __future__ import annotations

import asyncio
from typing import Any

from roundtabled.offline.scripted_actions import Text
from tests.e2e.conftest import RT


def hold_final_writes(rt: RT) -> list[Any]:
    """Every write of a state that is no longer active never completes (in flight at the crash)."""
    engine = rt.daemon.engine
    real = engine.store.persist
    held: list[Any] = []

    async def persist(state: Any, **kw: Any) -> None:
        if not state.active:
            held.append(state)
            await asyncio.Event().wait()
        await real(state, **kw)

    engine.store.persist = persist  # type: ignore[method-assign]
    return held


def requests_of(rt: RT, s2: str) -> list[str]:
    return [r.agent or "" for r in rt.llm.requests if r.session_id == s2 and r.kind == "turn"]


async def test_cancel_is_released_only_once_written_and_survives_a_crash(rt_factory: Any) -> None:
    """Exact failing input: agents pm, dev × 1 round, pm streaming ``"PM slow words " * 60`` in
    4-character chunks every 0.1 s; 0.5 s into pm's reply ``POST …/cancel {"summarize": false}``;
    the final state write held; kill; restart."""
    rt: RT = await rt_factory()
    s1 = await rt.new_parent()
    rt.llm.script(Text(text="PM slow words " * 60, chunk_size=4, chunk_delay=0.1), agent="pm")
    s2 = await rt.start(agents=["pm", "dev"], prompt="Cancel then crash?", parentSessionID=s1)
    await rt.llm.wait_for_requests(1, within=10, session=s2, agent="pm")
    await asyncio.sleep(0.5)  # pm is streaming
    held = hold_final_writes(rt)
    status, data = await rt.api("POST", f"/v1/roundtables/{s2}/cancel", {"summarize": False})
    assert status == 200, data
    for _ in range(40):
        if held:
            break
        await asyncio.sleep(0.1)
    assert held, "the final state write never started"
    status, data = await rt.api("GET", f"/v1/roundtables/{s2}/result", params={"wait": "2"})
    assert status == 200 and not data.get("done"), f"released before it was written: {data}"

    await rt.kill_daemon()  # the final state write is still in flight
    await rt._launch()
    result = await rt.result(s2, timeout=30)
    assert result["endReason"] == "cancelled", result
    await rt.finalized(s2)
    # Anything resumed would have a worker: checked once the daemon holds none for S2.
    await rt.drained_after(s2, lambda: rt.oc("POST", f"/session/{s2}/abort"))
    assert requests_of(rt, s2) == ["pm"], requests_of(rt, s2)
    s1_texts = [
        p.get("text", "")
        for m in await rt.messages(s1)
        for p in m["parts"]
        if p.get("type") == "text" and not p.get("ignored")
    ]
    assert len(s1_texts) == 1 and "cancel" in s1_texts[0].lower(), s1_texts
