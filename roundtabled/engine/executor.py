"""The one executor of the pure core's commands, for every roundtable of one daemon.

The machine (:func:`roundtabled.core.machine.decide`) and the independent opening
(:func:`roundtabled.core.opening.decide`) answer with commands; whichever way a decision was taken
(from a read of S2, from the event mirror of the fast handoff, or in the opening's room), its
commands are carried out here, each command type in one place. The callers only choose *when*:
the worker runs a decision's commands in order, the opening's room runs consecutive creations,
prompts or records together (round 1 is parallel). Crash points of the fault suite sit after each
effect (:mod:`roundtabled.faults`).
"""

from __future__ import annotations

import asyncio

from roundtabled import faults
from roundtabled.core import progress
from roundtabled.core.commands import (
    Abort,
    AbortSeat,
    Command,
    CreateSeatSession,
    Decision,
    Finalize,
    OpeningCommand,
    PersistRound,
    PersistState,
    Prompt,
    PromptSeat,
    RecordOpening,
    ReleaseResult,
    SeatSettled,
    Toast,
    TurnRecorded,
)
from roundtabled.core.server_records import SessionRef, TurnPrompt
from roundtabled.core.sides import turn_header
from roundtabled.core.state import EndReason, sign_marker
from roundtabled.engine.delivery import Finalizer
from roundtabled.engine.handoff import Handoff
from roundtabled.engine.shell import Shell
from roundtabled.engine.table import Table, enum_value
from roundtabled.errors import NotFound, TransportError


