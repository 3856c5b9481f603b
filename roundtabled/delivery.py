"""Finalization and exactly-once delivery of the result to S1.

Phase 4 of a roundtable, level-triggered (each call does what is left): the result is released
to pollers, delivered to S1 once — through the waiting tool call when there is one, else as one
``noReply`` message whose id is persisted before it is posted (and looked for before posting
again), only while S1 is idle (a noReply into a busy session triggers a model turn) — then the
delimiter, the title and the toast, each with a persisted flag or message id (``docs/design.md``,
"exactly once"). A step may run twice after a crash between the effect and its record: the effect
is looked for on the server before it is repeated.
"""

from __future__ import annotations

import contextlib
from typing import Any

from roundtabled import faults, ids, prompts, wire
from roundtabled.errors import NotFound, TransportError
from roundtabled.shell import Shell
from roundtabled.state import (
    CONCLUDED_SUFFIX,
    DELIMITER_TEXT,
    EndReason,
    Marker,
    RoundtableState,
    sign_marker,
)
from roundtabled.table import Table, enum_value

TOOL_POLL_GRACE_S = 130.0
"""How long a finished result waits for the tool shim to poll before going to S1 as a noReply
(the shim retries for up to 120 s while the daemon restarts)."""


def deliver_kind(state: RoundtableState) -> str:
    """What S1 gets: ``result`` (the observer's consolidation), ``interruption`` (S2 deleted),
    ``none`` (S1 deleted: nothing is posted anywhere)."""
    if state.end_reason == EndReason.PARENT_DELETED:
        return "none"
    if state.end_reason == EndReason.SESSION_DELETED:
        return "interruption"
    return "result"


def result_payload(state: RoundtableState, deliver: str) -> dict[str, Any]:
    """The result pollers get (control API) and whose ``text`` goes to S1."""
    if deliver == "interruption":
        text = prompts.interruption_text(state)
    else:
        text = prompts.result_text(state, usage_footer=state.options.usage_footer)
    return {
        "done": True,
        "sessionID": state.session_id,
        "summary": state.summary or text,
        "text": text,
        "phase": state.phase.value,
        "endReason": enum_value(state.end_reason),
        "title": state.title,
    }


