"""Regression (adversarial review of the fast handoff): the PATCH that hides the previous turn's
prompt must land before the next prompt is sent, on both handoff paths.

Failing input: pm, dev, rv × 1 round; a proxy between daemon and server delays every hiding PATCH
of a turn prompt by 150 ms (or answers the first one 502, retried by the client after ~0.2 s).
With the PATCH sent beside the prompt POST, rv's model request carried dev's prompt too (3 user
messages instead of 2). Expected: each seat request holds the opening prompt and its own only."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from roundtabled.offline.scripted_actions import Text

from .conftest import RegressionProxy, proxied_rt


class SlowHideProxy(RegressionProxy):
    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.mode = "delay"
        self.hits = 0

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "PATCH" and "/part/" in request.path:
            body = json.loads(await request.read() or b"{}")
            md = (body.get("metadata") or {}).get("roundtabled") or {}
            if (
                body.get("ignored")
                and md.get("kind") != "state"
                and "Current agent" in str(body.get("text"))
            ):
                self.hits += 1
                if self.mode == "502" and self.hits == 1:
                    return web.Response(status=502, text="transient")
                if self.mode == "delay":
                    await asyncio.sleep(0.15)
        return await super()._handle(request)


async def _run(rt_factory: Any, mode: str, monkeypatch: Any = None, fast: bool = True) -> None:
    rt, proxy0 = await proxied_rt(rt_factory)
    await proxy0.stop()
    proxy = SlowHideProxy(rt.server.url)
    proxy.mode = mode
    await proxy.start()
    if not fast:
        from roundtabled.engine.handoff import Handoff

        monkeypatch.setattr(Handoff, "decide", lambda self, table: None)
    await rt.restart_daemon(server_url=proxy.url)
    for a in ("pm", "dev", "rv"):
        rt.llm.script(Text(text=f"{a} says something distinct #{a}."), agent=a)
    try:
        s2 = await rt.start(agents=["pm", "dev", "rv"], prompt="Hide race topic", rounds=1)
        await rt.result(s2)
    finally:
        await proxy.stop()
    reqs = [r for r in rt.llm.requests_for(session=s2) if r.kind == "turn"][:-1]
    counts = [len([m for m in r.messages if m["role"] == "user"]) for r in reqs]
    assert proxy.hits >= 2, proxy.hits  # dev's and rv's handoffs hid a prompt through the proxy
    assert counts == [1, 2, 2], counts
    if fast:
        assert rt.daemon.engine.metrics.fast_handoffs >= 2


async def test_a_slow_hiding_patch_still_lands_before_the_next_prompt(rt_factory: Any) -> None:
    await _run(rt_factory, "delay")


async def test_a_retried_hiding_patch_still_lands_before_the_next_prompt(rt_factory: Any) -> None:
    await _run(rt_factory, "502")


async def test_read_path_slow_hiding_patch(rt_factory: Any, monkeypatch: Any) -> None:
    await _run(rt_factory, "delay", monkeypatch, fast=False)


async def test_read_path_retried_hiding_patch(rt_factory: Any, monkeypatch: Any) -> None:
    await _run(rt_factory, "502", monkeypatch, fast=False)
