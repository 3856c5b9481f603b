"""The handoff: from a finished turn to the next turn's prompt, as fast as the server allows.

While a turn runs, the event stream's copies of its messages are collected in a mirror
(:mod:`roundtabled.engine.mirror`). When the mirror is provably complete the pure machine decides
from it (:meth:`Handoff.decide`) and the handoff is the PATCH hiding the previous turn's prompt,
then the prompt (no read of S2, no state write before it); the state write that names the new
turn follows :data:`PERSIST_DELAY_MS` later (:meth:`Handoff.write_deferred`), the prompt's
signed marker being the durable record meanwhile (``docs/design.md``, "fast handoff").
:meth:`Handoff.prompt` sends every prompt, whichever way it was decided.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from roundtabled import faults, ids
from roundtabled.core import history, machine
from roundtabled.core.commands import (
    Abort,
    Decision,
    Finalize,
    Observation,
    Prompt,
)
from roundtabled.core.messages import UserView
from roundtabled.core.server_records import TurnPrompt
from roundtabled.core.sides import turn_header
from roundtabled.core.state import sign_marker
from roundtabled.engine.mirror import TurnMirror
from roundtabled.engine.shell import Shell
from roundtabled.engine.table import Ahead, Table
from roundtabled.errors import NotFound, TransportError
from roundtabled.opencode import events as ev
from roundtabled.opencode.http_clock import HTTP_CLOCK

PERSIST_DELAY_MS = 500
"""After a fast handoff the state write waits this long (ms): turns that end sooner (an instant
model) are handed off without a write; a crash in between is recovered from the prompts' signed
markers (machine invariant 4)."""


def _fast(d: Decision) -> bool:
    """A decision the fast handoff executes: the next prompt, or the end; never an abort."""
    if any(isinstance(c, Abort) for c in d.commands):
        return False
    return any(isinstance(c, Prompt) and c.send for c in d.commands) or any(
        isinstance(c, Finalize) for c in d.commands
    )


class Handoff:
    """Fast handoffs and prompts for every roundtable of one daemon."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    def decide(self, table: Table) -> Decision | None:
        """The handoff decided from the event mirror, or ``None`` to read S2 instead.

        Taken only when the mirror is complete (see :mod:`roundtabled.engine.mirror`) and nothing
        else is pending for this roundtable (cancel, deletion or error hint, abort, instance
        disposal), and only when the machine then prompts the next turn (or finalizes); every other
        decision is taken from a read of S2. The decision taken ahead at the final step
        (:meth:`decide_ahead`) is used when nothing of the turn changed since.
        """
        mirror = table.mirror
        if mirror is None or not self._may_decide(table, mirror):
            return None
        raw = mirror.messages()
        if raw is None:
            return None  # not finished yet: keep collecting
        ahead, table.ahead = table.ahead, None
        plugin = self.shell.plugins.version_for(table.state.directory)
        if (
            ahead is not None
            and ahead.changes == mirror.changes
            and ahead.state is table.state
            and ahead.plugin == plugin
        ):
            d: Decision | None = ahead.decision
            self.shell.metrics.ahead_decisions += 1
        else:
            d = self._from_mirror(table, raw, plugin)
            if d is None:
                return None
        table.mirror = None  # used (the next prompt opens a new one)
        return d if d is not None and _fast(d) else None

    def decide_ahead(self, table: Table, event: ev.Event) -> None:
        """On the event that completes the pending turn's final step (as :meth:`hide_early`),
        take the handoff's decision from the mirror before the idle arrives: the machine's work
        overlaps the server's wind-down of the turn, and at the idle :meth:`decide` uses it if
        no message or part of the turn changed in between (``docs/design.md``, "fast handoff").

        The decision runs as the loop's next callback, not inside the event's dispatch: a handoff
        of another roundtable woken by an earlier event goes first. Never raises: any failure
        leaves the decision to the idle.
        """
        mirror = table.mirror
        if (
            mirror is None
            or table.state.pending is None
            or not self.shell.port.ends_turn(event, mirror.since)
        ):
            return
        try:
            asyncio.get_running_loop().call_soon(self._decide_ahead_now, table, mirror)
        except RuntimeError:  # fed without a loop (the ingestion benchmark): decide now
            self._decide_ahead_now(table, mirror)

    def _decide_ahead_now(self, table: Table, mirror: TurnMirror) -> None:
        if table.mirror is not mirror or not self._may_decide(table, mirror):
            return
        try:
            raw = mirror.messages(ahead=True)
            if raw is None:
                return
            plugin = self.shell.plugins.version_for(table.state.directory)
            d = self._from_mirror(table, raw, plugin)
        except Exception as exc:  # the idle decides it again, and reports its own failure
            table.log.debug("deciding ahead of the idle failed: %s", exc)
            return
        if d is not None and _fast(d):
            table.ahead = Ahead(mirror.changes, table.state, plugin, d)

    def _may_decide(self, table: Table, mirror: TurnMirror) -> bool:
        """Whether the mirror may decide this turn's handoff at all (voiding it for good when
        it cannot be trusted)."""
        state = table.state
        pend = state.pending
        if mirror.epoch != self.shell.stream_epoch or mirror.doubt is not None:
            table.mirror = None  # void for good: this turn is decided from reads
            return False
        return not (
            pend is None
            or pend.message_id != mirror.since
            or pend.abort_requested_at is not None
            or pend.error_seen_at is not None
            or table.cancel is not None
            or table.deleted_hint
            or table.error_seen_at is not None
            or self.shell.plugins.checking(state.directory)  # the mode is being checked
            or (
                table.disposed_at is not None
                and table.disposed_at >= (pend.prompted_at or 0)  # disposed during this turn
            )
        )

    def _from_mirror(
        self, table: Table, raw: list[dict[str, Any]], plugin: str | None
    ) -> Decision | None:
        """The machine's decision on the mirror's messages ``raw`` of the pending turn, or
        ``None`` when only a read of S2 can decide it."""
        state = table.state
        pend = state.pending
        assert pend is not None
        port = self.shell.port
        if port.ends_with_tool_calls(raw):
            # Only S2's real status can tell a refused-tools end from an idle *event* that
            # came between two steps (stale or duplicated): read S2.
            return None
        views = port.views_of(raw, state.session_id, self.shell.signer)
        if not history.turn_is_final(history.answers_to(views, pend.message_id), idle=False):
            # An idle event the mirror took while the seat's final step is not completed in it
            # (stale, or ahead of the reply's last update): only a read of S2 decides this turn.
            return None
        obs = Observation(
            now=self.shell.clock(),
            status="idle",
            messages=views,
            pending_found=True,
            new_id=ids.message_id(),
            accepted=True,
            from_events=True,
            plugin=plugin,
        )
        return machine.decide(state, obs)

    async def start_turn(self, table: Table, cmd: Prompt) -> None:
        """Start a turn prompt first: hide, prompt, then write the intent.

        A crash between the prompt and the state write leaves the previous turn pending in S2's
        state block; recovery finds the new prompt by its signed marker and adopts it (machine
        invariant 4). The hiding completes before the prompt POST, so the next model never
        sees the previous prompt (checked by the tests that record every model request).
        """
        shell = self.shell
        table.unpersisted = True
        table.pokes_at_prompt = table.pokes
        # The hiding PATCH(es) complete before the POST: sent beside it, a slow or retried
        # PATCH could land after the server built the next model request (regression "hide
        # patch lands before the next model request").
        try:
            await self.hide(table, cmd.hide)
        except TransportError as exc:
            table.log.warning("could not hide the previous turn prompt: %s", exc)
        await self.prompt(table, cmd)
        if cmd.index:
            # The index of the start-up scan changes only with the phase; write it now.
            await shell.store.persist(table.state, index=True)
            table.unpersisted = False
            faults.checkpoint("intent-persisted")
        else:
            # The state write is deferred (PERSIST_DELAY_MS): the prompt's signed marker is the
            # durable record of the turn, and a write now would compete with the turn on the
            # server. A turn that ends sooner is handed off without it.
            table.persist_at = shell.clock() + PERSIST_DELAY_MS

    async def hide(self, table: Table, views: tuple[UserView, ...]) -> None:
        """Mark ``views`` (earlier turn prompts) ``ignored``: after the early hiding in flight,
        if any (:meth:`hide_early`), only what it did not do.

        Raises:
            TransportError: the hiding failed.
        """
        early, table.hiding = table.hiding, None
        done: str | None = None
        if early is not None:
            hidden_id, task = early
            if await task:
                done = hidden_id
                self.shell.metrics.early_hides += 1
        rest = tuple(v for v in views if v.id != done)
        if rest:
            await self.shell.store.hide_all(table.state.session_id, rest)

    def hide_early(self, table: Table, event: ev.Event) -> None:
        """On the event that completes the pending seat turn's final step (an assistant step
        ``stop`` or ``length``, not ``tool-calls`` or ``unknown``, after which the server calls
        no model again), start hiding the turn's prompt: the PATCH overlaps the server's
        wind-down of the turn, and the handoff at idle is the prompt POST alone.

        Only from a trusted mirror, for a turn whose prompt the next turn will hide
        (:func:`roundtabled.core.machine.hides_prompt`), and with no cancel pending.
        """
        mirror = table.mirror
        state = table.state
        pend = state.pending
        if (
            table.hiding is not None
            or mirror is None
            or mirror.doubt is not None
            or mirror.epoch != self.shell.stream_epoch
            or pend is None
            or pend.message_id != mirror.since
            or table.cancel is not None
            or state.end_reason is not None
            or not self.shell.port.ends_turn(event, mirror.since)
            or not machine.hides_prompt(state)
        ):
            return
        raw = mirror.prompt_message()
        if raw is None:
            return
        view = self.shell.port.view_of(raw, state.session_id, self.shell.signer)
        if not isinstance(view, UserView) or not view.visible_parts:
            return
        task = asyncio.ensure_future(self._hide_now(table, view))
        self.shell.track(task)
        table.hiding = (view.id, task)

    async def _hide_now(self, table: Table, view: UserView) -> bool:
        # Started from the event stream's task: the PATCH is the roundtable's server time (the
        # handoff that awaits it waits for the server, not for the daemon).
        HTTP_CLOCK.set(table.clock)
        try:
            await self.shell.store.hide_all(table.state.session_id, (view,))
        except Exception as exc:  # the handoff hides it again (and reports that failure)
            table.log.debug("early hiding of %s failed: %s", view.id, exc)
            return False
        return True

    async def write_deferred(self, table: Table) -> bool:
        """Write the state a fast handoff left unwritten (``table.unpersisted``). Returns True
        when the pass has nothing else to do: it was woken only for this write and the running
        turn's events are being collected (nothing to read yet)."""
        shell = self.shell
        persist_wake = (
            table.persist_at is not None
            and shell.clock() >= table.persist_at
            and table.pokes == table.pokes_at_prompt
        )
        try:
            await shell.store.persist(table.state)
            faults.checkpoint("intent-persisted")
        except NotFound:
            table.deleted_hint = True  # S2 is gone: the read that follows confirms and ends it
            persist_wake = False
        table.unpersisted = False
        table.persist_at = None
        return persist_wake and table.mirror is not None and table.mirror.doubt is None

    async def prompt(self, table: Table, cmd: Prompt, *, first: bool = False) -> None:
        """Send one turn's prompt (``prompt_async`` with the seat's model and the signed marker),
        opening the mirror of the new turn first. A failed POST is not retried here: the machine
        re-prompts only if the message is absent from S2.

        A prompt whose message is the state block's (turn 1 of a fresh roundtable, and the same
        turn sent again under its id because the server never stored it) carries the block as
        one more ``ignored`` part, written from ``table.state``: sending it writes the state
        with the turn's intent (docs/design.md, "Exactly once").

        ``first``: the start's own prompt (:meth:`roundtabled.engine.registry.Engine.start`): a
        failed POST is raised (TransportError, NotFound) instead of left to the machine, as the
        failed write of a state block of its own was: the roundtable does not exist in S2."""
        shell = self.shell
        state = table.state
        # The one turn header style of every text people read (CLI, export, history texts).
        label = (
            turn_header(cmd.agent, cmd.marker.round + 1, state.options.sides.get(cmd.agent))
            if cmd.marker.kind == "turn"
            else f"── observer · {cmd.agent} ──"
        )
        marker = sign_marker(cmd.marker, state.session_id, shell.signer)
        carries = cmd.message_id == state.state_message_id
        prompt = TurnPrompt(
            cmd.message_id,
            cmd.agent,
            cmd.text,
            label,
            marker,
            state.models.get(cmd.agent),
            block=shell.store.ride(state) if carries else None,
        )
        pokes_before = table.pokes
        # Collect the new turn's events from before the server can emit any of them.
        table.mirror = TurnMirror(state.session_id, cmd.message_id, shell.stream_epoch)
        table.ahead = None
        try:
            await shell.port.send_prompt(state.session_id, prompt)
        except NotFound:
            if first:
                raise
            table.deleted_hint = True
            table.poke()
            return
        except TransportError as exc:
            if first:
                raise
            table.log.warning("prompt for %s failed: %s", cmd.agent, exc)
            table.poke()
            return
        if carries:
            # The state block (with this turn's intent) and the prompt went out as one write.
            faults.checkpoint("state-created")
            faults.checkpoint("intent-persisted")
        if table.answering is not None:
            dt, server = shell.metrics.record(
                table.answering, table.clock.reading(), time.perf_counter()
            )
            table.answering = None
            table.handoff_ms.append(dt)
            table.handoff_server_ms.append(server)
            (cpu0, busy0), (cpu1, busy1) = table.answering_cpu, table.clock.cpu_reading()
            table.handoff_cpu_ms.append(((cpu1 - cpu0) - (busy1 - busy0)) * 1000)
        table.accepted.add(cmd.message_id)
        if (
            table.pokes == pokes_before
            and table.cancel is None
            and not table.deleted_hint
            and table.error_seen_at is None
        ):
            # Wakes that came in before the prompt was sent were about the turn just recorded
            # (one arriving during the POST may be about the new turn: kept). Re-reading now
            # would only find the new turn not started (and load the server while it runs
            # it). The new turn's own events, deadlines and the resync period still wake the
            # worker.
            table.wake.clear()
            table.woke_at = None
        faults.checkpoint("observer-prompted" if cmd.marker.kind == "observer" else "prompted")
        table.log.debug("prompted %s (%s)", cmd.agent, cmd.message_id)
        progress: dict[str, Any] = {
            "type": "prompt",
            "agent": cmd.agent,
            "round": cmd.marker.round + 1,
            "kind": cmd.marker.kind,
        }
        table.publish(progress)