class Executor:
    """Carries out commands of the machine and of the opening round.

    Args:
        shell: the shared effects (client, signer, store, metrics).
        handoff: hides earlier prompts and sends prompts.
        finalizer: releases results.
    """

    def __init__(self, shell: Shell, handoff: Handoff, finalizer: Finalizer) -> None:
        self.shell = shell
        self.handoff = handoff
        self.finalizer = finalizer

    async def decision(self, table: Table, d: Decision, *, fast: bool = False) -> None:
        """Adopt the machine's decision ``d`` (its state and deadline) and run its commands in
        order; ``fast``: decided from the event mirror (counted as a fast handoff when it
        prompts)."""
        prev = table.state
        table.state = d.state
        table.deadline_ms = d.wake_at
        if fast and any(isinstance(c, Prompt) for c in d.commands):
            self.shell.metrics.fast_handoffs += 1
        for cmd in d.commands:
            await self.run(table, cmd)
        if prev.phase != table.state.phase:
            self.shell.changed()

    async def run(self, table: Table, cmd: Command | OpeningCommand) -> tuple[str, int] | None:
        """Carry out one command. Returns ``(session id, seat)`` of a seat's session that a
        :class:`CreateSeatSession` created (``None`` for every other command, and when the
        creation failed). Server failures of best-effort commands (an abort, an opening prompt
        or creation that the next read settles) are logged, never raised.

        Raises:
            TransportError, NotFound: a state write or a record failed (the worker's failure
                policy retries the pass).
        """
        shell = self.shell
        state = table.state
        match cmd:
            case Prompt():
                await self.start_turn(table, cmd)
            case PersistState():
                await shell.store.persist(state, index=cmd.index)
                table.unpersisted = False
            case ReleaseResult():
                self.finalizer.release_result(table)
            case Abort():
                await self.abort(table, state.session_id)
            case Toast():
                shell.show(state, cmd)
            case TurnRecorded():
                table.record_turn(cmd.entry)
                faults.checkpoint("turn-recorded")
            case Finalize():
                table.log.info(
                    "debate over (%s); finalizing", (state.end_reason or EndReason.COMPLETED).value
                )
                table.publish(
                    {
                        "type": "phase",
                        "phase": state.phase.value,
                        "endReason": enum_value(state.end_reason),
                    }
                )
            case PersistRound():
                await shell.store.persist(state)
                table.unpersisted = False
            case CreateSeatSession():
                return await self.create_seat_session(table, cmd)
            case PromptSeat():
                await self.prompt_seat(table, cmd)
            case AbortSeat():
                await self.abort(table, cmd.session_id)
            case SeatSettled():
                table.record_turn(cmd.entry)
                faults.checkpoint("opening-answered")
            case RecordOpening():
                s2 = state.session_id
                marker = sign_marker(cmd.marker, s2, shell.signer)
                await shell.port.post_once(
                    s2, cmd.message_id, cmd.text, label="── opening record ──", marker=marker
                )
                faults.checkpoint("opening-recorded")
        return None

    async def abort(self, table: Table, session_id: str) -> None:
        """Abort the turn running in ``session_id``; a failure is logged (the abort's grace,
        then the turn timeout, settle the turn either way)."""
        try:
            await self.shell.port.abort(SessionRef(session_id, table.state.directory))
        except TransportError as exc:
            table.log.warning("could not abort the turn in %s: %s", session_id, exc)

    async def start_turn(self, table: Table, cmd: Prompt) -> None:
        """Start the turn of a :class:`Prompt`. Decided from a read (``persist_first``): its
        intent and the hiding of old prompts first (concurrently), then the prompt (a crash in
        between is recovered from the written intent); a prompt whose message is the state
        block's carries the intent itself. Decided from the event mirror: the handoff's order,
        prompt first (:meth:`Handoff.start_turn`)."""
        if not cmd.persist_first:
            await self.handoff.start_turn(table, cmd)
            return
        if cmd.send and cmd.message_id == table.state.state_message_id:
            # Turn 1 sent again under its id (the server never stored it): the prompt carries
            # the state block, so sending it writes the intent; a PATCH first would meet a
            # message that does not exist.
            await self.handoff.hide(table, cmd.hide)
            if cmd.index:
                await self.shell.store.write_index(table.state)
            self.shell.metrics.read_handoffs += 1
            await self.handoff.prompt(table, cmd)
            table.unpersisted = False
            return
        await asyncio.gather(
            self.shell.store.persist(table.state, index=cmd.index),
            self.handoff.hide(table, cmd.hide),
        )
        table.unpersisted = False
        faults.checkpoint("intent-persisted")
        if cmd.send:
            self.shell.metrics.read_handoffs += 1
            await self.handoff.prompt(table, cmd)
        else:
            # Already in S2 (sent before a crash): adopted; look at it right away.
            table.log.info("the prompt for %s was already sent; adopted", cmd.agent)
            table.poke()

    async def create_seat_session(
        self, table: Table, cmd: CreateSeatSession
    ) -> tuple[str, int] | None:
        """Create one seat's session of the opening round; ``(its id, seat)`` when the server
        answered with a session adopted as a read would adopt it (by the seat its metadata
        names), else ``None`` (the next read adopts it if it exists after all)."""
        state = table.state
        s2 = state.session_id
        made: tuple[str, int] | None = None
        try:
            sid = await self.shell.port.create_seat_session(
                SessionRef(s2, state.directory), cmd.title, cmd.seat
            )
            if sid is not None:
                made = (sid, cmd.seat)
        except TransportError as exc:
            table.log.warning("opening: creating %s's session failed: %s", cmd.title, exc)
        faults.checkpoint("opening-session-created")
        table.poke()
        return made

    async def prompt_seat(self, table: Table, cmd: PromptSeat) -> None:
        """Send one seat's opening prompt in its own session; a failed POST is logged (the
        opening re-prompts only if the message is absent from that session)."""
        shell = self.shell
        side = table.state.options.sides.get(cmd.agent)
        label = cmd.label or turn_header(cmd.agent, 1, side, independent=True)
        marker = sign_marker(cmd.marker, cmd.session_id, shell.signer)
        prompt = TurnPrompt(
            cmd.message_id, cmd.agent, cmd.text, label, marker, table.state.models.get(cmd.agent)
        )
        try:
            await shell.port.send_prompt(cmd.session_id, prompt)
        except (NotFound, TransportError) as exc:
            table.log.warning("opening: prompt for %s failed: %s", cmd.agent, exc)
            return
        table.accepted.add(cmd.message_id)
        faults.checkpoint("opening-prompted")
        table.publish(progress.seat_prompt_item(cmd))
