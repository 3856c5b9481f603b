"""Progress while the tool waits, on the real server: the TUI toasts (``tui.toast.show`` on the
event stream) of a debate whose turns are more than 2 s apart: the start, one per finished
turn with its round and count, one when the observer takes over, the end; S2's title unchanged
until ``· CONCLUDED``. The throttle and the setting are pinned by the engine tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import aiohttp

from roundtabled.state import CONCLUDED_SUFFIX, OBSERVER_AGENT
from roundtabled.testing.scripted_llm import Text

from .conftest import RT


async def test_a_toast_per_finished_turn_and_per_phase_change(rt: RT) -> None:
    toasts: list[str] = []
    titles: list[str] = []

    async def listen() -> None:
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                rt.server.url + "/global/event",
                auth=rt.server.auth,
                timeout=aiohttp.ClientTimeout(total=None),
            ) as resp,
        ):
            async for line in resp.content:
                if not line.startswith(b"data:"):
                    continue
                payload = json.loads(line[5:]).get("payload") or {}
                if payload.get("type") == "tui.toast.show":
                    toasts.append(str(payload["properties"]["message"]))
                elif payload.get("type") == "session.updated":
                    info: dict[str, Any] = payload["properties"].get("info") or {}
                    if info.get("parentID") is None and info.get("title", "").startswith(
                        "(Roundtable)"
                    ):
                        titles.append(str(info["title"]))

    listener = asyncio.create_task(listen())
    try:
        await asyncio.sleep(0.5)
        rt.llm.script(Text(text="PM answers.", first_byte_delay=2.5), agent="pm")
        rt.llm.script(Text(text="DEV answers.", first_byte_delay=2.5), agent="dev")
        rt.llm.script(Text(text="SUMMARY."), agent=OBSERVER_AGENT)
        s2 = await rt.start(agents=["pm", "dev"], prompt="Toasts please", rounds=1)
        await rt.result(s2)
        await rt.finalized(s2)
        await asyncio.sleep(0.5)
    finally:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listener
    ours = [t for t in toasts if "Toasts please" in t or " done — " in t]
    assert ours == [
        "Roundtable started: (Roundtable) - Toasts please",
        "pm · round 1/1 done — 1 of 2 turns",
        "dev · round 1/1 done — 2 of 2 turns",
        "Debate over after round 1/1: the observer consolidates — (Roundtable) - Toasts please",
        "Roundtable concluded: (Roundtable) - Toasts please",
    ], toasts
    info = await rt.session(s2)
    assert info["title"] == "(Roundtable) - Toasts please" + CONCLUDED_SUFFIX
