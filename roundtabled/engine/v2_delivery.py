"""Phase 4 on OpenCode 2.x: the result into S1 exactly once, then S2's concluded title.

The decisions are :func:`roundtabled.core.lifecycle.finalize`'s, the same as on 1.x (docs/design.md,
"Exactly once"): the result goes to the waiting tool call when there is one, decided by what S1's
tool part holds (the signed ``deliveryMark`` the tool stores beside the result), else as one
message with no reply whose id is written before it is posted, only while S1 is idle. What 2.x
changes is how each step is read and done (docs/design.md, "The 2.x shell"):

- the tool part is read from the assistant record the 2.x tool names (its ``messageID``), the
  statuses from ``GET /api/session/active``;
- the message with no reply is a ``synthetic`` record with ``resume: false``
  (:meth:`~roundtabled.opencode.port.V2Port.deliver_result`): parked in an idle S1's inbox, read by
  S1's model once, before the person's next prompt; its id is derived from the delivery key, so a
  second post after a crash is the same record;
- no delimiter is posted into S2 (2.x has no message without a reply: a synthetic record would
  wait in S2's inbox as a queued prompt and be answered by whoever prompts S2 next); the
  concluded title marks the end, and the observer's reply keeps its verdict block (2.x has no
  message edit).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from roundtabled import faults
from roundtabled.core import lifecycle
from roundtabled.core.commands import ReleaseResult, Toast
from roundtabled.core.lifecycle import (
    EditPart,
    Final,
    FinalFacts,
    PostDelimiter,
    PostResult,
    SetTitle,
    WriteState,
)
from roundtabled.core.server_records import SessionRef
from roundtabled.core.state import EndReason, RoundtableState, Signer
from roundtabled.engine.shell import Clock
from roundtabled.errors import NotFound, RoundtableError
from roundtabled.opencode.port import V2Port, v2_delivery_id

__all__ = ["V2Delivery", "delivery_key", "take"]

log = logging.getLogger("roundtabled.engine.v2")

NO_DELIMITER = "none-on-2x"
"""What the state records as the delimiter's id on 2.x, where none is posted (module docstring):
phase 4 then counts that step as done."""
POSTED_AS_MESSAGE = "The roundtable's result was posted into this session as a message of its own."
"""What the waiting tool call is told once the fallback message was chosen (names no session:
phase 4 never reads it as the result)."""


def delivery_key(state: RoundtableState) -> str:
    """The key of this call's delivery into S1: S2 and the call's start (epoch ms), so that a
    later call on the same S2 (an extension) is a delivery of its own, and the same call's second
    post after a crash is the same record."""
    return f"{state.session_id}@{state.options.call_started_at or state.created_at}"


def take(
    state: RoundtableState, result: dict[str, Any], tool_call_id: str | None, signer: Signer
) -> tuple[dict[str, Any], bool]:
    """What a poll of the result gets, and whether it took it for the waiting tool call.

    Args:
        state: the roundtable (its ``delivery`` names the waiting tool call).
        result: the released result (:func:`roundtabled.core.lifecycle.result_payload`).
        tool_call_id: the poller's call id (``callID``), ``None`` for any other poller.

    The waiting tool call's poll gets the result with the signed mark its tool stores beside it
    in S1 (``deliveryMark``); once the fallback message was chosen it is told so instead
    (:func:`roundtabled.core.lifecycle.tool_may_take`), so S1 never gets both. Any other
    poller gets the result and takes nothing.
    """
    if not tool_call_id or tool_call_id != state.delivery.tool_call_id:
        return result, False
    if not lifecycle.tool_may_take(state):
        note = POSTED_AS_MESSAGE
        return {**result, "output": note, "summary": note, "postedAsMessage": True}, False
    return {**result, "deliveryMark": lifecycle.delivery_mark(state, signer)}, True


class V2Delivery:
    """Phase 4 of the 2.x shell's roundtables.

    Args:
        port: the server's port.
        signer: verifies the delivery mark in S1's tool part.
        clock: epoch milliseconds.
    """

    def __init__(self, port: V2Port, signer: Signer, clock: Clock) -> None:
        self.port = port
        self.signer = signer
        self.clock = clock
        #: called with each toast the server could not show (``V2Runner.on_toast``)
        self.on_toast: Callable[[RoundtableState, Toast], None] | None = None

    async def facts(
        self, state: RoundtableState, *, consumed: bool, released_at: int | None
    ) -> FinalFacts:
        """Read what the next step of phase 4 needs: the waiting tool call's part in S1 and
        whether S1 runs an execution (``consumed``: the tool call's poll took the result;
        ``released_at``: when the result was released, epoch ms)."""
        want_tool, want_statuses = lifecycle.final_reads(state)
        delivery = state.delivery
        s1 = state.parent_session_id
        tool_call: tuple[str | None, bool] | None = None
        if want_tool and s1 and delivery.tool_message_id:
            status, output, metadata = await self.port.tool_call(
                s1, delivery.tool_message_id, delivery.tool_call_id or ""
            )
            holds = lifecycle.tool_call_holds_result(state, status, output, metadata, self.signer)
            tool_call = (status, holds)
        s1_busy = False
        if want_statuses and s1 and delivery.delivered_via is None:
            s1_busy = await self.port.busy(s1)
        return FinalFacts(
            now=self.clock(),
            result_id=v2_delivery_id(delivery_key(state)),
            delimiter_id=NO_DELIMITER,
            consumed=consumed,
            tool_call=tool_call,
            s1_busy=s1_busy,
            # the title is a PATCH, which a busy S2 takes (no delimiter is posted on 2.x)
            s2_busy=False,
            released_at=released_at,
            observer_parts=None,  # 2.x has no message edit: the reply keeps its block
        )

    async def step(
        self,
        state: RoundtableState,
        *,
        consumed: bool,
        released_at: int | None,
        write: Callable[[RoundtableState], Awaitable[None]],
        release: Callable[[RoundtableState], None],
    ) -> Final:
        """One level-triggered step of phase 4: read, decide, execute in order. ``write`` writes
        a state into S2 (the shell's one writer), ``release`` makes the result available to
        pollers (once). Returns the step (its ``state``, ``done`` or ``wake_at``)."""
        facts = await self.facts(state, consumed=consumed, released_at=released_at)
        step = lifecycle.finalize(state, facts)
        if state.delivery.delivered_via is None and step.state.delivery.delivered_via == "tool":
            faults.checkpoint("delivered")  # S1's tool part holds the result; not yet recorded
        failed = state.end_reason == EndReason.FAILED
        for cmd in step.commands:
            try:
                await self._run(state, cmd, write, release)
            except RoundtableError as exc:
                if not failed or not isinstance(cmd, (WriteState, SetTitle)):
                    raise
                # The failure may be S2 refusing every write: the result still reaches S1, the
                # rest is written only if S2 takes it (docs/design.md, "Failures of the worker").
                log.warning("%s: could not write the end into S2: %s", state.session_id, exc)
        return step

    async def _run(
        self,
        state: RoundtableState,
        cmd: lifecycle.FinalCommand,
        write: Callable[[RoundtableState], Awaitable[None]],
        release: Callable[[RoundtableState], None],
    ) -> None:
        if isinstance(cmd, ReleaseResult):
            release(state)
        elif isinstance(cmd, WriteState):
            await write(cmd.state)
        elif isinstance(cmd, PostResult):
            s1 = state.parent_session_id
            assert s1 is not None
            try:
                await self.port.deliver_result(SessionRef(s1, None), cmd.text, delivery_key(state))
            except NotFound:
                log.warning("%s: its parent session is gone: the result is not delivered", s1)
            faults.checkpoint("delivered")
        elif isinstance(cmd, SetTitle):
            await self.port.client.update_session(state.session_id, title=cmd.title)
            faults.checkpoint("title-set")
        elif isinstance(cmd, Toast):
            shown = await self.port.notify(
                state.directory or "", "Roundtable", cmd.message, cmd.variant
            )
            if not shown and self.on_toast is not None:
                self.on_toast(state, cmd)
        elif isinstance(cmd, (PostDelimiter, EditPart)):
            pass  # none on 2.x (module docstring)