class Finalizer:
    """Phase 4 for every roundtable of one daemon."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    async def finalize(self, table: Table) -> bool:
        """Level-triggered phase 4. Returns True when every step is done."""
        shell = self.shell
        state = table.state
        deliver = deliver_kind(state)
        self.release_result(table)
        write_s2 = state.end_reason not in (EndReason.SESSION_DELETED, EndReason.PARENT_DELETED)

        faults.checkpoint("final-persisted")
        if state.delivery.delivered_via is None:
            delivered = await self.deliver(table, deliver)
            if not delivered:
                table.deadline_ms = shell.clock() + 1000
                return False
            state = table.state
            if write_s2:
                write_s2 = await self._persist(table, state)

        if write_s2 and state.end_reason == EndReason.FAILED:
            # The failure may be S2 refusing every write: the result reached S1, the rest of
            # phase 4 is written only if S2 takes it (docs/design.md, "Failures of the worker").
            try:
                state, done = await self._finish_s2(table, state)
            except TransportError as exc:
                table.log.warning("could not finish the failed roundtable's session: %s", exc)
                done, write_s2 = True, False
            if not done:
                return False
        elif write_s2:
            state, done = await self._finish_s2(table, state)
            if not done:
                return False
        if not state.finalization.toast_done:
            msg = {
                EndReason.SESSION_DELETED: "Roundtable interrupted",
                EndReason.PARENT_DELETED: "Roundtable aborted: its parent session was deleted",
                EndReason.CANCELLED: "Roundtable cancelled",
                EndReason.FAILED: "Roundtable failed",
            }.get(state.end_reason or EndReason.COMPLETED, "Roundtable concluded")
            variant = "success" if msg == "Roundtable concluded" else "warning"
            shell.toast(state, f"{msg}: {state.title}", variant)
            state = state.model_copy(
                update={"finalization": state.finalization.model_copy(update={"toast_done": True})}
            )
            table.state = state
            if write_s2:
                await self._persist(table, state, index=True)
        table.log.info("roundtable %s", state.phase.value)
        return True

    async def _persist(self, table: Table, state: RoundtableState, *, index: bool = False) -> bool:
        """Write ``state`` to S2; for a failed roundtable only if S2 takes it (returns False when
        it refused)."""
        if state.end_reason != EndReason.FAILED:
            await self.shell.store.persist(state, index=index)
            return True
        try:
            await self.shell.store.persist(state, index=index)
        except TransportError as exc:
            table.log.warning("could not write the failed roundtable's state: %s", exc)
            return False
        return True

    async def _finish_s2(
        self, table: Table, state: RoundtableState
    ) -> tuple[RoundtableState, bool]:
        """The delimiter and the title of S2 (each once); returns the state after them and
        False when S2 is busy (try again later)."""
        shell = self.shell
        store = shell.store
        f = state.finalization
        if f.delimiter_message_id is None or not f.title_done:
            statuses = await shell.client.statuses(state.directory)
            if wire.is_busy(statuses, state.session_id):
                # Never inject into a busy S2 (a noReply there triggers a model turn).
                table.deadline_ms = shell.clock() + 500
                return state, False
        if f.delimiter_message_id is None:
            mid = ids.message_id()
            state = state.model_copy(
                update={"finalization": f.model_copy(update={"delimiter_message_id": mid})}
            )
            table.state = state
            await store.persist(state)
            marker = Marker(kind="delimiter", roundtable=state.session_id)
            await store.post_once(
                state.session_id,
                mid,
                [
                    wire.text_part(DELIMITER_TEXT),
                    wire.label_part(
                        "── roundtable concluded ──",
                        sign_marker(marker, state.session_id, shell.signer),
                    ),
                ],
            )
            faults.checkpoint("delimiter-posted")
        elif not state.finalization.title_done:
            await store.post_once(
                state.session_id, f.delimiter_message_id, [wire.text_part(DELIMITER_TEXT)]
            )
        if not state.finalization.title_done:
            base = state.title
            while base.endswith(CONCLUDED_SUFFIX):
                base = base[: -len(CONCLUDED_SUFFIX)]
            await shell.client.update_session(state.session_id, title=base + CONCLUDED_SUFFIX)
            faults.checkpoint("title-set")
            state = state.model_copy(
                update={"finalization": state.finalization.model_copy(update={"title_done": True})}
            )
            table.state = state
        return state, True

    def release_result(self, table: Table) -> None:
        """Make the result of a debate that is over available to pollers (once).

        For a *completed* debate (the observer answered) this is called as soon as the decision
        to finish is taken, before its state is written: that result is derived from S2's
        messages alone, so a crash before the write makes the same result again, and delivery
        stays exactly-once because a restarted daemon first checks the waiting tool call's part
        in S1 (:meth:`deliver`). It saves the state write's round trip on the way to the
        result. Every other end (a cancel above all) lives only in memory until its state is
        written, so its result is released after the write (regression "cancelled result is
        never released before it is written").
        """
        if table.result is None:
            table.result = result_payload(table.state, deliver_kind(table.state))
            table.done.set()
            table.finished_at = self.shell.clock()
            table.publish({"type": "done", **table.result})

    async def deliver(self, table: Table, deliver: str) -> bool:
        """Deliver the result to S1 exactly once. Returns True when settled."""
        shell = self.shell
        state = table.state
        s1 = state.parent_session_id
        if deliver == "none" or s1 is None:
            _set_delivery(table, "none")
            return True
        if table.result and table.result.get("consumedByTool"):
            _set_delivery(table, "tool")
            return True
        # Is a tool call waiting for this result (or did it already return it)?
        if state.delivery.tool_call_id and state.delivery.tool_message_id:
            tool_state, output = await self.tool_state(
                s1, state.delivery.tool_message_id, state.delivery.tool_call_id
            )
            if tool_state == "completed" and state.session_id in output:
                _set_delivery(table, "tool")  # the shim returned our result
                return True
            if tool_state in ("running", "pending"):
                now = shell.clock()
                waited_s = (now - (table.finished_at or now)) / 1000
                if waited_s < TOOL_POLL_GRACE_S:
                    return False  # the shim will poll and take it
        # Nobody waits: one noReply into S1, only while S1 is idle.
        try:
            statuses = await shell.client.statuses(state.directory)
        except NotFound:
            statuses = {}
        if wire.is_busy(statuses, s1):
            return False
        mid = state.delivery.no_reply_message_id
        if mid is None:
            mid = ids.message_id()
            state = state.model_copy(
                update={"delivery": state.delivery.model_copy(update={"no_reply_message_id": mid})}
            )
            table.state = state
            if state.end_reason not in (EndReason.SESSION_DELETED, EndReason.PARENT_DELETED):
                await self._persist(table, state)
        text = (table.result or {}).get("text") or ""
        marker = Marker(kind="result", roundtable=state.session_id)
        with contextlib.suppress(NotFound):  # S1 is gone: nothing to deliver to
            await shell.store.post_once(
                s1,
                mid,
                [
                    wire.text_part(text),
                    wire.label_part(
                        f"── roundtable {state.session_id} ──",
                        sign_marker(marker, s1, shell.signer),
                    ),
                ],
            )
        faults.checkpoint("delivered")
        _set_delivery(table, "no-reply")
        return True

    async def tool_state(self, s1: str, message_id: str, call_id: str) -> tuple[str | None, str]:
        """Status (pending | running | completed | error) and output of the tool call in S1 that
        started the roundtable; ``(None, "")`` when its message is gone."""
        try:
            msg = await self.shell.client.message(s1, message_id)
        except NotFound:
            return None, ""
        return wire.tool_call_state(msg, call_id)


def _set_delivery(table: Table, via: str) -> None:
    table.state = table.state.model_copy(
        update={"delivery": table.state.delivery.model_copy(update={"delivered_via": via})}
    )
