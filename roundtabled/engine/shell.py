"""What every room of the engine shares: the client, the signer, the settings, the clock, the
state store, the metrics and the background tasks.

One :class:`Shell` per daemon. Its constructor takes the four things a test replaces (a fake
client, a signer, settings, a clock returning epoch ms); everything else is made from them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from roundtabled.core.commands import Toast
from roundtabled.core.progress import ToastThrottle
from roundtabled.core.state import RoundtableState, Signer
from roundtabled.engine.metrics import HandoffMetrics
from roundtabled.engine.plugins import PluginRegistry, PluginReport
from roundtabled.engine.settings import Settings
from roundtabled.engine.store import StateStore
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.opencode.port import V1Port

log = logging.getLogger("roundtabled.engine")

Clock = Callable[[], int]
"""Wall clock in epoch milliseconds (the machine's time unit)."""


def now_ms() -> int:
    """Wall clock in epoch milliseconds (the machine's time unit)."""
    return int(time.time() * 1000)


class Shell:
    """The effects the engine's rooms share.

    Args:
        client: the OpenCode client (shared by all workers).
        signer: the daemon's MAC key (state blocks and markers).
        settings: the engine's knobs (:mod:`roundtabled.engine.settings`).
        clock: epoch milliseconds now (tests pass a fake clock).
    """

    def __init__(
        self,
        client: OpenCodeClient,
        signer: Signer,
        settings: Settings,
        clock: Clock = now_ms,
    ) -> None:
        self.client = client
        self.port = V1Port(client)
        """The 1.x server port: the engine's writes go through it (docs/design.md, "The server
        port")."""
        self.signer = signer
        self.settings = settings
        self.clock = clock
        self.store = StateStore(self.port, signer)
        self.metrics = HandoffMetrics()
        self.plugins = PluginRegistry(clock, verify=self._report_runs)
        """Where the roundtable plugin reported itself loaded (the plugin mode's signal)."""
        self.toast_throttles: dict[str, ToastThrottle] = {}
        """Per roundtable (S2's id): when its last progress toast of a turn was shown."""
        self.stream_epoch = 0
        """Connections of the event stream so far (a mirror opened in an earlier one is void)."""
        self.closing = False
        self.last_error: str | None = None
        self.on_change: Callable[[], None] | None = None
        self.background: set[asyncio.Task[Any]] = set()

    async def _report_runs(self, report: PluginReport) -> bool:
        return await self.plugin_loaded(report.directory)

    async def plugin_loaded(self, directory: str) -> bool:
        """Whether the roundtable plugin runs in the current instance of ``directory`` of the
        server this daemon's connection reaches: that instance's ``GET /config`` carries the
        plugin's mark (:func:`roundtabled.opencode.v1_wire.plugin_ran`,
        :mod:`roundtabled.engine.plugins`).

        Raises:
            TransportError: the server did not answer.
        """
        return await self.port.plugin_ran(directory)

    def spawn(self, coro: Awaitable[Any]) -> None:
        """Run ``coro`` in the background; its failure is logged, never raised."""

        async def guarded() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("background task failed")

        task = asyncio.create_task(guarded())
        if inspect.iscoroutine(coro):
            # A task cancelled before its first step (the engine closing) never awaits ``coro``:
            # closed here, it is not reported as a coroutine never awaited (a no-op otherwise).
            inner = coro
            task.add_done_callback(lambda _: inner.close())
        self.track(task)

    def track(self, task: asyncio.Task[Any]) -> None:
        """Keep ``task`` among the background tasks (cancelled by the engine's close)."""
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def toast(self, state: RoundtableState, message: str, variant: str) -> None:
        """A TUI toast about ``state``'s roundtable, in the background (best effort)."""
        self.spawn(self.toast_now(state, message, variant))

    def show(self, state: RoundtableState, cmd: Toast) -> None:
        """The machine's toast: a progress toast only with ``progress_toasts``, a finished
        turn's at most once per 2 s per roundtable (dropped, not queued); others always."""
        if cmd.progress is not None:
            if not self.settings.progress_toasts:
                return
            if cmd.progress == "turn":
                throttle = self.toast_throttles.setdefault(state.session_id, ToastThrottle())
                if not throttle.allow(time.monotonic()):
                    return
        self.toast(state, cmd.message, cmd.variant)

    async def toast_now(self, state: RoundtableState, message: str, variant: str) -> None:
        """A TUI toast, awaited; a server that cannot show it is not an error."""
        await self.port.notify(state.directory, "Roundtable", message, variant)

    def changed(self) -> None:
        """Something the daemon's status shows changed (count of roundtables, a phase)."""
        if self.on_change is not None:
            self.on_change()
