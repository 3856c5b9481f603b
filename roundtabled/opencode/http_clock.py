"""The time a task tree spends awaiting the server (:class:`HttpClock`), set per worker task
(:data:`HTTP_CLOCK`). Of either major's client and of no server's JSON: the engine reads it
without importing a client (docs/design.md, "The server port")."""

from __future__ import annotations

import contextvars
import time

__all__ = ["HTTP_CLOCK", "HttpClock"]


class HttpClock:
    """Wall time (seconds) during which at least one request of a task tree awaited the server.

    A request awaits the server from the moment it asks for a slot of the bounded pool (slots
    are only ever held by requests the server has not answered yet) until its response is read.
    Overlapping requests (``gather``) count once. Both totals only grow; between two readings
    (:meth:`reading`), the growth of ``busy`` is the server's share of that interval and the
    growth of ``queued`` the part of the requests' time spent waiting for a slot (summed), so
    ``elapsed - Δbusy`` is the daemon's own time (benchmarks, ``HandoffMetrics.handoff_server``).

    ``busy_cpu`` is the event-loop thread's CPU time (``time.thread_time``, seconds) spent while
    ``busy`` grew: the CPU share of the daemon's own time is ``Δthread_time - Δbusy_cpu``
    (:meth:`cpu_reading`). Unlike the wall-clock share it does not grow while the operating
    system runs other processes instead of the daemon (regression "huge events under load").
    """

    __slots__ = ("_cpu_since", "_inflight", "_since", "busy", "busy_cpu", "queued")

    def __init__(self) -> None:
        self.busy = 0.0
        self.busy_cpu = 0.0
        self.queued = 0.0
        self._inflight = 0
        self._since = 0.0
        self._cpu_since = 0.0

    def reading(self) -> tuple[float, float]:
        """``(busy, queued)`` so far (seconds), requests in flight counted up to now."""
        busy = self.busy
        if self._inflight:
            busy += time.perf_counter() - self._since
        return busy, self.queued

    def cpu_reading(self) -> tuple[float, float]:
        """``(thread_time now, busy_cpu so far)`` (seconds), requests in flight counted up to
        now."""
        now = time.thread_time()
        busy_cpu = self.busy_cpu
        if self._inflight:
            busy_cpu += now - self._cpu_since
        return now, busy_cpu

    def enter(self) -> None:
        if self._inflight == 0:
            self._since = time.perf_counter()
            self._cpu_since = time.thread_time()
        self._inflight += 1

    def leave(self) -> None:
        self._inflight -= 1
        if self._inflight == 0:
            self.busy += time.perf_counter() - self._since
            self.busy_cpu += time.thread_time() - self._cpu_since


HTTP_CLOCK: contextvars.ContextVar[HttpClock | None] = contextvars.ContextVar(
    "roundtabled_http_clock", default=None
)
"""The clock that requests made in this context add their time to (set per worker task)."""
