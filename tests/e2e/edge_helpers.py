"""Helpers shared by the ``test_edge_*`` end-to-end files (issue 3: every edge case of the spec).

- :class:`Toasts` records the ``tui.toast.show`` events of the real server's ``/global/event``
  stream (what a TUI would display).
- :func:`memory_state` is the daemon's in-memory state of a roundtable; :func:`stored_state` the
  signed state block read back from S2 (what survives a restart).
- :func:`wait_for` polls a condition (seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import aiohttp

from roundtabled.state import META_KEY, RoundtableState, decode_state, encode_state

from .conftest import RT


class Toasts:
    """Collects toasts (``{title, message, variant, duration}``) while in its ``async with``."""

    def __init__(self, rt: RT) -> None:
        self.rt = rt
        self.items: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()

    async def _listen(self) -> None:
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                self.rt.server.url + "/global/event",
                auth=self.rt.server.auth,
                timeout=aiohttp.ClientTimeout(total=None),
            ) as resp,
        ):
            async for line in resp.content:
                if not line.startswith(b"data:"):
                    continue
                payload = json.loads(line[5:]).get("payload") or {}
                if payload.get("type") == "server.connected":
                    self._connected.set()
                if payload.get("type") == "tui.toast.show":
                    self.items.append(dict(payload.get("properties") or {}))

    async def __aenter__(self) -> Toasts:
        self._task = asyncio.create_task(self._listen())
        await asyncio.wait_for(self._connected.wait(), 10)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await self._task

    @property
    def messages(self) -> list[str]:
        """The toast texts, in arrival order."""
        return [str(t.get("message")) for t in self.items]

    async def wait_for(self, needle: str, timeout: float = 20) -> dict[str, Any]:
        """The first toast whose message contains ``needle`` (waits up to ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t in self.items:
                if needle in str(t.get("message")):
                    return t
            await asyncio.sleep(0.05)
        raise AssertionError(f"no toast containing {needle!r} in {timeout} s: {self.messages}")


async def wait_for(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``cond()`` every 50 ms until it is truthy (returned) or ``timeout`` s pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def memory_state(rt: RT, s2: str) -> RoundtableState:
    """The daemon's in-memory state of ``s2`` (active or recently finished)."""
    engine = rt.daemon.engine
    table = engine.tables.get(s2) or engine.recent.get(s2)
    assert table is not None, f"the daemon does not know {s2}"
    return table.state


async def state_part(rt: RT, s2: str) -> dict[str, Any]:
    """The part holding S2's signed state block (as the server stores it)."""
    info = await rt.session(s2)
    index = (info.get("metadata") or {})[META_KEY]
    msg = await rt.oc("GET", f"/session/{s2}/message/{index['stateMessageID']}")
    for part in msg["parts"]:
        if part.get("id") == index["statePartID"]:
            return dict(part)
    raise AssertionError(f"no state part in {s2}")


async def stored_state(rt: RT, s2: str) -> RoundtableState:
    """S2's state block, authenticated with the daemon's key."""
    part = await state_part(rt, s2)
    return decode_state(part["text"], part.get("metadata"), s2, rt.daemon.signer)


async def write_state(rt: RT, state: RoundtableState) -> None:
    """Overwrite S2's state block with ``state``, signed with the daemon's key (test set-ups that
    need a state the server cannot produce on its own, e.g. a stuck or orphaned roundtable)."""
    s2 = state.session_id
    part = await state_part(rt, s2)
    text, meta = encode_state(state, rt.daemon.signer)
    part.update({"text": text, "metadata": meta})
    await rt.oc("PATCH", f"/session/{s2}/message/{part['messageID']}/part/{part['id']}", part)


def seat_turns(rt: RT, s2: str) -> list[tuple[str | None, str]]:
    """``(agent, kind)`` of every model request made for S2 except title/compaction ones."""
    return [
        (r.agent, r.kind)
        for r in rt.llm.requests_for(session=s2)
        if r.kind in ("turn", "tool-followup")
    ]


def turn_agents(rt: RT, s2: str) -> list[str | None]:
    """Agents of the ``turn`` requests (one per prompt) made for S2, in order."""
    return [r.agent for r in rt.llm.requests_for(session=s2, kind="turn")]
