"""Regression: event stream closed by a config reload.

Field failure: a config reload (``POST /instance/dispose?directory=<project>``, what OpenCode does
when ``opencode.json`` changes) while dev streamed closed the daemon's event stream; dev's turn
ended while the daemon was reconnecting, the ``session.idle`` was lost, and the debate waited for
the next resync (or, after a naive resync, dev was prompted again); the disposal was logged as an
error.

What the real server does (OpenCode 1.18.33, observed by this test): the dispose **aborts** the
directory's running turn (dev's assistant message ends with ``MessageAbortedError``, partial text
kept) and emits ``server.instance.disposed``; ``/global/event`` (the daemon's stream) stays open,
only the per-directory ``/event`` streams close. Proves: the daemon resyncs on the disposal,
prompts rv exactly once within 10 s (the fault: the next resync, 60 s), never re-prompts dev, and
logs the disposal (and dev's aborted turn) as a reason at INFO — no warning or error. If the
stream does close (older servers, a proxy), the close is logged as a reason and rv follows within
10 s of the reconnect (the first reconnect is held back 4 s so dev's turn ends inside the gap).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from roundtabled.offline.scripted_actions import Text
from roundtabled.opencode.stream import Backoff
from tests.e2e.conftest import RT
from tests.e2e.edge_helpers import EventLog, wait_for

from .conftest import LogCapture, seat_turns

GAP_S = 4.0


class SlowFirstReconnect(Backoff):
    """The daemon's backoff, except the first reconnect waits :data:`GAP_S` seconds."""

    __slots__ = ("disconnects",)

    def __init__(self, disconnects: list[tuple[float, str]]) -> None:
        super().__init__()
        self.disconnects = disconnects

    def next_delay(self) -> float:
        return GAP_S if len(self.disconnects) == 1 else super().next_delay()


async def test_dispose_while_dev_streams_resyncs_and_prompts_rv_once(rt_factory: Any) -> None:
    """Failing input: ``agents=["pm","dev","rv"]``, 1 round, daemon ``resync_period=60`` (a lost
    idle would cost a minute); dev streams 8 characters every 0.15 s; 1 s into dev's reply
    ``POST /instance/dispose?directory=<project>``."""
    rt: RT = await rt_factory(daemon={"resync_period": 60.0})
    stream = rt.daemon.stream
    rt.llm.script(Text(text="PM: first."), agent="pm")
    rt.llm.script(
        Text(
            text="DEV: " + "a reply that is still streaming when the config reloads. " * 3,
            chunk_size=8,
            chunk_delay=0.15,
        ),
        agent="dev",
    )
    rt.llm.script(Text(text="RV: reviewed."), agent="rv")
    connects: list[float] = []
    disconnects: list[tuple[float, str]] = []
    real_on_connect = stream._on_connect
    real_on_disconnect = stream._on_disconnect

    async def on_connect() -> None:
        connects.append(time.monotonic())
        assert real_on_connect is not None
        await real_on_connect()

    def on_disconnect(reason: str) -> None:
        disconnects.append((time.monotonic(), reason))
        if real_on_disconnect is not None:
            real_on_disconnect(reason)

    stream._on_connect = on_connect
    stream._on_disconnect = on_disconnect
    stream._backoff = SlowFirstReconnect(disconnects)
    with LogCapture() as logs:
        async with EventLog(rt) as events:
            s2 = await rt.start(agents=["pm", "dev", "rv"], prompt="Reload-proof?")
            await rt.llm.wait_for_requests(1, within=60, session=s2, agent="dev")
            await asyncio.sleep(1.0)
            assert await rt.oc("POST", "/instance/dispose", params={"directory": rt.directory})
            disposed = await wait_for(
                lambda: events.of_type("server.instance.disposed"), 10, "the disposal event"
            )
            rv = (await rt.llm.wait_for_requests(1, within=30, session=s2, agent="rv"))[0]
            since = disposed[0][0]
            if disconnects:  # the stream was closed: measure from the reconnect
                since = max(since, min(t for t in connects if t > disconnects[0][0]))
            # The fault waits for the next resync (60 s here); 10 s leaves a loaded 2-core CI
            # machine room for the server's own restart of the instance (2.10 s seen once).
            assert rv.t_mono - since < 10.0, rv.t_mono - since
            await rt.result(s2)
            # A duplicate turn needs a worker or a busy S2: counted once there is neither.
            await rt.settled(s2)
    turns = seat_turns(rt, s2)
    assert turns[:3] == ["pm", "dev", "rv"], turns
    assert turns.count("dev") == 1 and turns.count("rv") == 1, turns
    for _, reason in disconnects:
        assert "dispos" in reason or "closed" in reason, reason
    infos = logs.lines(logging.INFO)
    assert any("disposed" in line and "config reload" in line for line in infos), infos
    bad = [
        line
        for line in logs.lines(logging.WARNING)
        if any(w in line.lower() for w in ("dispos", "stream", "abort"))
    ]
    assert bad == [], bad
