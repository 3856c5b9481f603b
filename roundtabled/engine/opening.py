"""The worker's room for an independent opening round: read, ask the pure flow, execute.

While :func:`roundtabled.core.opening.running` holds, the worker hands each pass to
:meth:`OpeningRunner.step`: it reads the roundtable's session (status; its messages once every
seat is settled), its children (to adopt a seat's session created before a crash) and each seat's
session (status and messages from the seat's prompt on), asks :func:`roundtabled.core.opening.
decide` and has the engine's one executor (:mod:`roundtabled.engine.executor`) carry out the
commands in order. Events of the seats' sessions wake the roundtable (:meth:`OpeningRunner.owner`,
used by the engine's event routing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace

from roundtabled import ids
from roundtabled.core import machine, opening
from roundtabled.core.commands import (
    Cancel,
    CreateSeatSession,
    Observation,
    PromptSeat,
    RecordOpening,
)
from roundtabled.core.messages import status_of
from roundtabled.core.opening import OpeningObservation, SeatView
from roundtabled.core.state import RoundtableState
from roundtabled.engine.executor import Executor
from roundtabled.engine.shell import Shell
from roundtabled.engine.table import Table
from roundtabled.opencode import events as ev

DeletedCheck = Callable[[RoundtableState], Awaitable[tuple[bool, bool]]]
"""``(S2 or S1 is gone, S1 is gone)`` of a roundtable's state
(:meth:`roundtabled.engine.worker.Worker.check_deleted`)."""


async def _nothing() -> tuple[tuple[str, int], ...]:
    return ()


class OpeningRunner:
    """Runs the opening rounds of one daemon's roundtables.

    Args:
        shell: the shared effects (client, signer, clock, store).
        executor: carries out the opening's commands and the machine's decision that follows a
            finished round.
        check_deleted: whether the roundtable's sessions still exist.
    """

    def __init__(self, shell: Shell, executor: Executor, check_deleted: DeletedCheck) -> None:
        self.shell = shell
        self.executor = executor
        self.check_deleted = check_deleted
        self.errors: dict[str, tuple[int, str]] = {}
        """The first ``session.error`` of each seat's session (epoch ms, the server's text)."""

    # -- events ---------------------------------------------------------------------------------

    def owner(self, tables: dict[str, Table], parent: str | None, sid: str) -> Table | None:
        """The roundtable whose opening round runs in session ``sid`` (``parent``: the session's
        known parent, from the engine's descendants), or ``None``."""
        candidates: Iterable[Table] = (
            [tables[parent]] if parent is not None and parent in tables else tables.values()
        )
        for table in candidates:
            rnd = opening.current(table.state)
            if rnd is not None and not rnd.done and any(s.session_id == sid for s in rnd.seats):
                return table
        return None

    def on_event(self, table: Table, event: ev.Event) -> None:
        """An event of one of ``table``'s seat sessions: note an error, wake on what may settle
        a seat."""
        etype = event.type
        sid = event.session_id or ""
        if etype == ev.SESSION_ERROR:
            self.errors.setdefault(sid, (self.shell.clock(), self.shell.port.error_text(event)))
            table.poke()
        elif (
            etype in (ev.SESSION_IDLE, ev.SESSION_DELETED)
            or (etype == ev.SESSION_STATUS and event.status_type == "idle")
            or (etype == ev.MESSAGE_UPDATED and self.shell.port.completed_reply(event))
        ):
            table.poke()

    # -- passes ---------------------------------------------------------------------------------

    async def observe(self, table: Table) -> OpeningObservation:
        """Read the roundtable's session, its children and each seat's session."""
        shell = self.shell
        state = table.state
        s2 = state.session_id
        rnd = opening.current(state)
        # The status first: messages read after it hold everything up to it (an idle seat's
        # reply is there). The rest is independent and read together (round 1 is parallel).
        statuses = await shell.port.statuses(state.directory)
        need_children = rnd is None or any(s.session_id is None for s in rnd.seats)
        unsettled = [
            s
            for s in (rnd.seats if rnd is not None else ())
            if s.session_id is not None and s.entry is None
        ]
        kids, whole, reads = await asyncio.gather(
            shell.port.opening_seats(s2) if need_children else _nothing(),
            # The whole session (the state block and the records: a few messages): a decision
            # that settles the last seat records the openings at once, and looks for them here.
            shell.store.read_all(s2),
            asyncio.gather(
                *(shell.store.read_from(str(s.session_id), s.message_id) for s in unsettled)
            ),
        )
        seats: dict[str, SeatView] = {}
        for s, (views, found) in zip(unsettled, reads, strict=True):
            sid = str(s.session_id)
            error = self.errors.get(sid)
            if error is not None and error[0] < (s.prompted_at or 0):
                error = None
            seats[sid] = SeatView(
                status=status_of(statuses, sid),
                messages=views,
                found=found,
                accepted=s.message_id in table.accepted,
                error=error,
            )
        messages = whole.views
        return OpeningObservation(
            now=shell.clock(),
            status=status_of(statuses, s2),
            messages=messages,
            children=kids,
            seats=seats,
            plugin=await shell.plugins.current(table.state.directory),
        )

    async def step(self, table: Table) -> None:
        """One pass of the opening round of ``table``."""
        shell = self.shell
        if table.deleted_hint:
            deleted, parent_deleted = await self.check_deleted(table.state)
            table.deleted_hint = deleted
            if deleted:
                await self.abort_all(table)
                gone = Observation(
                    now=shell.clock(),
                    status="unknown",
                    deleted=True,
                    parent_deleted=parent_deleted,
                    new_id=ids.message_id(),
                )
                await self.executor.decision(table, machine.decide(table.state, gone))
                return
        cancel = table.take_cancel()
        obs = await self.observe(table)
        created = await self.decide_and_execute(table, obs, cancel)
        if created and table.cancel is None and not table.deleted_hint:
            # The seats' sessions were just created (their ids are the server's answers): the
            # next decision (write them, prompt every seat) needs no read of what is known. The
            # roundtable's session is unchanged (this pass wrote only its state block) and a new
            # session is idle and empty.
            after = replace(
                obs,
                now=shell.clock(),
                children=(*obs.children, *created),
                seats={**obs.seats, **{sid: SeatView(status="idle") for sid, _ in created}},
            )
            pokes = table.pokes
            await self.decide_and_execute(table, after, None)
            if table.pokes == pokes and table.cancel is None and not table.deleted_hint:
                # The creations' wakes were for this decision, taken here: a pass of reads
                # would only find the seats' turns starting (and load the server meanwhile).
                table.wake.clear()
                table.woke_at = None

    async def decide_and_execute(
        self, table: Table, obs: OpeningObservation, cancel: Cancel | None
    ) -> list[tuple[str, int]]:
        """Decide on ``obs`` and execute the decision. Returns ``(session id, seat)`` of every
        seat session this created, when every creation it asked for succeeded (else ``[]``)."""
        n = 2 * len(table.state.agents) + 1
        d = opening.decide(
            table.state,
            obs,
            ids=[ids.message_id() for _ in range(n)],
            new_id=ids.message_id(),
            cancel=cancel,
        )
        table.state = d.state
        table.deadline_ms = d.wake_at
        created: list[tuple[str, int]] = []
        asked = 0
        i = 0
        while i < len(d.commands):
            # Consecutive creations, prompts or records go out together (round 1 is parallel).
            j = i + 1
            kind = type(d.commands[i])
            if kind in (CreateSeatSession, PromptSeat, RecordOpening):
                while j < len(d.commands) and type(d.commands[j]) is kind:
                    j += 1
            done = await asyncio.gather(*(self.executor.run(table, c) for c in d.commands[i:j]))
            asked += sum(isinstance(c, CreateSeatSession) for c in d.commands[i:j])
            created += [c for c in done if c is not None]
            i = j
        if d.after is not None:
            await self.executor.decision(table, d.after)
            return []
        return created if asked and len(created) == asked else []

    async def abort_all(self, table: Table) -> None:
        """Abort every seat session still running (the roundtable is gone)."""
        rnd = opening.current(table.state)
        for s in rnd.seats if rnd is not None else ():
            if s.session_id is not None and s.entry is None:
                await self.executor.abort(table, s.session_id)
