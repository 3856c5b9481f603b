"""State blocks in S2: create, persist, load and authenticate them; hide parts; read S2.

A roundtable's state lives in S2 itself: an ``ignored`` part (kept by the server, never sent to
a model), updated in place by ``PATCH`` of that part and trusted only with a valid MAC of the
daemon's key (``docs/design.md``, "State format"). A fresh roundtable's block rides in turn 1's
prompt message (one ``prompt_async``, :meth:`StateStore.ride`); otherwise it is a ``noReply``
message of its own (:meth:`StateStore.create`). The session's metadata holds a small index
(phase, where the block is) for the start-up scan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Any

from roundtabled.core.card import state_card
from roundtabled.core.messages import MessageView, UserView
from roundtabled.core.server_records import SessionMessages, SignedState, StateBlock
from roundtabled.core.state import (
    RoundtableState,
    Signer,
    decode_state,
    encode_state,
    persisted_form,
)
from roundtabled.errors import NotFound, StateError, StateForgedError, TransportError
from roundtabled.opencode.port import V1Port

log = logging.getLogger("roundtabled.engine")

LANDING_WAIT_S = 1.0
"""How long a state write waits for the event showing that the prompt carrying the state block
(turn 1's, still running) was stored, before it reads S2 instead: the server stores a
``prompt_async``'s message after answering it, milliseconds later."""


class StateStore:
    """Reads and writes of S2 on behalf of the engine.

    Args:
        port: the 1.x server port (every read and write of S2 goes through it).
        signer: the daemon's MAC key (state blocks).
    """

    def __init__(self, port: V1Port, signer: Signer) -> None:
        self.port = port
        self.signer = signer
        self._riding: dict[str, asyncio.Event] = {}
        """S2 → set once S2 showed its state block stored, for a block sent inside a prompt
        (:meth:`ride`) and not yet seen stored (dropped then)."""

    def block(self, state: RoundtableState) -> StateBlock:
        """S2's state block for ``state`` as a new message carries it (its card and the signed
        state, under ``state``'s part id)."""
        # The card is drawn from the whole state (the persisted form drops the history while the
        # debate runs, and the card names the round).
        text, meta = encode_state(persisted_form(state), self.signer, card=state_card(state))
        assert state.state_part_id
        return StateBlock(state.state_part_id, SignedState(text, meta))

    async def create(self, state: RoundtableState) -> None:
        """Post S2's state block as a message of its own (a noReply message with the ids
        ``state`` names): a start without a first prompt (docs/design.md, "State format").

        Raises:
            TransportError: the server could not be reached or refused.
        """
        assert state.state_message_id
        await self.port.post_state(state.session_id, state.state_message_id, self.block(state))

    def ride(self, state: RoundtableState) -> StateBlock:
        """The state block for the prompt whose message is the block's (turn 1 of a fresh
        roundtable, :meth:`roundtabled.engine.handoff.Handoff.prompt`), sent by the caller.

        The server stores a ``prompt_async``'s message after it answered the POST, or never
        (a locked database): until S2 shows the block stored (:meth:`landed`), a write of the
        state waits for it (:meth:`persist`), so that a PATCH can neither meet a message not
        stored yet nor be overwritten by the prompt's own copy of the block.
        """
        self._riding.setdefault(state.session_id, asyncio.Event())
        return self.block(state)

    def riding(self, s2: str) -> bool:
        """Whether ``s2``'s state block was sent inside a prompt and not yet seen stored."""
        return s2 in self._riding

    def landed(self, s2: str) -> None:
        """S2 showed its state block stored (its part's ``message.part.updated``, or a read):
        writes go ahead from now on. Also drops the record of a roundtable no longer driven
        (a start that failed, a roundtable retired)."""
        event = self._riding.pop(s2, None)
        if event is not None:
            event.set()

    async def persist(self, state: RoundtableState, *, index: bool = False) -> None:
        """Write the state block in place (PATCH of its part); ``index`` also updates the session
        metadata used by the start-up scan (only on phase changes). A block that rode in a
        prompt is written only once S2 showed it stored (:meth:`_landing`).

        Raises:
            NotFound: S2 or its state block is gone.
            TransportError: the server could not be reached or refused (also: the prompt
                carrying the block, still the turn in flight, is not stored yet).
        """
        if state.session_id in self._riding and await self._landing(state):
            write: Awaitable[Any] = self.create(state)  # the old layout: a message of its own
        else:
            write = self.update(state)
        if not index:
            await write
            return
        results = await asyncio.gather(write, self.write_index(state), return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException):
                raise res

    async def update(self, state: RoundtableState) -> None:
        """PATCH the state block's part in place with ``state``.

        Raises:
            NotFound: S2 or its state block is gone.
            TransportError: the server could not be reached or refused.
        """
        assert state.state_message_id
        await self.port.write_state_part(
            state.session_id, state.state_message_id, self.block(state)
        )

    async def write_index(self, state: RoundtableState) -> None:
        """Write S2's index (the session metadata the start-up scan reads) for ``state``.

        Raises:
            NotFound: S2 is gone.
            TransportError: the server could not be reached or refused.
        """
        assert state.state_message_id and state.state_part_id
        await self.port.write_index(
            state.session_id,
            state.phase,
            state.state_message_id,
            state.state_part_id,
            finalized=state.finalization.toast_done,
        )

    async def _landing(self, state: RoundtableState) -> bool:
        """Wait until the state block that rode in a prompt is known stored. Returns True when
        it never will be: that prompt's turn is over (settled by the machine) and S2 does not
        hold the block (the server never stored the message: a locked database), so the block
        is written as a message of its own under the same ids (the layout of a start without
        a first prompt; the turn is never sent again).

        While the prompt is the turn in flight its message may still be on its way: the event
        showing the block stored is awaited (:data:`LANDING_WAIT_S`), then S2 is read.

        Raises:
            TransportError: (retryable) the prompt in flight is not stored yet.
        """
        s2 = state.session_id
        landed = self._riding[s2]
        pend = state.pending
        in_flight = pend is not None and pend.message_id == state.state_message_id
        if in_flight and not landed.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LANDING_WAIT_S):
                    await landed.wait()
        if landed.is_set():
            return False
        assert state.state_message_id and state.state_part_id
        if await self.port.has_part(s2, state.state_message_id, state.state_part_id):
            self.landed(s2)
            return False
        if in_flight:
            raise TransportError(
                f"turn 1's prompt carrying the state block of {s2} is not stored yet",
                retryable=True,
            )
        log.warning(
            "roundtable %s: the server never stored turn 1's prompt carrying the state block; "
            "writing the block as a message of its own",
            s2,
            extra={"session_id": s2},
        )
        self.landed(s2)
        return True

    async def load(self, s2: str) -> RoundtableState:
        """Read and authenticate S2's state block (through the session's index, else by a scan
        of S2's messages: also when the indexed message holds forged blocks only).

        Raises:
            NotFound: S2 does not exist.
            StateError: no trusted block (forged, unknown version, corrupt).
        """
        indexed = await self.port.indexed_state(s2)
        if indexed is not None:
            state = self.trusted(s2, *indexed)
            if state is not None:
                return state
        for message_id, blocks in await self.port.state_scan(s2):
            state = self.trusted(s2, message_id, blocks)
            if state is not None:
                return state
        raise StateError(f"{s2} holds no roundtable state written by this daemon")

    def trusted(
        self, s2: str, message_id: str, blocks: tuple[SignedState, ...]
    ) -> RoundtableState | None:
        """The first trusted state among ``blocks`` (read from S2's message ``message_id``), if
        any.

        A block without a valid MAC (pasted by a person, echoed by an agent) is logged and
        ignored. A signed block that cannot be read (unknown version, corrupt) raises
        :class:`StateError`: that roundtable is reported and skipped.
        """
        for block in blocks:
            try:
                return decode_state(block.text, block.metadata, s2, self.signer)
            except StateForgedError as exc:
                log.warning(
                    "roundtable %s: ignoring an untrusted [ROUNDTABLE META] block in message %s "
                    "(%s)",
                    s2,
                    message_id,
                    exc,
                    extra={"session_id": s2},
                )
        return None

    async def read_from(self, s2: str, message_id: str) -> tuple[tuple[MessageView, ...], bool]:
        """The views of S2's messages from ``message_id`` on (inclusive), and whether it
        exists (:meth:`roundtabled.opencode.port.V1Port.views_from`: a turn reads about its own
        messages only).

        Raises:
            NotFound: S2 is gone.
        """
        return await self.port.views_from(s2, message_id, self.signer)

    async def read_all(self, s2: str, state_message_id: str | None = None) -> SessionMessages:
        """Every message of S2 (one read): their views, oldest first, and the user messages
        other than ``state_message_id`` holding a pasted [ROUNDTABLE META] block."""
        return await self.port.session_messages(s2, self.signer, state_message_id)

    async def hide_all(self, s2: str, views: tuple[UserView, ...]) -> None:
        """Mark the visible parts of ``views`` (earlier turn prompts in ``s2``) ``ignored``.

        One view (every handoff) is awaited in this task: ``asyncio.gather`` would wrap it in a
        task of its own and start it one loop iteration later. Several (after a recovery) go
        concurrently. All are attempted; the first error is raised after (TransportError: the
        hiding failed; a part already gone is not an error).
        """
        if len(views) == 1:
            await self.hide_view(s2, views[0])
            return
        for res in await asyncio.gather(
            *(self.hide_view(s2, v) for v in views), return_exceptions=True
        ):
            if isinstance(res, BaseException):
                raise res

    async def hide_view(self, s2: str, view: UserView) -> None:
        """Mark the visible parts of one user message ``ignored``; a view known by id only (a
        prompt the plugin mode left visible, :func:`roundtabled.core.machine.plan_turn`) is
        read first."""
        if not view.visible_parts:
            await self.hide_message(s2, view.id)
            return
        for part in view.visible_parts:
            with contextlib.suppress(NotFound):
                await self.port.hide_part(s2, part)

    async def hide_message(self, s2: str, message_id: str) -> None:
        """Mark the visible text parts of message ``message_id`` ``ignored`` (gone: nothing)."""
        with contextlib.suppress(NotFound):
            await self.port.hide_message(s2, message_id)
