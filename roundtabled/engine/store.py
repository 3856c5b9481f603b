"""State blocks in S2: create, persist, load and authenticate them; hide parts; read S2.

A roundtable's state lives in S2 itself: a ``noReply`` user message whose only part is
``ignored`` (kept by the server, never sent to a model), updated in place by ``PATCH`` of that
part and trusted only with a valid MAC of the daemon's key (``docs/design.md``, "state
format"). The session's metadata holds a small index (phase, where the block is) for the
start-up scan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from roundtabled.core import wire
from roundtabled.core.card import state_card
from roundtabled.core.state import (
    RoundtableState,
    Signer,
    decode_state,
    encode_state,
    persisted_form,
)
from roundtabled.core.wire import UserView
from roundtabled.errors import NotFound, StateError, StateForgedError
from roundtabled.opencode.client import OpenCodeClient

log = logging.getLogger("roundtabled.engine")


class StateStore:
    """Reads and writes of S2 on behalf of the engine.

    Args:
        client: the OpenCode client.
        signer: the daemon's MAC key (state blocks).
    """

    def __init__(self, client: OpenCodeClient, signer: Signer) -> None:
        self.client = client
        self.signer = signer

    async def create(self, state: RoundtableState) -> None:
        """Post S2's state block (a noReply message with the ids ``state`` names).

        Raises:
            TransportError: the server could not be reached or refused.
        """
        text, meta = encode_state(persisted_form(state), self.signer, card=state_card(state))
        assert state.state_message_id and state.state_part_id
        part = {"id": state.state_part_id, **wire.label_part(text, meta)}
        await self.client.post_no_reply(state.session_id, [part], message_id=state.state_message_id)

    async def persist(self, state: RoundtableState, *, index: bool = False) -> None:
        """Write the state block in place (PATCH of its part); ``index`` also updates the session
        metadata used by the start-up scan (only on phase changes).

        Raises:
            NotFound: S2 or its state block is gone.
            TransportError: the server could not be reached or refused.
        """
        # The card is drawn from the whole state (the persisted form drops the history while the
        # debate runs, and the card names the round).
        text, meta = encode_state(persisted_form(state), self.signer, card=state_card(state))
        assert state.state_message_id and state.state_part_id
        part = wire.state_part(
            state.session_id, state.state_message_id, state.state_part_id, text, meta
        )
        write = self.client.update_part(state.session_id, state.state_message_id, part)
        if not index:
            await write
            return
        results = await asyncio.gather(
            write,
            self.client.update_session(
                state.session_id,
                metadata=wire.index_metadata(
                    state.phase,
                    state.state_message_id,
                    state.state_part_id,
                    finalized=state.finalization.toast_done,
                ),
            ),
            return_exceptions=True,
        )
        for res in results:
            if isinstance(res, BaseException):
                raise res

    async def load(self, s2: str) -> RoundtableState:
        """Read and authenticate S2's state block (through the session's index, else by a scan
        of S2's messages).

        Raises:
            NotFound: S2 does not exist.
            StateError: no trusted block (forged, unknown version, corrupt).
        """
        session = await self.client.get_session(s2)
        state_msg = wire.index_state_message(session)
        if state_msg:
            try:
                msg = await self.client.message(s2, state_msg)
                state = self.state_from_message(msg, s2)
                if state is not None:
                    return state
            except NotFound:
                pass
        msgs, _ = await self.client.messages(s2)
        for msg in msgs:
            state = self.state_from_message(msg, s2)
            if state is not None:
                return state
        raise StateError(f"{s2} holds no roundtable state written by this daemon")

    def state_from_message(self, msg: dict[str, Any], s2: str) -> RoundtableState | None:
        """The trusted state block in ``msg``, if any.

        A block without a valid MAC (pasted by a person, echoed by an agent) is logged and
        ignored. A signed block that cannot be read (unknown version, corrupt) raises
        :class:`StateError`: that roundtable is reported and skipped.
        """
        for text, metadata in wire.meta_text_parts(msg):
            try:
                return decode_state(text, metadata, s2, self.signer)
            except StateForgedError as exc:
                log.warning(
                    "roundtable %s: ignoring an untrusted [ROUNDTABLE META] block in message %s "
                    "(%s)",
                    s2,
                    wire.message_id(msg),
                    exc,
                    extra={"session_id": s2},
                )
        return None

    async def read_from(self, s2: str, message_id: str) -> tuple[list[dict[str, Any]], bool]:
        """S2's messages from ``message_id`` on (inclusive), and whether it exists, reading
        backwards from the newest in growing pages so that a turn reads about its own messages
        only (message ids ascend).

        Raises:
            NotFound: S2 is gone.
        """
        collected: list[dict[str, Any]] = []
        limit = 2
        before: str | None = None
        while True:
            page, cursor = await self.client.messages(s2, limit=limit, before=before)
            collected[:0] = page
            for i, m in enumerate(collected):
                if wire.message_id(m) == message_id:
                    return collected[i:], True
            oldest = wire.message_id(page[0]) if page else None
            if cursor is None or not page or (oldest is not None and oldest < message_id):
                return [], False
            before = cursor
            limit = min(limit * 2, 64)

    async def read_all(self, s2: str) -> list[dict[str, Any]]:
        """Every message of S2, oldest first."""
        msgs, _ = await self.client.messages(s2)
        return msgs

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
                await self.client.update_part(s2, view.id, wire.hidden(part))

    async def hide_message(self, s2: str, message_id: str) -> None:
        """Mark the visible text parts of message ``message_id`` ``ignored`` (gone: nothing)."""
        with contextlib.suppress(NotFound):
            msg = await self.client.message(s2, message_id)
            for part in wire.visible_text_parts(msg):
                await self.client.update_part(s2, message_id, wire.hidden(part))

    async def post_once(self, session: str, message_id: str, parts: list[dict[str, Any]]) -> None:
        """Post a noReply message unless a message with that id already exists.

        Raises:
            NotFound: the session is gone.
        """
        try:
            await self.client.message(session, message_id)
            return
        except NotFound:
            pass
        await self.client.post_no_reply(session, parts, message_id=message_id)
