"""The engine: the registry of the roundtables this daemon drives, and event routing.

It starts, extends and cancels roundtables, routes each server event to the roundtable it
concerns (an event only *wakes* it), and answers status, result and progress queries. The rooms
around it do the work: :mod:`roundtabled.engine.worker` (one roundtable's loop), :mod:`roundtabled.
handoff` (the fast handoff), :mod:`roundtabled.engine.store` (state blocks in S2),
:mod:`roundtabled.engine.delivery` (finalization, exactly-once delivery to S1),
:mod:`roundtabled.engine.requests` (permission and question requests of seats) and
:mod:`roundtabled.engine.recovery` (the start-up scan); ``docs/design.md`` draws the whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from typing import Any

from roundtabled import faults, ids
from roundtabled.core import history, lifecycle, machine, opening, prompts
from roundtabled.core.commands import Cancel, Decision, Observation, Prompt, join_cancel
from roundtabled.core.deliberation import Call
from roundtabled.core.server_records import SessionRef
from roundtabled.core.state import (
    Delivery,
    EndReason,
    Extension,
    Phase,
    RoundtableState,
    Signer,
)
from roundtabled.core.validation import RoundtableRequest, unknown_roundtable
from roundtabled.engine import launch
from roundtabled.engine.plugins import HEARTBEAT_S
from roundtabled.engine.recovery import Recovery, remember_directory, warn_pasted_meta
from roundtabled.engine.requests import SeatRequests
from roundtabled.engine.settings import Settings
from roundtabled.engine.shell import Clock, Shell, now_ms
from roundtabled.engine.table import Table, status_of
from roundtabled.engine.worker import Worker
from roundtabled.errors import NotFound, StateError, TransportError, ValidationFailed
from roundtabled.opencode import events as ev
from roundtabled.opencode.client import OpenCodeClient

log = logging.getLogger("roundtabled.engine")

RECENT_MAX = 200
"""Finished roundtables kept in memory for status, results and export."""
PROGRESS_QUEUE_MAX = 256
"""Bounded queue per progress subscriber; a slow subscriber loses events, never blocks a worker."""


class Engine:
    """Holds every roundtable this daemon drives and the machinery around them. The arguments
    are :class:`roundtabled.engine.shell.Shell`'s (the engine makes the one shell of the daemon)."""

    def __init__(
        self, client: OpenCodeClient, signer: Signer, settings: Settings, clock: Clock = now_ms
    ) -> None:
        self.shell = shell = Shell(client, signer, settings, clock)
        self.client = client
        self.signer = signer
        self.settings = settings
        self.store = shell.store
        self.metrics = shell.metrics
        self.tables: dict[str, Table] = {}
        self.recent: OrderedDict[str, Table] = OrderedDict()
        self.by_parent: dict[str, set[str]] = {}
        self.extending: dict[str, str] = {}
        """S2's id → the extension being applied to it (its description, for a refusal)."""
        self.descendants: dict[str, str] = {}
        self.ready = asyncio.Event()
        self.server_version: str | None = None
        self.worker = Worker(shell)
        self.requests = SeatRequests(shell, self.tables, self.descendants)
        self.recovery = Recovery(shell, lambda s2: s2 in self.tables, self._resume)
        self.start_reads = launch.InstanceReads(lambda: shell.stream_epoch)
        """The agents, configuration and providers a start reads, kept per server instance."""

    @property
    def last_error(self) -> str | None:
        """The last error talking to the server that the daemon's health reports."""
        return self.shell.last_error

    @last_error.setter
    def last_error(self, value: str | None) -> None:
        self.shell.last_error = value

    # ------------------------------------------------------------------------------------------
    # Events (hints)
    # ------------------------------------------------------------------------------------------

    def on_event(self, event: ev.Event) -> None:
        """Dispatch one server event: wake the roundtable it concerns. Cheap; never raises."""
        sid = event.session_id
        etype = event.type
        if etype == ev.SERVER_CONNECTED:
            # First event of every connection, handled before the events after it: a mirror
            # opened on an earlier connection may have missed events in the gap.
            self.shell.stream_epoch += 1
            return
        if self.requests.on_event(event):
            return
        if etype == ev.SERVER_INSTANCE_DISPOSED:
            # A config reload: the server aborts the directory's running turns (regression
            # "event stream closed by a config reload"). A reason, not an error; resync.
            where = event.properties.get("directory") or event.directory
            log.info("OpenCode disposed the instance of %s (config reload); resyncing", where)
            self.shell.plugins.forget(where)
            self.start_reads.forget(where)
            for reloaded in list(self.tables.values()):
                if reloaded.state.directory == where:
                    reloaded.disposed_at = self.shell.clock()
                    reloaded.poke()
            return
        if sid is None:
            if etype == ev.SESSION_ERROR:
                # Not any seat's (an MCP server or a plugin failing): the user's configuration
                # is broken, which is worth a line, but no turn failed.
                log.warning(
                    "OpenCode reported an error outside any session: %s",
                    self.shell.port.error_text(event),
                )
            return
        table = self.tables.get(sid)
        if table is not None:
            self._wake(table, event)
            return
        opening_table = self.worker.opening.owner(self.tables, self.descendants.get(sid), sid)
        if opening_table is not None:  # a seat's session of an independent opening
            self.worker.opening.on_event(opening_table, event)
            return
        if etype == ev.SESSION_CREATED:
            parent = event.parent_id
            if parent and (parent in self.tables or parent in self.descendants):
                self.descendants[sid] = self.descendants.get(parent, parent)
            return
        for s2 in list(self.by_parent.get(sid) or ()):
            child = self.tables.get(s2)
            if child is None:
                continue
            if etype == ev.SESSION_DELETED:
                child.deleted_hint = True  # S2 goes with its parent; confirmed by reads
                child.poke()
            elif etype in (ev.SESSION_IDLE, ev.SESSION_STATUS):
                child.poke()

    def _wake(self, table: Table, event: ev.Event) -> None:
        """An event about S2 itself: feed the turn's mirror, and wake the worker if it may
        have something to decide. Also: the state block that rode in turn 1's prompt is seen
        stored, and turn 1's first step (the model called) sends the start's toast."""
        etype = event.type
        state = table.state
        if (
            etype == ev.MESSAGE_PART_UPDATED
            and self.store.riding(state.session_id)
            and self.shell.port.updated_part(event) == (state.state_message_id, state.state_part_id)
        ):
            self.store.landed(state.session_id)
        elif (
            etype == ev.MESSAGE_UPDATED
            and table.start_toast is not None
            and self.shell.port.answers(event, table.start_toast[0])
        ):
            self.worker.started(table)
        mirror = table.mirror
        if mirror is not None and mirror.epoch == self.shell.stream_epoch:
            if mirror.feed(event):
                table.poke()  # the turn looks finished: decide from the mirror
                return
            if etype == ev.MESSAGE_UPDATED:
                self.worker.handoff.hide_early(table, event)
                self.worker.handoff.decide_ahead(table, event)
            if mirror.doubt is None and etype in (
                ev.MESSAGE_UPDATED,
                ev.SESSION_STATUS,
                ev.SESSION_IDLE,
            ):
                # The mirror's idle after a finished reply wakes the worker; a read now (an
                # idle before any reply, a step's end) would find the turn still running.
                # Deadlines and the resync period still wake it whatever the events say.
                return
        if etype in (ev.SESSION_IDLE, ev.SESSION_COMPACTED):
            table.poke()
        elif etype == ev.SESSION_STATUS:
            if event.status_type == "idle":
                table.poke()
        elif etype == ev.SESSION_ERROR:
            if table.error_seen_at is None:  # the server often reports a failure twice
                table.error_seen_at = self.shell.clock()
                table.error_text = self.shell.port.error_text(event)
            table.poke()
        elif etype == ev.SESSION_DELETED:
            table.deleted_hint = True
            table.poke()
        elif etype == ev.MESSAGE_UPDATED and self.shell.port.completed_reply(event):
            table.poke()

    @property
    def server_url(self) -> str:
        """The OpenCode server's base URL (``http://127.0.0.1:4096``), as the health answer
        shows it."""
        return self.client.base_url

    async def on_connect(self) -> None:
        """After every (re)connect of the stream: resync every roundtable (no replay exists)."""
        self.shell.stream_epoch += 1  # events may have been lost: every open mirror is void
        self.start_reads.clear()  # and a disposal of an instance may have gone unheard
        # The server may have restarted without the plugin: each report is checked again.
        self.shell.plugins.recheck()
        for table in list(self.tables.values()):
            table.poke()
        self.shell.spawn(self.requests.sweep())

    # ------------------------------------------------------------------------------------------
    # Starting, extending, cancelling
    # ------------------------------------------------------------------------------------------

    async def start(self, req: RoundtableRequest) -> RoundtableState:
        """Start a fresh roundtable and return its state once turn 1 is sent.

        Raises:
            ValidationFailed: bad agents/observer (names the available agents), missing models.
            TransportError: the server could not be reached.
        """
        if req.extend:
            return await self.extend(req)
        assert req.agents is not None
        state = await launch.new_state(
            self.shell.port,
            self.settings,
            req,
            self.shell.clock(),
            plugins=self.shell.plugins,
            reads=self.start_reads,
        )
        settings = self.settings
        title = state.title
        toast = f"Roundtable started: {title}"
        # Turn 1 is decided before anything is written into S2, with the state block's message
        # id (named by S2's index since its creation) as its prompt's: this daemon created S2 a
        # moment ago, so S2 is idle and empty, and a read (GET /session/status) would only put
        # a round trip before the debate. Its prompt then carries the block, intent included:
        # one write before turn 1, where a block of its own was two (docs/design.md, "State
        # format").
        first = machine.decide(
            state,
            Observation(
                now=self.shell.clock(),
                status="idle",
                new_id=state.state_message_id or ids.message_id(),
                plugin=await self.shell.plugins.current(state.directory),
            ),
        )
        if opening.running(state):
            first = Decision(state)  # round 1 runs in the seats' own sessions (the worker)
        first_prompt: Prompt | None = None
        match first.commands:
            case [Prompt(send=True, hide=(), persist_first=True) as prompt] if (
                prompt.message_id == state.state_message_id
            ):
                first_prompt, state = prompt, first.state
            case _:  # no first prompt: the independent opening (or any other decision)
                pass
        if first_prompt is None:
            # The block is a message of its own; turn 1 is decided by the worker, from a read.
            await self.store.create(state)
            faults.checkpoint("state-created")
        remember_directory(settings.state_dir, state.directory)
        table = self._adopt(state)
        table.log.info(
            "roundtable started: %s (%s, %d round(s))",
            title,
            " → ".join(state.agents),
            state.total_rounds,
        )
        if first_prompt is None:
            await self.worker.step(table)
            self.shell.toast(state, toast, "info")
        else:
            # Send turn 1 before answering, so the caller sees a running debate. The toast waits
            # until turn 1 has reached the model (one event loop serves both on the server: a
            # toast beside the prompt delays turn 1): at its first step's message.updated, or
            # the worker's first pass, whichever comes first (:meth:`_wake`, Worker.step).
            table.deadline_ms = first.wake_at
            table.start_toast = (first_prompt.message_id, toast)
            try:
                await self.worker.handoff.prompt(table, first_prompt, first=True)
            except TransportError:
                # Nothing of the roundtable is in S2 (no state block), as when the block's own
                # write failed: the start fails, and no trace of it stays here.
                self._unlink(table)
                self.shell.changed()
                raise
        # The worker waits for the first wake (an event of turn 1, or its deadline): a pass now
        # would only read S2 while turn 1 is starting on the server.
        self._run(table, wait_first=True)
        return table.state

    async def extend(self, req: RoundtableRequest) -> RoundtableState:
        """Continue a concluded roundtable with more rounds. One extension at a time: a second
        ``extend`` while one is being applied or running is refused, naming the first.

        Raises:
            ValidationFailed: not a roundtable, still active or being extended, agents/observer
                differ (field ``sessionID``, or the differing field).
        """
        assert req.session_id is not None
        s2 = req.session_id
        running = self.extending.get(s2)
        if running is not None:
            raise ValidationFailed(
                "sessionID",
                f"roundtable {s2} is being extended already ({running}); "
                "retry once that extension has ended",
            )
        # Claimed before the first await: two extends at once are never both applied.
        self.extending[s2] = launch.describe_extension(req.rounds, req.prompt)
        try:
            return await self._extend(req, s2)
        finally:
            del self.extending[s2]

    async def _extend(self, req: RoundtableRequest, s2: str) -> RoundtableState:
        await launch.wait_concluded(s2, self.tables.get(s2))
        state = await self.requested_state(
            s2, f"session {s2!r} is not a roundtable this daemon can extend"
        )
        if state.active:
            read = await self.store.read_all(s2)
            if history.all_replies_exist(state, read.views):
                log.info(
                    "roundtable %s: stored phase %s but every expected reply exists; "
                    "recovering it to done",
                    s2,
                    state.phase.value,
                    extra={"session_id": s2},
                )
                state = state.model_copy(update={"phase": Phase.DONE, "pending": None})
            else:
                raise ValidationFailed(
                    "sessionID", f"roundtable {s2} is still active; wait for it to conclude"
                )
        launch.check_extension(state, req)
        if req.parent_session_id:
            await launch.parent_session(self.shell.port, req.parent_session_id)
        if req.context == "recent":
            launch.check_plugin(
                await self.shell.plugins.wait_for(state.directory, HEARTBEAT_S + 1.0)
            )
        read = await self.store.read_all(s2, state.state_message_id)
        warn_pasted_meta(s2, read.pasted_meta)
        if not state.history:
            state = state.model_copy(update={"history": history.rebuild_history(state, read.views)})
        mode = req.extend_mode or prompts.infer_extend_mode(req.prompt)
        # Hide the old delimiter from later models; a new one is written at the new end.
        if state.finalization.delimiter_message_id:
            await self.store.hide_message(s2, state.finalization.delimiter_message_id)
        state = launch.extended(
            state,
            rounds=req.rounds,
            extension=Extension(from_round=state.total_rounds, prompt=req.prompt, mode=mode),
            parent_session_id=req.parent_session_id,
            delivery=Delivery(toolCallID=req.tool_call_id, toolMessageID=req.tool_message_id),
            call=Call(
                turn_timeout=req.turn_timeout,
                permission_policy=req.permission_policy,
                until=req.until,
                budget=req.budget,
                context=req.context,
            ),
            now=self.shell.clock(),
        )
        await self.shell.port.set_title(s2, state.title)
        await self.store.persist(state, index=True)
        self.recent.pop(s2, None)
        table = self._adopt(state)
        table.log.info("roundtable extended by %d round(s) (%s)", req.rounds, mode)
        self.shell.toast(state, f"Roundtable extended: {state.title}", "info")
        await self.worker.step(table)
        self._run(table)
        return table.state

    async def cancel(self, s2: str, *, summarize: bool, reason: str) -> RoundtableState:
        """Stop a roundtable: abort the turn in flight; the observer runs only if ``summarize``.

        Two cancels at once are answered by :func:`roundtabled.core.commands.join_cancel`: one
        write and one abort, the observer runs if a request asked for it before the worker took
        the cancel, and a ``summarize`` that comes after a plain cancel was taken is refused.

        Raises:
            ValidationFailed: no active roundtable with that id (``sessionID``: the first
                cancel already ended it); a summary asked for after a plain cancel was taken
                (``summarize``).
        """
        table = self.tables.get(s2)
        if table is None or not table.state.active:
            raise ValidationFailed("sessionID", f"no active roundtable {s2!r}")
        st = table.state
        taken = table.cancel_taken
        if taken is None and st.end_reason == EndReason.CANCELLED:
            taken = Cancel(summarize=st.options.cancel_summarize)  # recorded before a restart
        answer = join_cancel(table.cancel, taken, Cancel(summarize=summarize, reason=reason))
        if answer.refusal is not None:
            table.log.info("cancel refused: %s", answer.refusal)
            raise ValidationFailed("summarize", answer.refusal)
        if answer.pending is None:
            return table.state  # joined the cancel the worker decided or is deciding on
        table.cancel = answer.pending
        async with table.control:
            if table.cancel is not None:
                # Durable before the abort and before the answer: a crash from here on must not
                # resume the debate (regression "cancelled result is never released before it
                # is written"). The worker's own decision on the cancel writes the full record
                # shortly after.
                try:
                    await self.store.persist(machine.with_cancel(table.state, table.cancel))
                except (TransportError, NotFound) as exc:
                    table.log.warning("could not write the cancel before the abort: %s", exc)
            if not answer.joined:
                # Abort at once (stop must stop within 2 s), the worker records it.
                try:
                    await self.shell.port.abort(SessionRef(s2, table.state.directory))
                except TransportError as exc:
                    table.log.warning("could not abort the turn in flight: %s", exc)
        table.poke()
        return table.state

    # ------------------------------------------------------------------------------------------
    # The registry
    # ------------------------------------------------------------------------------------------

    def _adopt(self, state: RoundtableState) -> Table:
        table = Table(state=state)
        self.tables[state.session_id] = table
        if state.parent_session_id:
            self.by_parent.setdefault(state.parent_session_id, set()).add(state.session_id)
        self.shell.changed()
        return table

    def _resume(self, state: RoundtableState) -> Table:
        """Adopt a recovered roundtable and start its worker."""
        table = self._adopt(state)
        self._run(table)
        return table

    def _run(self, table: Table, *, wait_first: bool = False) -> None:
        """Start the worker of ``table``; ``wait_first``: its first pass waits for a wake (a
        poke or ``table.deadline_ms``) instead of running at once."""

        async def work() -> None:
            await self.worker.run(table, wait_first=wait_first)
            self._retire(table)

        table.task = asyncio.create_task(work(), name=f"rt-{table.state.session_id}")

    def _unlink(self, table: Table) -> None:
        """Drop ``table`` from the roundtables driven and the event routes (and the record of
        a state block riding in a prompt, which no event reaches any more)."""
        s2 = table.state.session_id
        self.store.landed(s2)
        if self.tables.get(s2) is table:
            del self.tables[s2]
        parent = table.state.parent_session_id
        if parent and parent in self.by_parent:
            self.by_parent[parent].discard(s2)
            if not self.by_parent[parent]:
                del self.by_parent[parent]
        for child, owner in list(self.descendants.items()):
            if owner == s2:
                del self.descendants[child]

    def _retire(self, table: Table) -> None:
        s2 = table.state.session_id
        self._unlink(table)
        self.recent[s2] = table
        while len(self.recent) > RECENT_MAX:
            self.recent.popitem(last=False)
        self.shell.changed()

    def _known(self, s2: str) -> Table | None:
        return self.tables.get(s2) or self.recent.get(s2)

    async def recover(self) -> dict[str, int]:
        """The start-up scan (:meth:`roundtabled.engine.recovery.Recovery.recover`)."""
        return await self.recovery.recover()

    async def load_state(self, s2: str) -> RoundtableState:
        """The state of ``s2``: from memory, else read and authenticated from S2.

        Raises:
            NotFound: S2 does not exist.
            StateError: no trusted block (forged, unknown version, corrupt).
        """
        table = self._known(s2)
        if table is not None:
            return table.state
        return await self.store.load(s2)

    async def requested_state(self, s2: str, not_ours: str) -> RoundtableState:
        """:meth:`load_state` of the ``s2`` a request names.

        Raises:
            ValidationFailed: (field ``sessionID``) S2 does not exist (the words of
                :func:`~roundtabled.core.validation.unknown_roundtable`), or it holds no trusted
                state block: ``not_ours`` and the reason in parentheses.
        """
        try:
            return await self.load_state(s2)
        except NotFound:
            # The one wording of status, watch, export and cancel for an unknown id.
            raise ValidationFailed("sessionID", unknown_roundtable(s2)) from None
        except StateError as exc:
            raise ValidationFailed("sessionID", f"{not_ours} ({exc})") from None

    # ------------------------------------------------------------------------------------------
    # Results, progress, status, shutdown
    # ------------------------------------------------------------------------------------------

    def starting(self) -> str | None:
        """While the daemon has not yet loaded every roundtable it resumes (the start-up scan
        runs, or waits for the server): what a request about one roundtable is answered
        (``"roundtabled is starting: …"``, docs/control-api.md); ``None`` once it has."""
        if self.ready.is_set():
            return None
        left = self.recovery.left
        if left is None:
            return "roundtabled is starting: looking for roundtables to recover"
        return f"roundtabled is starting: recovering {left} roundtable(s)"

    def take_result(self, s2: str, *, tool_call_id: str | None) -> dict[str, Any] | None:
        """The finished result for a poller. A poll from the waiting tool call takes it, with
        the signed mark its shim stores beside it in S1 (``deliveryMark``: how phase 4 sees in
        S1 that the result reached it, :func:`roundtabled.core.lifecycle.tool_call_holds_result`);
        once the fallback message was chosen, that poll is told so instead of getting the
        result a second time."""
        table = self._known(s2)
        if table is None or table.result is None:
            return None
        delivery = table.state.delivery
        if not tool_call_id or tool_call_id != delivery.tool_call_id:
            return table.result
        if not lifecycle.tool_may_take(table.state):
            # Names no session: phase 4 never reads it as the result (it has chosen already).
            note = "The roundtable's result was posted into this session as a message of its own."
            return {**table.result, "output": note, "summary": note, "postedAsMessage": True}
        table.result["consumedByTool"] = True
        table.poke()
        faults.checkpoint("result-taken")
        return {**table.result, "deliveryMark": lifecycle.delivery_mark(table.state, self.signer)}

    async def wait_result(self, s2: str, timeout: float) -> dict[str, Any] | None:
        """Wait up to ``timeout`` seconds for ``s2`` to finish; its result or ``None``.

        Raises:
            ValidationFailed: unknown roundtable.
        """
        table = self._known(s2)
        if table is None:
            raise ValidationFailed("sessionID", f"no roundtable {s2!r} is known to this daemon")
        if table.result is None and timeout > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(table.done.wait(), timeout)
        return table.result

    def subscribe(self, s2: str) -> asyncio.Queue[dict[str, Any]]:
        """A bounded queue of progress events of ``s2`` (``turn``, ``prompt``, ``phase``,
        ``done``).

        Raises:
            ValidationFailed: unknown roundtable.
        """
        table = self._known(s2)
        if table is None:
            raise ValidationFailed("sessionID", f"no roundtable {s2!r} is known to this daemon")
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue(PROGRESS_QUEUE_MAX)
        table.subscribers.append(q)
        if table.result is not None:
            q.put_nowait({"type": "done", **table.result})
        return q

    def unsubscribe(self, s2: str, q: asyncio.Queue[dict[str, Any]]) -> None:
        """Stop feeding ``q``."""
        table = self._known(s2)
        if table is not None and q in table.subscribers:
            table.subscribers.remove(q)

    async def stored_status(self, s2: str, *, result: bool = False) -> dict[str, Any] | None:
        """Status of a roundtable this process does not hold in memory (concluded before a
        restart), read from its signed state block in S2; ``None`` if it is not one."""
        try:
            state = await self.load_state(s2)
        except (StateError, NotFound):
            return None
        return status_of(Table(state=state), self.shell.clock(), result=result)

    def status(self, s2: str, *, result: bool = False) -> dict[str, Any] | None:
        """Status of a roundtable (control API ``GET /v1/roundtables/{ses}``)."""
        table = self._known(s2)
        return None if table is None else status_of(table, self.shell.clock(), result=result)

    async def close(self, window: float = 8.0) -> None:
        """Stop all workers within ``window`` seconds, then write the state of every roundtable
        whose state write after a fast handoff was still deferred (within the rest of the
        window), so that S2's state block names the turn in flight. A cancelled worker resumes
        after a restart either way (a stale block is caught up from the prompts' markers)."""
        deadline = time.monotonic() + window
        self.shell.closing = True
        tasks = [t.task for t in self.tables.values() if t.task is not None]
        for t in tasks:
            t.cancel()
        background = self.shell.background
        for b in list(background):
            b.cancel()
        if tasks or background:
            await asyncio.wait([*tasks, *background], timeout=window)
        stale = [t for t in self.tables.values() if t.unpersisted and t.state.active]
        if stale:
            flush = asyncio.gather(
                *(self.store.persist(t.state) for t in stale), return_exceptions=True
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(flush, max(0.5, deadline - time.monotonic()))
            for tb in stale:
                tb.unpersisted = False
