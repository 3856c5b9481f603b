"""One roundtable at run time: its state, its wake-up event, its progress feed, its logger.

The engine keeps one :class:`Table` per roundtable it drives (keyed by S2's id); the worker,
the handoff and the delivery read and update it. The state itself is decided by the pure
machine; a table adds what lives only in this process (hints from events, the mirror of the
turn in flight, timings, subscribers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from roundtabled.core.commands import Cancel, Decision
from roundtabled.core.progress import round_position
from roundtabled.core.result import build_result, usage_table
from roundtabled.core.sides import turn_view
from roundtabled.core.state import HistoryEntry, RoundtableState, has_meta_text
from roundtabled.core.verdict import note_key, rounds_completed, running_notes
from roundtabled.engine.mirror import TurnMirror
from roundtabled.opencode.http_clock import HttpClock

log = logging.getLogger("roundtabled.engine")


@dataclass(frozen=True)
class Ahead:
    """A handoff decision taken at the pending turn's final step, before its idle
    (:meth:`roundtabled.engine.handoff.Handoff.decide_ahead`)."""

    changes: int
    """:attr:`TurnMirror.changes` when it was taken."""
    state: RoundtableState
    """The state it was taken on (the very object: any change of it voids the decision)."""
    plugin: str | None
    """The plugin version it assumed for the directory."""
    decision: Decision


@dataclass
class Table:
    """Runtime wrapper of one roundtable (in the engine's dict, keyed by S2's id). Times are
    epoch ms unless named otherwise."""

    state: RoundtableState
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    deadline_ms: int | None = None
    cancel: Cancel | None = None
    """A cancel asked for and not yet taken by the worker (:meth:`take_cancel`)."""
    cancel_taken: Cancel | None = None
    """The cancel the worker took (decided on): a later request is answered against it."""
    control: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held by a control command while it writes and aborts (two cancels never interleave
    their writes)."""
    deleted_hint: bool = False
    error_seen_at: int | None = None
    error_text: str | None = None
    """The first ``session.error`` since the last pass (``name: message``)."""
    done: asyncio.Event = field(default_factory=asyncio.Event)
    result: dict[str, Any] | None = None
    finished_at: int | None = None
    """When the result was released (epoch ms)."""
    subscribers: list[asyncio.Queue[dict[str, Any]]] = field(default_factory=list)
    said: set[str] = field(default_factory=set)
    """The running notes already logged, by :func:`~roundtabled.core.verdict.note_key`."""
    handoff_ms: list[float] = field(default_factory=list)
    handoff_server_ms: list[float] = field(default_factory=list)
    """Per handoff: the part of ``handoff_ms`` spent awaiting the server (ms)."""
    handoff_cpu_ms: list[float] = field(default_factory=list)
    """Per handoff: the event-loop thread's CPU time outside the server's share (ms): the
    daemon's own time without the moments the operating system ran other processes
    (:meth:`roundtabled.opencode.http_clock.HttpClock.cpu_reading`)."""
    clock: HttpClock = field(default_factory=HttpClock)
    woke_at: float | None = None
    """``time.perf_counter()`` of the first poke since the worker last began a pass (None: no
    poke since), with ``woke_clock``, the ``clock.reading()`` at that moment."""
    woke_clock: tuple[float, float] = (0.0, 0.0)
    woke_cpu: tuple[float, float] = (0.0, 0.0)
    """``clock.cpu_reading()`` at ``woke_at``."""
    answering_cpu: tuple[float, float] = (0.0, 0.0)
    """``woke_cpu`` of the wake in ``answering``."""
    answering: tuple[float, float, float] | None = None
    """The wake the current pass answers, ``(woke_at, *woke_clock)``: the start of the handoff
    its prompt completes. A pass that sends no prompt drops it: the next handoff starts at the
    next poke (a stale or early event whose pass finds the turn still running is not the wake
    of the turn that ends later; the wait for the server in between is neither daemon time nor
    a request's)."""
    accepted: set[str] = field(default_factory=set)
    pokes: int = 0
    disposed_at: int | None = None
    """When OpenCode last disposed S2's instance (config reload; epoch ms): it aborts S2's turn."""
    persist_at: int | None = None
    """When the deferred state write of a fast handoff is due (epoch ms)."""
    pokes_at_prompt: int = 0
    mirror: TurnMirror | None = None
    """The pending turn as the event stream reports it (fast handoff,
    :mod:`roundtabled.engine.mirror`)."""
    ahead: Ahead | None = None
    """The next handoff's decision, taken at the pending turn's final step (before its idle)."""
    hiding: tuple[str, asyncio.Task[bool]] | None = None
    """The early hiding of the pending turn's prompt: its message id and the task (True when
    done), awaited by the handoff before its prompt
    (:meth:`roundtabled.engine.handoff.Handoff.hide`)."""
    start_toast: tuple[str, str] | None = None
    """The start's toast, ``(turn 1's prompt id, message)``, until it is sent: once turn 1 has
    reached the model (a step answering that prompt), or at the worker's first pass
    (:meth:`roundtabled.engine.registry.Engine.start`)."""
    unpersisted: bool = False
    """The in-memory state names a prompt the state block in S2 does not (a fast handoff whose
    state write failed): written at the next step."""
    log: logging.LoggerAdapter[logging.Logger] = field(init=False)

    def __post_init__(self) -> None:
        self.log = _TableAdapter(log, {"table": self})

    def poke(self) -> None:
        """Wake the worker (coalesced: many pokes before it runs are one wake)."""
        self.pokes += 1
        if self.woke_at is None:
            self.woke_at = time.perf_counter()
            self.woke_clock = self.clock.reading()
            self.woke_cpu = self.clock.cpu_reading()
        self.wake.set()

    def take_cancel(self) -> Cancel | None:
        """The pending cancel, now taken by the worker's pass (kept as :attr:`cancel_taken`)."""
        cancel, self.cancel = self.cancel, None
        if cancel is not None:
            self.cancel_taken = cancel
        return cancel

    def publish(self, item: dict[str, Any]) -> None:
        """Feed one progress event to every subscriber (a full queue loses it, never blocks)."""
        for q in list(self.subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                q.put_nowait(item)

    def record_turn(self, entry: HistoryEntry) -> None:
        """Log a finished turn (or a person's message) and publish it."""
        if has_meta_text(entry.response):
            self.log.warning(
                "%s's %s contains a [ROUNDTABLE META] block: text, never state (ignored)",
                entry.agent,
                "message" if entry.kind == "user" else "reply",
            )
        lg = self.log
        if entry.has_error and self.disposed_at is not None and "Aborted" in (entry.error or ""):
            lg.info(
                "%s (round %d) was aborted by OpenCode: instance disposed (config reload)",
                entry.agent,
                entry.round,
            )
        elif entry.has_error:
            lg.warning(
                "%s (round %d) %s: %s",
                entry.agent,
                entry.round,
                "cut off" if entry.cut_off else "failed",
                entry.error,
                extra={"agent": entry.agent, "round": entry.round},
            )
        else:
            lg.info(
                "%s %s (round %d): %d chars",
                entry.kind,
                entry.agent,
                entry.round,
                len(entry.response),
                extra={"agent": entry.agent, "round": entry.round},
            )
        notes = running_notes(self.state)
        for note in notes:
            if note_key(note) not in self.said:
                self.said.add(note_key(note))
                lg.warning("%s", note)
        self.publish({"type": "turn", "entry": turn_view(entry, self.state), "notes": notes})


def status_of(table: Table, now: int, *, result: bool = False) -> dict[str, Any]:
    """JSON status of one roundtable (control API, CLI ``status``/``list``); ``now`` epoch ms.
    ``result``: a roundtable that is over also carries its result contract (``result``,
    docs/result.md; ``None`` while it runs): the single status, not the list."""
    st = table.state
    recorded = st.recorded_history()
    usage = usage_table(recorded, st.unpriced)
    pend = st.pending
    return {
        "sessionID": st.session_id,
        "parentSessionID": st.parent_session_id,
        "directory": st.directory,
        "title": st.title,
        "prompt": st.prompt,
        "phase": st.phase.value,
        # The round a person is shown (a cancel in round 1 is not "round 2"): docs/design.md.
        "round": (pos := round_position(st)).round,
        "stage": pos.stage,
        "totalRounds": st.total_rounds,
        # The rounds that ran in full: the result's "N/M rounds" (docs/result.md).
        "roundsCompleted": rounds_completed(st),
        "agent": pend.agent if pend else None,
        "agents": st.agents,
        "observer": st.observer,
        # A finished roundtable's elapsed time stops at its last update.
        "elapsed": round(((now if st.active else st.updated_at) - st.created_at) / 1000, 1)
        if st.created_at
        else None,
        "endReason": enum_value(st.end_reason),
        "finalized": st.finalization.toast_done,
        "delivered": st.delivery.delivered_via,
        "errors": st.errors,
        "notes": running_notes(st) if st.active else [],
        # The turns recorded so far, an independent round's settled ones included.
        "turns": sum(1 for e in recorded if e.kind == "turn"),
        "usage": {
            "perAgent": {k: v.dump() for k, v in usage["perAgent"].items()},
            "perRound": {str(k): v.dump() for k, v in usage["perRound"].items()},
            "total": usage["total"].dump(),
        },
        "summary": st.summary,
        **({"result": None if st.active else build_result(st).dump()} if result else {}),
    }


def enum_value(value: Any) -> Any:
    """An enum's value, ``None`` kept."""
    return value.value if value is not None else None


class _TableAdapter(logging.LoggerAdapter[logging.Logger]):
    """Prefixes ``[ses_… r2 dev]`` and adds ``session_id``, ``round`` and ``agent`` fields (every
    line about a roundtable carries them; JSON logs show them as fields)."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        table: Table = (self.extra or {})["table"]  # type: ignore[assignment]
        st = table.state
        extra = kwargs.setdefault("extra", {})
        # A line about a finished turn names that turn (``extra={"agent", "round"}``), not the
        # turn in flight when it is logged.
        extra.setdefault("agent", st.pending.agent if st.pending else None)
        extra.setdefault("round", min(st.current_round + 1, st.total_rounds))
        extra["session_id"] = st.session_id
        return f"[{st.session_id} r{extra['round']} {extra['agent'] or '-'}] {msg}", kwargs
