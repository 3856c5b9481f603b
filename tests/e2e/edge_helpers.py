"""Helpers shared by the ``test_edge_*`` end-to-end files (every edge case of the spec)
and the regression files.

- :func:`global_events` yields the payloads of the real server's ``/global/event`` stream;
  :class:`EventLog` records them all with receive times, :class:`Toasts` the ``tui.toast.show``
  ones (what a TUI would display); ``flush()`` waits until everything published so far arrived.
- :func:`ask_build` prompts the orchestrator agent ``build`` in a session (the real tool path).
- :func:`memory_state` is the daemon's in-memory state of a roundtable; :func:`stored_state` the
  signed state block read back from S2 (what survives a restart).
- :func:`wait_for` polls a condition (seconds); :func:`record_cancels` notes when the daemon's
  engine receives each cancel.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any

import aiohttp

from roundtabled.core.state import META_KEY, RoundtableState, decode_state, encode_state
from roundtabled.opencode import v2

from .conftest import RT

ORCHESTRATOR_MODEL = {"providerID": "scripted", "modelID": "orchestrator-1"}


async def ask_build(rt: RT, session: str, text: str) -> None:
    """Prompt the orchestrator (``build``) in ``session``, as a person typing in the TUI would
    (2.x: the session's agent and model switched to ``build`` on the orchestrator's model, then
    the prompt)."""
    if rt.major == 2:
        client = rt.v2.client
        await client.switch_agent(session, "build")
        await client.switch_model(
            session,
            v2.ModelRef.model_validate(
                {
                    "id": ORCHESTRATOR_MODEL["modelID"],
                    "providerID": ORCHESTRATOR_MODEL["providerID"],
                }
            ),
        )
        await client.prompt(session, text)
        return
    await rt.oc(
        "POST",
        f"/session/{session}/prompt_async",
        {"agent": "build", "model": ORCHESTRATOR_MODEL, "parts": [{"type": "text", "text": text}]},
    )


async def global_events(rt: RT) -> AsyncIterator[dict[str, Any]]:
    """The payloads (``{type, properties}``) of the real server's ``/global/event`` stream, as
    they arrive; runs until the caller stops iterating or is cancelled."""
    async with (
        aiohttp.ClientSession(headers=rt.server.auth_headers) as http,
        http.get(
            rt.server.url + "/global/event", timeout=aiohttp.ClientTimeout(total=None)
        ) as resp,
    ):
        async for line in resp.content:
            if line.startswith(b"data:"):
                yield json.loads(line[5:]).get("payload") or {}


class _Listener(abc.ABC):
    """Runs :meth:`on_event` for each payload of :func:`global_events` while in its
    ``async with`` (entered once the server says ``server.connected``, within 10 s)."""

    def __init__(self, rt: RT) -> None:
        self.rt = rt
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._sentinels: dict[str, asyncio.Event] = {}

    @abc.abstractmethod
    def on_event(self, payload: dict[str, Any]) -> None:
        """One event's payload (each subclass keeps what it needs)."""

    async def _listen(self) -> None:
        async for payload in global_events(self.rt):
            if payload.get("type") == "server.connected":
                self._connected.set()
            if payload.get("type") == "tui.toast.show":
                mark = self._sentinels.get(str((payload.get("properties") or {}).get("message")))
                if mark is not None:
                    mark.set()
                    continue
            self.on_event(payload)

    async def flush(self, timeout: float = 10) -> None:
        """Wait until every event the server published before this call has reached this
        listener: a sentinel toast is published, and one connection's events arrive in order.
        (The sentinel itself is not recorded.)"""
        message = f"roundtabled-test-sentinel-{uuid.uuid4().hex}"
        mark = self._sentinels[message] = asyncio.Event()
        await self.rt.oc(
            "POST",
            "/tui/show-toast",
            {"message": message, "variant": "info"},
            params={"directory": self.rt.directory},
        )
        await asyncio.wait_for(mark.wait(), timeout)

    async def _enter(self) -> None:
        self._task = asyncio.create_task(self._listen())
        await asyncio.wait_for(self._connected.wait(), 10)

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


class EventLog(_Listener):
    """Records ``(monotonic receive time, payload)`` of the server's ``/global/event`` stream
    while inside ``async with``."""

    def __init__(self, rt: RT) -> None:
        super().__init__(rt)
        self.items: list[tuple[float, dict[str, Any]]] = []

    def on_event(self, payload: dict[str, Any]) -> None:
        self.items.append((time.monotonic(), payload))

    async def __aenter__(self) -> EventLog:
        await self._enter()
        return self

    def of_type(self, etype: str) -> list[tuple[float, dict[str, Any]]]:
        """Events of one type, in arrival order."""
        return [(t, p) for t, p in self.items if p.get("type") == etype]


class Toasts(_Listener):
    """Collects toasts (``{title, message, variant, duration}``) while in its ``async with``."""

    def __init__(self, rt: RT) -> None:
        super().__init__(rt)
        self.items: list[dict[str, Any]] = []

    def on_event(self, payload: dict[str, Any]) -> None:
        if payload.get("type") == "tui.toast.show":
            self.items.append(dict(payload.get("properties") or {}))

    async def __aenter__(self) -> Toasts:
        await self._enter()
        return self

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


def record_cancels(rt: RT) -> list[float]:
    """From now on, the monotonic times at which the daemon's engine receives a cancel (the
    list fills as cancels come; the cancel itself runs unchanged)."""
    # 2.x: the 2.x shell takes the cancel
    engine: Any = rt.daemon.v2 if rt.daemon.v2 is not None else rt.daemon.engine
    called: list[float] = []
    real = engine.cancel

    async def timed(*a: Any, **kw: Any) -> Any:
        called.append(time.monotonic())
        return await real(*a, **kw)

    engine.cancel = timed
    return called


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
