"""One roundtable's loop: wake, observe, decide, execute.

The event stream only *wakes* the roundtable an event concerns; the worker then reads S2's truth
(status + messages from the pending turn on), feeds it to the pure :func:`roundtabled.core.machine.
decide`, and has the one executor (:mod:`roundtabled.engine.executor`) carry out the returned
commands. Workers are serial within a roundtable and parallel
across roundtables; one failing roundtable cannot hurt another (its errors are handled by its own
:class:`FailureLog` inside its own task).

Level-triggered: every worker re-observes at its next deadline (turn timeout, grace periods) and
at least every ``resync_period`` seconds, and all workers are woken on every (re)connect of the
event stream. A lost ``session.idle`` costs at most one resync period; a stale or duplicated one
costs one cheap read (``docs/design.md``, "level-triggered").
"""

from __future__ import annotations

import asyncio
import contextlib

from roundtabled import ids
from roundtabled.core import failures, machine, messages, opening
from roundtabled.core.commands import Decision, Observation
from roundtabled.core.state import EndReason, RoundtableState
from roundtabled.engine.delivery import Finalizer
from roundtabled.engine.executor import Executor
from roundtabled.engine.handoff import Handoff
from roundtabled.engine.opening import OpeningRunner
from roundtabled.engine.shell import Shell
from roundtabled.engine.table import Table
from roundtabled.errors import AuthFailed, NotFound
from roundtabled.opencode.http_clock import HTTP_CLOCK
from roundtabled.opencode.port import refusal_confirmed, sessions_gone


