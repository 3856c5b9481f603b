"""Finalization and exactly-once delivery of the result to S1: the shell of phase 4.

:func:`roundtabled.core.lifecycle.finalize` decides each step (release the result, deliver it to S1
once — through the waiting tool call when there is one, else as one ``noReply`` message whose id
is written before it is posted, only while S1 is idle — then the delimiter, the title and the
toast); the :class:`Finalizer` reads what a step needs and executes it (``docs/design.md``,
"exactly once").
"""

from __future__ import annotations

import contextlib
from typing import Any

from roundtabled import faults, ids
from roundtabled.core import lifecycle
from roundtabled.core.commands import ReleaseResult, Toast
from roundtabled.core.lifecycle import (
    EditPart,
    FinalFacts,
    PostDelimiter,
    PostResult,
    SetTitle,
    WriteState,
)
from roundtabled.core.messages import Status, TextPart
from roundtabled.core.state import DELIMITER_TEXT, EndReason, Marker, sign_marker
from roundtabled.engine.shell import Shell
from roundtabled.engine.table import Table
from roundtabled.errors import NotFound, TransportError


class Finalizer:
    """Phase 4 for every roundtable of one daemon."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    async def finalize(self, table: Table) -> bool:
        """One level-triggered step of phase 4. Returns True when every step is done."""
        facts = await self.facts(table)
        step = lifecycle.finalize(table.state, facts)
        if (
            table.state.delivery.delivered_via is None
            and step.state.delivery.delivered_via == "tool"
        ):
            faults.checkpoint("delivered")  # S1's tool part holds the result; not yet recorded
        for cmd in step.commands:
            if table.state.end_reason == EndReason.FAILED and isinstance(
                cmd, (WriteState, PostDelimiter, SetTitle)
            ):
                # The failure may be S2 refusing every write: the result still reaches S1, the
                # rest is written only if S2 takes it (docs/design.md, "Failures of the worker").
                try:
                    await self._run(table, cmd)
                except TransportError as exc:
                    table.log.warning("could not write to the failed roundtable's session: %s", exc)
                continue
            await self._run(table, cmd)
        table.state = step.state
        if step.done:
            table.log.info("roundtable %s", step.state.phase.value)
            return True
        table.deadline_ms = step.wake_at
        return False

    async def facts(self, table: Table) -> FinalFacts:
        """Read what the next step of phase 4 needs (the tool call in S1, the statuses)."""
        state = table.state
        consumed = bool(table.result and table.result.get("consumedByTool"))
        want_tool, want_statuses = lifecycle.final_reads(state)
        delivery = state.delivery
        tool_call: tuple[str | None, bool] | None = None
        if want_tool and state.parent_session_id and delivery.tool_message_id:
            status, output, metadata = await self.tool_state(
                state.parent_session_id, delivery.tool_message_id, delivery.tool_call_id or ""
            )
            holds = lifecycle.tool_call_holds_result(
                state, status, output, metadata, self.shell.signer
            )
            tool_call = (status, holds)
        observer_parts: tuple[TextPart, ...] | None = None
        prompts = lifecycle.reply_reads(state)
        if prompts is not None:
            observer_parts = await self.observer_parts(table, prompts)
        statuses: dict[str, Status] = {}
        if want_statuses:
            with contextlib.suppress(NotFound):
                statuses = await self.shell.port.statuses(state.directory)
        return FinalFacts(
            now=self.shell.clock(),
            result_id=ids.message_id(),
            delimiter_id=ids.message_id(),
            consumed=consumed,
            tool_call=tool_call,
            s1_busy=bool(state.parent_session_id) and (state.parent_session_id or "") in statuses,
            s2_busy=state.session_id in statuses,
            released_at=table.finished_at,
            observer_parts=observer_parts,
        )

    async def observer_parts(self, table: Table, prompts: tuple[str, ...]) -> tuple[TextPart, ...]:
        """The text parts of the observer's reply to ``prompts`` (message ids) in S2; none when
        there is nothing to read or S2 cannot be read now (the JSON block then stays: its
        showing is no part of the result, and is not worth holding phase 4 up)."""
        if not prompts:
            return ()
        s2 = table.state.session_id
        try:
            return await self.shell.port.reply_parts(s2, prompts)
        except (NotFound, TransportError) as exc:
            table.log.warning("could not read the observer's reply to show its verdict: %s", exc)
            return ()

    async def _run(self, table: Table, cmd: lifecycle.FinalCommand) -> None:
        shell = self.shell
        store = shell.store
        state = table.state
        s2 = state.session_id
        if isinstance(cmd, ReleaseResult):
            self.release_result(table)
            faults.checkpoint("final-persisted")
        elif isinstance(cmd, WriteState):
            table.state = cmd.state
            await store.persist(cmd.state, index=cmd.index)
        elif isinstance(cmd, PostResult):
            s1 = state.parent_session_id
            assert s1 is not None
            marker = Marker(kind="result", roundtable=s2)
            with contextlib.suppress(NotFound):  # S1 is gone: nothing to deliver to
                await shell.port.post_once(
                    s1,
                    cmd.message_id,
                    cmd.text,
                    label=f"── roundtable {s2} ──",
                    marker=sign_marker(marker, s1, shell.signer),
                )
            faults.checkpoint("delivered")
        elif isinstance(cmd, EditPart):
            try:
                await shell.port.edit_part(s2, cmd.part)
            except (NotFound, TransportError) as exc:
                # Only what S2 shows: the verdict is in the written state and the result.
                table.log.warning("could not show the observer's verdict in words: %s", exc)
            else:
                faults.checkpoint("verdict-shown")
        elif isinstance(cmd, PostDelimiter):
            if cmd.label:
                marker = Marker(kind="delimiter", roundtable=s2)
                await shell.port.post_once(
                    s2,
                    cmd.message_id,
                    DELIMITER_TEXT,
                    label="── roundtable concluded ──",
                    marker=sign_marker(marker, s2, shell.signer),
                )
            else:
                await shell.port.post_once(s2, cmd.message_id, DELIMITER_TEXT)
            if cmd.label:
                faults.checkpoint("delimiter-posted")
        elif isinstance(cmd, SetTitle):
            await shell.port.set_title(s2, cmd.title)
            faults.checkpoint("title-set")
        elif isinstance(cmd, Toast):
            shell.show(state, cmd)

    def release_result(self, table: Table) -> None:
        """Make the result of a debate that is over available to pollers (once).

        For a *completed* debate (the observer answered) the machine releases it as soon as the
        decision to finish is taken, before its state is written: that result is derived from
        S2's messages alone, so a crash before the write makes the same result again, and
        delivery stays exactly-once because a restarted daemon first checks the waiting tool
        call's part in S1. It saves the state write's round trip on the way to the result. Every
        other end (a cancel above all) lives only in memory until its state is written, so its
        result is released after the write (regression "cancelled result is never released
        before it is written").
        """
        if table.result is None:
            table.result = lifecycle.result_payload(table.state)
            table.done.set()
            table.finished_at = self.shell.clock()
            table.publish({"type": "done", **table.result})

    async def tool_state(
        self, s1: str, message_id: str, call_id: str
    ) -> tuple[str | None, str, dict[str, Any]]:
        """Status (pending | running | completed | error), output and metadata of the tool call
        in S1 that started the roundtable; ``(None, "", {})`` when its message is gone."""
        return await self.shell.port.tool_call(s1, message_id, call_id)
