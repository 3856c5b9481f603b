"""Handoff timings and counters: recorded beside the decisions, never read by them.

A handoff is timed from the first wake of the worker after the turn ended (the event that made
the mirror complete, or a poke) to the answer of the next turn's prompt POST; the share spent
awaiting the server comes from the table's :class:`roundtabled.opencode.http_clock.HttpClock`. The
benchmarks (``bench/debate.py``) read these lists; ``bench/README.md`` has the figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KEEP_MAX = 100_000
"""Entries kept per list; beyond it the older half is dropped (a daemon runs for weeks)."""


@dataclass
class HandoffMetrics:
    """Timings (ms) of every handoff of this daemon, one entry per handoff in each list, and the
    counts of handoffs decided from the event mirror (``fast_handoffs``) or from a read of S2
    (``read_handoffs``)."""

    handoffs: list[float] = field(default_factory=list)
    """Wall time of each handoff (ms)."""
    handoff_server: list[float] = field(default_factory=list)
    """Server share (ms) of each entry of ``handoffs`` (same index)."""
    handoff_queued: list[float] = field(default_factory=list)
    """Of which waiting for a slot of the client's request pool (ms, same index)."""
    fast_handoffs: int = 0
    read_handoffs: int = 0
    ahead_decisions: int = 0
    """Fast handoffs whose decision was taken at the turn's final step, before its idle
    (:meth:`roundtabled.engine.handoff.Handoff.decide_ahead`)."""
    early_hides: int = 0
    """Handoffs whose hiding PATCH was already done when the turn ended (started at the final
    step, :meth:`roundtabled.engine.handoff.Handoff.hide_early`)."""

    def record(
        self,
        woke: tuple[float, float, float],
        reading: tuple[float, float],
        now: float,
    ) -> tuple[float, float]:
        """Record one handoff. ``woke``: ``(perf_counter, busy, queued)`` at the wake it answers;
        ``reading``: the table clock's ``(busy, queued)`` now; ``now``: ``perf_counter()`` now
        (all seconds). Returns ``(wall, server)`` in ms."""
        woke_at, busy_at, queued_at = woke
        busy, queued = reading
        dt = (now - woke_at) * 1000
        server = (busy - busy_at) * 1000
        self.handoffs.append(dt)
        self.handoff_server.append(server)
        self.handoff_queued.append((queued - queued_at) * 1000)
        if len(self.handoffs) > KEEP_MAX:
            half = KEEP_MAX // 2
            del self.handoffs[:half]
            del self.handoff_server[:half]
            del self.handoff_queued[:half]
        return dt, server

    def clear(self) -> None:
        """Forget the timings (the counters stay)."""
        self.handoffs.clear()
        self.handoff_server.clear()
        self.handoff_queued.clear()
