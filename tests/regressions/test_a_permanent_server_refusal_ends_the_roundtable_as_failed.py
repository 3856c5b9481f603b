"""A failure that will never go away: the server refuses every update of S2 mid-debate.

Field failure: an error that no retry can cure (a 400 on every write to S2, a corrupt state found
mid-debate, a bug in the daemon) was retried every 30 s forever: the roundtable stayed "active",
the orchestrator's tool call waited, nothing told the user. Proves, on the real ``opencode serve``
with the fault proxy (the real server never refuses a well-formed PATCH, so the proxy answers for
it): the roundtable ends with ``endReason: "failed"``, a reason the user can act on (what was
refused and by whom), and that result reaches S1 exactly once.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web

from roundtabled.offline.scripted_actions import Text
from tests.e2e.conftest import RT

from .conftest import RegressionProxy

REFUSAL = {"name": "BadRequest", "data": {"message": "refused by the fault proxy"}}


class RefusingProxy(RegressionProxy):
    """Answers 400 :data:`REFUSAL` to every PATCH of ``refuse_session`` once it is set."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.refuse_session: str | None = None
        self.refused: list[str] = []

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        ses = self.refuse_session
        if (
            ses is not None
            and request.method == "PATCH"
            and request.path.startswith(f"/session/{ses}")
        ):
            self.refused.append(request.path)
            return web.json_response(REFUSAL, status=400)
        return await super()._handle(request)


async def test_every_patch_of_s2_refused_mid_debate_ends_it_failed_once(rt_factory: Any) -> None:
    """Exact failing input: pm, dev, rv × 3 rounds with S1 as parent and no tool call waiting;
    once pm's round-1 reply reached the model, the proxy answers 400 ``BadRequest`` to every
    ``PATCH /session/S2…`` (hiding prompts, the state block, the title)."""
    rt: RT = await rt_factory()
    proxy = RefusingProxy(rt.server.url)
    await proxy.start()
    try:
        await rt.restart_daemon(server_url=proxy.url)
        rt.llm.script(Text(text="PM round 1: a view.", first_byte_delay=0.5), agent="pm")
        s1 = await rt.new_parent()
        s2 = await rt.start(
            agents=["pm", "dev", "rv"], prompt="Refused writes", rounds=3, parentSessionID=s1
        )
        await rt.llm.wait_for_requests(1, within=30, session=s2, agent="pm")
        proxy.refuse_session = s2
        status = await wait_for_end(rt, s2, timeout=120)
        assert proxy.refused, "the fault was never injected"
        assert status["endReason"] == "failed", status
        reason = " ".join(status.get("errors") or [])
        assert "400" in reason and "refused by the fault proxy" in reason, status

        # Delivered once: counted when the daemon has finalized it and retired its worker, so
        # no second delivery can follow.
        await rt.settled(s2)
        texts = [
            str(p.get("text") or "")
            for m in await rt.messages(s1)
            for p in m["parts"]
            if p["type"] == "text"
        ]
        delivered = [t for t in texts if "refused by the fault proxy" in t]
        assert len(delivered) == 1, json.dumps(texts)[:2000]
    finally:
        await proxy.stop()


async def wait_for_end(rt: RT, s2: str, timeout: float) -> dict[str, Any]:
    """The status once the roundtable is no longer active (``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, data = await rt.api("GET", f"/v1/roundtables/{s2}")
        if status == 200 and data.get("phase") not in ("active", "observing"):
            return dict(data)
        await asyncio.sleep(0.5)
    raise AssertionError(f"roundtable {s2} still active after {timeout} s")
