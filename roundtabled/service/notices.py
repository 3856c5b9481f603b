"""The toasts a server cannot show, kept for the TUI (docs/plugin.md, "Toasts on 2.x").

OpenCode 2.x has no HTTP route for a toast (``V2Port.notify`` answers ``False``), but a plugin's
TUI part can show one (``ctx.ui.toast.show``, checked on 2.1.2). So the daemon keeps the
roundtable's toasts here (started, resumed, a failed turn, the progress toasts when
``progress_toasts`` is on, the end) and the 2.x plugin's TUI part (``plugins/roundtabled/
tui.ts``) long-polls ``GET /v1/notices`` for those of its directory and shows each once.

A bounded buffer (the newest :data:`KEEP`); each notice has an ascending ``seq``; a poller asks
for those after the last ``seq`` it saw (``next``), so a notice is shown once per TUI and a TUI
started later shows none of the past ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from typing import Any

from roundtabled.core.commands import Toast
from roundtabled.core.state import RoundtableState

__all__ = ["KEEP", "MAX_WAIT_S", "Notices"]

KEEP = 200
"""How many notices are kept (the oldest go first)."""
MAX_WAIT_S = 60.0
"""Longest long-poll of ``GET /v1/notices`` (seconds)."""


class Notices:
    """The toasts kept for the TUI.

    Args:
        progress: keep the progress toasts (a finished turn, the observer's phase) too: the
            daemon's ``progress_toasts`` setting, as on 1.x.
    """

    def __init__(self, *, progress: bool = True) -> None:
        self.progress = progress
        self.seq = 0
        #: requests answered (a TUI part polling shows here; the health of the toasts)
        self.polls = 0
        self._items: deque[dict[str, Any]] = deque(maxlen=KEEP)
        self._changed = asyncio.Event()

    def add(self, state: RoundtableState, message: str, variant: str) -> None:
        """Keep one toast about ``state``'s roundtable (``variant``: info, success, warning,
        error)."""
        self.seq += 1
        self._items.append(
            {
                "seq": self.seq,
                "directory": state.directory,
                "sessionID": state.session_id,
                "parentSessionID": state.parent_session_id,
                "title": "Roundtable",
                "message": message,
                "variant": variant,
                "time": int(time.time() * 1000),
            }
        )
        self._changed.set()
        self._changed = asyncio.Event()

    def toast(self, state: RoundtableState, cmd: Toast) -> None:
        """The machine's toast ``cmd`` that the server could not show (a progress toast only
        when :attr:`progress` is on)."""
        if cmd.progress is not None and not self.progress:
            return
        self.add(state, cmd.message, cmd.variant)

    def after(self, seq: int, directory: str | None) -> list[dict[str, Any]]:
        """The notices after ``seq`` (of ``directory`` when given), oldest first."""
        return [
            n
            for n in self._items
            if n["seq"] > seq and (directory is None or n["directory"] in (None, directory))
        ]

    async def wait(self, seq: int | None, directory: str | None, timeout: float) -> dict[str, Any]:
        """``GET /v1/notices``'s answer: ``{"notices": [...], "next": N}``. ``seq`` ``None``:
        none, only where to start (a TUI shows no past notice); else those after ``seq``,
        waiting up to ``timeout`` seconds for one."""
        self.polls += 1
        if seq is None:
            return {"notices": [], "next": self.seq}
        deadline = time.monotonic() + timeout
        found = self.after(seq, directory)
        while not found and (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)
            found = self.after(seq, directory)
        return {"notices": found, "next": max(self.seq, seq) if not found else found[-1]["seq"]}
