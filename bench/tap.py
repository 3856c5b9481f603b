"""A raw subscriber of the server's ``/global/event`` stream for the benchmarks.

- records the raw SSE bytes while ``recording`` is set (the fixture of figure 4);
- lets the floor script wait for ``session.idle`` of one session (the cheapest possible wait).
"""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp

from roundtabled.opencode.events import SESSION_IDLE, parse_event
from roundtabled.opencode.stream import SSEDecoder


class EventTap:
    """Subscribe to ``{url}/global/event`` until :meth:`close`."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/") + "/global/event"
        self.recording = False
        self.recorded = bytearray()
        self.idle: dict[str, asyncio.Event] = {}
        self.connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._http: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self.connected.wait(), 30)

    def expect_idle(self, session: str) -> asyncio.Event:
        """An event set at the next ``session.idle`` of ``session`` (call before prompting)."""
        ev = asyncio.Event()
        self.idle[session] = ev
        return ev

    async def _run(self) -> None:
        assert self._http is not None
        decoder = SSEDecoder()
        async with self._http.get(self.url, headers={"Accept": "text/event-stream"}) as resp:
            while True:
                chunk = await resp.content.readany()
                if not chunk:
                    return
                if self.recording:
                    self.recorded += chunk
                for payload in decoder.feed(chunk):
                    self.connected.set()
                    ev = parse_event(payload)
                    if ev is None or ev.type != SESSION_IDLE or ev.session_id is None:
                        continue
                    waiter = self.idle.pop(ev.session_id, None)
                    if waiter is not None:
                        waiter.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._http is not None:
            await self._http.close()
