"""Regression (adversarial review of the fast handoff): a stale idle event between two steps of a
turn never ends the turn.

Failing input: pm, dev × 1; pm's step 1 reads a file that does not exist (the tool errors, the
server goes on with step 2, whose first byte comes 1 s later); the proxy injects a
``session.status idle`` + ``session.idle`` for S2 right after step 1's completed
``message.updated``. The event mirror looked finished and the machine, told "idle", took the
all-error tool-calls step as the turn's last: pm was recorded with an empty reply and dev was
prompted while pm's step 2 ran. Expected: only S2's real status decides such a turn (read path);
pm's final answer is recorded."""

from __future__ import annotations

import asyncio
from typing import Any

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text, tool_call
from tests.e2e.conftest import roundtable_config
from tests.e2e.edge_helpers import memory_state
from tests.fakes.proxy import decode_frame, event_type

from .conftest import RegressionProxy, idle_events


class StaleIdleProxy(RegressionProxy):
    def __init__(self, upstream: str, directory: str) -> None:
        super().__init__(upstream)
        self.directory = directory
        self.fired = 0

    async def _relay(self, request: Any, resp: Any, frame: bytes) -> bool:
        ok = await super()._relay(request, resp, frame)
        payload = decode_frame(frame)
        if payload is None or event_type(payload) != "message.updated" or self.fired:
            return ok
        info = ((payload.get("payload") or payload).get("properties") or {}).get("info") or {}
        if (
            info.get("role") == "assistant"
            and info.get("agent") == "pm"
            and (info.get("time") or {}).get("completed")
            and info.get("finish") == "tool-calls"
        ):
            self.fired += 1
            for e in idle_events(self.directory, info["sessionID"]):
                await self.inject(e)
            await asyncio.sleep(0.3)  # a slow stream: the next frames come a little later
        return ok


async def test_stale_idle_between_two_steps_does_not_end_the_turn(
    rt_factory: Any, scripted_llm: Any
) -> None:
    cfg = roundtable_config(
        scripted_llm, extra_agents={"pm": {"permission": {"*": "deny", "read": "allow"}}}
    )
    rt = await rt_factory(cfg)
    proxy = StaleIdleProxy(rt.server.url, rt.directory)
    await proxy.start()
    await rt.restart_daemon(server_url=proxy.url)
    rt.llm.script(
        tool_call("read", {"filePath": f"{rt.directory}/does-not-exist.txt"}),
        Text(text="PM final answer after the failed read.", first_byte_delay=1.0),
        agent="pm",
    )
    rt.llm.script(Text(text="DEV answer."), agent="dev")
    rt.llm.script(Text(text="SUMMARY."), agent=OBSERVER_AGENT)
    try:
        s2 = await rt.start(agents=["pm", "dev"], prompt="Stale idle between steps")
        await rt.result(s2, timeout=60)
    finally:
        await proxy.stop()
    assert proxy.fired == 1
    pm = memory_state(rt, s2).seat_turns()[0]
    assert "PM final answer" in pm.response, pm
    seats = [r.agent for r in rt.llm.requests_for(session=s2) if r.kind == "turn"]
    assert seats == ["pm", "dev", OBSERVER_AGENT], seats


async def test_read_path_same_fault(rt_factory: Any, scripted_llm: Any, monkeypatch: Any) -> None:
    """Same fault with the fast path disabled: the read path waits for pm's step 2."""
    from roundtabled.engine.handoff import Handoff

    monkeypatch.setattr(Handoff, "decide", lambda self, table: None)
    await test_stale_idle_between_two_steps_does_not_end_the_turn(rt_factory, scripted_llm)