class FailureLog:
    """The worker's :class:`~roundtabled.core.failures.FailurePolicy` plus what it logs: each failed
    pass is logged once, at the level its kind deserves. One per worker run."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self.policy = failures.FailurePolicy()

    def succeeded(self) -> None:
        """A pass went through: counts and backoff start over."""
        self.policy.succeeded()

    def failed(self, table: Table, exc: Exception) -> failures.Outcome:
        """Log ``exc`` and decide (retry after a delay, or give up with a reason)."""
        out = self.policy.failed(exc)
        if out.give_up:
            table.log.error("roundtable failed: %s", out.reason, exc_info=out.kind == "unexpected")
        elif isinstance(exc, AuthFailed):
            self.shell.last_error = str(exc)
            table.log.error("%s", exc)
        elif out.kind == failures.FailureKind.RETRYABLE:
            table.log.warning("server call failed, retrying in %.1f s: %s", out.delay_s, exc)
        else:
            table.log.exception("unexpected error; retrying in %.1f s", out.delay_s, exc_info=exc)
        return out


class Worker:
    """Runs the loop of each roundtable of one daemon (one task per roundtable).

    Args:
        shell: the shared effects (client, signer, settings, clock, store, metrics).
    """

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self.handoff = Handoff(shell)
        self.finalizer = Finalizer(shell)
        self.executor = Executor(shell, self.handoff, self.finalizer)
        self.opening = OpeningRunner(shell, self.executor, self.check_deleted)

    async def run(self, table: Table, *, wait_first: bool = False) -> None:
        """The loop of ``table`` until its roundtable needs no more work or the daemon closes;
        ``wait_first``: the first pass waits for a wake (a poke or ``table.deadline_ms``)."""
        HTTP_CLOCK.set(table.clock)  # this task's requests count as the table's server time
        policy = FailureLog(self.shell)
        if wait_first:
            await self.sleep(table)
        while not self.shell.closing:
            try:
                finished = await self.step(table)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                out = policy.failed(table, await refusal_confirmed(self.shell.port, exc))
                if not out.give_up:
                    await asyncio.sleep(out.delay_s)
                elif table.state.active:
                    # End it (docs/design.md, "Failures of the worker"): the next pass finalizes
                    # and delivers the reason to S1.
                    assert out.reason is not None
                    table.state = failures.ended(table.state, out.reason, self.shell.clock())
                    table.unpersisted = False
                    policy.succeeded()
                else:
                    break  # finalizing the failed roundtable failed too: said in the log
                continue
            policy.succeeded()
            if finished:
                break
            await self.sleep(table)

    async def sleep(self, table: Table) -> None:
        """Wait for a poke, the table's deadline or the resync period, whichever comes first."""
        period = self.shell.settings.resync_period
        timeout = period
        deadline = table.deadline_ms
        if table.unpersisted and table.persist_at is not None:
            deadline = table.persist_at if deadline is None else min(deadline, table.persist_at)
        if deadline is not None:
            timeout = min(period, max(0.0, (deadline - self.shell.clock()) / 1000))
        if table.wake.is_set():
            table.wake.clear()
            return
        # asyncio.timeout, not wait_for: wait_for (3.11) runs the wait in a task of its own, so
        # a poke reached this worker only two loop iterations later, behind every other ready
        # callback each time.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await table.wake.wait()
        table.wake.clear()

    def started(self, table: Table) -> None:
        """Send the start's toast if it is still due (once: it is taken here)."""
        due, table.start_toast = table.start_toast, None
        if due is not None:
            self.shell.toast(table.state, due[1], "info")

    async def step(self, table: Table) -> bool:
        """One reconcile pass. Returns True when the roundtable needs no more work."""
        table.answering = None if table.woke_at is None else (table.woke_at, *table.woke_clock)
        table.answering_cpu = table.woke_cpu
        table.woke_at = None  # a poke from now on wakes the next pass
        # The first pass after a start comes at turn 1's first event that wakes it (its end, an
        # error, a deadline): the start's toast goes first if turn 1's first step did not
        # send it (a turn that never reached the model, events lost).
        self.started(table)
        state = table.state
        if opening.running(state):
            # Round 1 of an independent opening runs in sessions of its own.
            await self.opening.step(table)
            if table.state.active:
                return False
            return await self.finalizer.finalize(table)
        if state.active:
            fast = self.handoff.decide(table)
            if fast is not None:
                await self.executor.decision(table, fast, fast=True)
                if table.state.active:
                    return False
                return await self.finalizer.finalize(table)  # the observer's turn: finalize
            if table.unpersisted and await self.handoff.write_deferred(table):
                return False
            obs = await self.observe(table)
            decision = machine.decide(table.state, obs)
            await self.execute(table, decision)
            if table.state.active:
                return False
            # The debate just ended: finalize now, not at the next wake (up to resync_period).
        return await self.finalizer.finalize(table)

    async def observe(self, table: Table) -> Observation:
        """Read S2 for one decision: its status and the messages from the pending prompt on."""
        shell = self.shell
        state = table.state
        s2 = state.session_id
        pend = state.pending
        cancel = table.take_cancel()
        if cancel is not None and state.end_reason == EndReason.CANCELLED:
            cancel = None
        if table.deleted_hint:
            deleted, parent_deleted = await self.check_deleted(state)
            table.deleted_hint = deleted
            if deleted:
                return self._deleted(parent_deleted)
        status_task = asyncio.ensure_future(shell.port.statuses(state.directory))
        try:
            try:
                if pend is not None:
                    views, found = await shell.store.read_from(s2, pend.message_id)
                else:
                    views, found = (), False
            except BaseException:
                # Never leave the concurrent read unawaited ("exception never retrieved").
                status_task.cancel()
                await asyncio.gather(status_task, return_exceptions=True)
                raise
            statuses = await status_task
        except NotFound:
            deleted, parent_deleted = await self.check_deleted(state)
            if deleted:
                return self._deleted(parent_deleted)
            raise
        status = messages.status_of(statuses, s2)
        last = views[-1] if views else None
        if (
            status == "idle"
            and pend is not None
            and found
            and isinstance(last, messages.AnswerView)
            and last.finish == "tool-calls"
        ):
            # Messages and status were read concurrently, and the machine takes an idle
            # tool-calls step as the turn's last (a refused tool ends it): re-read now that S2
            # is known idle, so a follow-up step that ended in between is not missed.
            views, found = await shell.store.read_from(s2, pend.message_id)
        error = None
        seen = table.error_seen_at
        if pend is not None and seen is not None and seen >= (pend.prompted_at or 0):
            error = (seen, table.error_text or "the server reported an error")
        table.error_seen_at = table.error_text = None
        return Observation(
            now=shell.clock(),
            status=status,
            messages=views,
            pending_found=found,
            cancel=cancel,
            new_id=ids.message_id(),
            accepted=pend is not None and pend.message_id in table.accepted,
            error=error,
            plugin=await shell.plugins.current(state.directory),
        )

    def _deleted(self, parent_deleted: bool) -> Observation:
        return Observation(
            now=self.shell.clock(),
            status="unknown",
            deleted=True,
            parent_deleted=parent_deleted,
            new_id=ids.message_id(),
        )

    async def check_deleted(self, state: RoundtableState) -> tuple[bool, bool]:
        """``(S2 or S1 is gone, S1 is gone)`` (:func:`~roundtabled.opencode.port.sessions_gone`:
        raises ServerReplaced when the 404 came from another major)."""
        return await sessions_gone(self.shell.port, state.session_id, state.parent_session_id)

    async def execute(self, table: Table, d: Decision) -> None:
        """Execute a decision taken from a read of S2 (:meth:`Executor.decision`)."""
        await self.executor.decision(table, d)
