"""Regression "deletion mid-turn": a deleted S2 or S1 ends the roundtable once, quietly.

Field failures: S2 deleted while a seat streamed made the daemon loop on 404s (re-reading and
re-prompting a session that no longer exists) and, worse, a 404 during a resync was read as "no
pending work" and the debate was reported *completed*; S1 deleted while the tool waited left the
seat streaming in S2 and the daemon posted the result into nowhere.

Proves, on the real ``opencode serve`` with the scripted model (the daemon behind a proxy that logs
every request it makes):

- S2 deleted while dev streams → S1 gets exactly one interruption message carrying the partial
  history; after the deletion the daemon makes only a bounded handful of requests naming S2 (the
  404 that confirms it, the abort) and none once it has forgotten S2 (no 404 loop);
- S1 deleted while the tool waits → S2's turn is aborted first (the first request the daemon makes
  afterwards that changes anything), and nothing is posted anywhere (no prompt, no message);
- S2 deleted while every event about it is lost → the resync's 404 means deleted: the result is
  the interruption (``session-deleted``), never a completed debate.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from roundtabled.core.result import INTERRUPTION_HEADER
from roundtabled.core.state import EndReason, Phase
from roundtabled.offline.scripted_actions import Hang, Text
from tests.e2e.edge_helpers import wait_for
from tests.fakes.daemon_proc import text_of
from tests.fakes.proxy import event_type

from .conftest import RegressionProxy, proxied_rt

MUTATING = ("POST", "PATCH", "PUT", "DELETE")


def s2_requests_after(proxy: RegressionProxy, s2: str, since: float) -> list[str]:
    """Requests naming S2 received by the proxy after ``since`` (monotonic s)."""
    return proxy.after_session(s2, since)


async def test_s2_deleted_while_dev_streams_one_interruption_and_no_404_loop(
    rt_factory: Any,
) -> None:
    """Exact failing input: seats pm, dev; pm replies; dev streams 8 characters every 0.25 s
    for ~10 s; ``DELETE /session/{S2}`` 1 s into dev's stream."""
    rt, proxy = await proxied_rt(rt_factory)
    try:
        rt.llm.script(Text(text="PM: partial history survives the deletion."), agent="pm")
        rt.llm.script(
            Text(text="DEV streams on " * 40, chunk_size=8, chunk_delay=0.25), agent="dev"
        )
        s1 = await rt.new_parent()
        s2 = await rt.start(agents=["pm", "dev"], prompt="Delete me mid-turn", parentSessionID=s1)
        dev = (await rt.llm.wait_for_requests(1, within=30, session=s2, agent="dev"))[0]
        await asyncio.sleep(1.0)
        t_del = time.monotonic()
        await rt.oc("DELETE", f"/session/{s2}")
        result = await rt.result(s2, timeout=30)
        assert result["phase"] == Phase.ABORTED.value
        assert result["endReason"] == EndReason.SESSION_DELETED.value
        await wait_for(lambda: s2 not in rt.daemon.engine.tables, 15, "the daemon to forget S2")
        t_forgot = time.monotonic()
        # No background task is left either: a 404 loop would keep the worker or a task
        # alive, and whatever they sent after the forgetting is in the proxy's log by now.
        await rt.retired(s2, 15)
        after = s2_requests_after(proxy, s2, t_del)
        late = s2_requests_after(proxy, s2, t_forgot)
    finally:
        await proxy.stop()
    assert not late, f"requests to the deleted S2 after it was forgotten: {late}"
    assert len(after) <= 8, f"too many requests to the deleted S2: {after}"
    assert not any("prompt_async" in r for r in after), after
    assert len(rt.llm.requests_for(session=s2, kind="turn")) == 2  # pm, dev; nothing after
    await wait_for(lambda: dev.disconnected or dev.finished_at, 15, "dev's stream to end")
    msgs = await rt.messages(s1)
    assert len(msgs) == 1, [text_of(m) for m in msgs]
    text = text_of(msgs[0])
    assert text.startswith(INTERRUPTION_HEADER)
    assert "PM: partial history survives the deletion." in text


async def test_s1_deleted_while_the_tool_waits_aborts_s2_first_and_posts_nothing(
    rt_factory: Any,
) -> None:
    """Exact failing input: seats pm, dev; pm's model never answers (``Hang``); the result is
    long-polled with a tool call id (what the ``roundtable`` tool does); ``DELETE
    /session/{S1}`` while pm's request hangs."""
    rt, proxy = await proxied_rt(rt_factory)
    try:
        rt.llm.script(Hang(max_seconds=120), agent="pm")
        s1 = await rt.new_parent()
        s2 = await rt.start(
            agents=["pm", "dev"],
            prompt="Parent gone while the tool waits",
            parentSessionID=s1,
            toolCallID="call_regression15",
            toolMessageID="msg_regression15",
        )
        pm = (await rt.llm.wait_for_requests(1, within=30, session=s2, agent="pm"))[0]
        waiter = asyncio.create_task(
            rt.api(
                "GET",
                f"/v1/roundtables/{s2}/result",
                params={"wait": "30", "callID": "call_regression15"},
            )
        )
        await asyncio.sleep(0.5)
        t_del = time.monotonic()
        await rt.oc("DELETE", f"/session/{s1}")
        await wait_for(lambda: pm.disconnected, 10, "pm's stream in S2 to be aborted")
        status, data = await asyncio.wait_for(waiter, 40)
        await rt.retired(s2, 15)
        after = [(m, p) for t, m, p in proxy.requests_to if t > t_del]
    finally:
        await proxy.stop()
    assert status == 200 and data.get("done"), data
    assert data["endReason"] == EndReason.PARENT_DELETED.value
    changes = [f"{m} {p}" for m, p in after if m in MUTATING]
    assert changes and changes[0] == f"POST /session/{s2}/abort", changes
    posted = [c for c in changes if c.endswith(("/prompt_async", "/message"))]
    assert not posted, f"posted after S1 was deleted: {posted}"
    assert [r.agent for r in rt.llm.requests_for(session=s2, kind="turn")] == ["pm"]


async def test_404_during_resync_means_deleted_never_completed(rt_factory: Any) -> None:
    """Exact failing input: seats pm, dev; dev's model never answers (``Hang``); the proxy drops
    every event naming S2 (so the daemon learns only by its 2 s resync); ``DELETE
    /session/{S2}``."""
    rt, proxy = await proxied_rt(rt_factory)
    s2_holder: list[str] = []

    def about_s2(payload: dict[str, Any]) -> bool:
        return bool(s2_holder) and s2_holder[0] in str(payload) and event_type(payload) != ""

    try:
        rt.llm.script(Text(text="PM: before the silent deletion."), agent="pm")
        rt.llm.script(Hang(max_seconds=120), agent="dev")
        s1 = await rt.new_parent()
        s2 = await rt.start(agents=["pm", "dev"], prompt="Silent deletion", parentSessionID=s1)
        await rt.llm.wait_for_requests(1, within=30, session=s2, agent="dev")
        s2_holder.append(s2)
        proxy.drop = about_s2
        await rt.oc("DELETE", f"/session/{s2}")
        result = await rt.result(s2, timeout=30)
        await rt.retired(s2, 15)
    finally:
        await proxy.stop()
    assert "session.deleted" in proxy.dropped
    assert result["phase"] == Phase.ABORTED.value, result
    assert result["endReason"] == EndReason.SESSION_DELETED.value, result
    assert result["text"].startswith(INTERRUPTION_HEADER)
    msgs = await rt.messages(s1)
    assert len(msgs) == 1 and text_of(msgs[0]).startswith(INTERRUPTION_HEADER)
