"""Permission and question requests raised by seats (in S2 or a sub-session of it).

Nobody sits at a roundtable to answer them, so the daemon answers each once: a permission by
the roundtable's policy (``reject``, ``allow-once``; ``ask`` leaves it to a person and says so
in a toast), a question with a text the model can read ("no human is here; state your
assumption"). Requests missed while the daemon was away are swept at every (re)connect.
"""

from __future__ import annotations

import logging
from typing import Any

from roundtabled.core.state import PermissionPolicy
from roundtabled.engine.shell import Shell
from roundtabled.engine.table import Table
from roundtabled.errors import TransportError
from roundtabled.opencode import events as ev

log = logging.getLogger("roundtabled.engine")

NO_HUMAN_ANSWER = (
    "No human is at this roundtable to answer questions (it is run by roundtabled). "
    "Do not ask; state your own assumption and continue the debate."
)
"""The answer given to a seat's ``question`` tool call."""
REJECT_MESSAGE = (
    "No human is at this roundtable to approve tools; roundtabled's permission policy "
    "is 'reject'. Continue the debate without this tool."
)
"""The message with a rejected permission (the model reads it)."""
OWNER_DEPTH = 4
"""How many parents are walked up from an unknown session to find its roundtable."""


class SeatRequests:
    """Answers the permission and question requests of every roundtable of one daemon.

    Args:
        shell: the shared effects.
        tables: the engine's live roundtables by S2's id (read, never changed).
        descendants: sub-sessions of those roundtables, child id → S2's id (filled in here too).
    """

    def __init__(self, shell: Shell, tables: dict[str, Table], descendants: dict[str, str]) -> None:
        self.shell = shell
        self.tables = tables
        self.descendants = descendants
        self.handled: set[str] = set()
        """Ids of the requests answered (or left to a person) by this process."""

    def on_event(self, event: ev.Event) -> bool:
        """Take a ``permission.asked`` or ``question.asked`` event (answered in the background).
        Returns False for any other event."""
        if event.type == ev.PERMISSION_ASKED:
            self.shell.spawn(self.answer_permission(event.properties, event.directory))
            return True
        if event.type == ev.QUESTION_ASKED:
            self.shell.spawn(self.answer_question(event.properties, event.directory))
            return True
        return False

    async def owner(self, session_id: str) -> Table | None:
        """The roundtable ``session_id`` belongs to (S2 itself or a sub-session of it)."""
        if session_id in self.tables:
            return self.tables[session_id]
        if session_id in self.descendants:
            return self.tables.get(self.descendants[session_id])
        # Unknown session: walk up its parents (a grandchild of S2 raised by a task subagent).
        chain: list[str] = []
        current = session_id
        for _ in range(OWNER_DEPTH):
            try:
                parent = (await self.shell.port.session(current)).parent_id
            except TransportError:
                return None
            if not parent:
                return None
            chain.append(current)
            if parent in self.tables:
                for c in chain:
                    self.descendants[c] = parent
                return self.tables[parent]
            current = parent
        return None

    async def _request_owner(self, props: dict[str, Any]) -> tuple[str, Table] | None:
        """``(request id, roundtable)`` of a permission/question request raised in one of our
        sessions (S2 or a sub-session of it) and not answered yet; ``None`` otherwise."""
        ids = self.shell.port.request_ids(props)
        if ids is None or ids[0] in self.handled:
            return None
        table = await self.owner(ids[1])
        return None if table is None else (ids[0], table)

    async def answer_permission(self, props: dict[str, Any], directory: str | None) -> None:
        """Answer one permission request by its roundtable's policy."""
        owned = await self._request_owner(props)
        if owned is None:
            return
        rid, table = owned
        policy = table.state.options.permission_policy
        what = self.shell.port.permission_summary(props)
        if policy == PermissionPolicy.ASK:
            self.handled.add(rid)
            await self.shell.toast_now(
                table.state,
                f"A roundtable seat asks for permission: {what}. "
                "Answer it in the session; the turn waits (bounded by the turn "
                "timeout).",
                "warning",
            )
            return
        reply = "once" if policy == PermissionPolicy.ALLOW_ONCE else "reject"
        message = None if reply == "once" else REJECT_MESSAGE
        try:
            await self.shell.port.reply_permission(
                rid, reply, message, directory or table.state.directory
            )
            self.handled.add(rid)
            table.log.info("permission %s for %s answered %s", rid, what, reply)
        except TransportError as exc:
            table.log.warning("could not answer permission %s: %s", rid, exc)

    async def answer_question(self, props: dict[str, Any], directory: str | None) -> None:
        """Answer one question request (no human is at the table); reject it if the answer is
        refused."""
        owned = await self._request_owner(props)
        if owned is None:
            return
        rid, table = owned
        port = self.shell.port
        where = directory or table.state.directory
        count = port.question_count(props)
        try:
            # An answer the model can read (a bare reject only says "dismissed"); the turn goes on.
            await port.answer_question(rid, [[NO_HUMAN_ANSWER]] * count, where)
            self.handled.add(rid)
            table.log.info("answered a question tool call: no human is at the table")
            return
        except TransportError as exc:
            table.log.debug("question %s: answer refused (%s); rejecting it", rid, exc)
        try:
            await port.reject_question(rid, where)
            self.handled.add(rid)
            table.log.info("rejected a question tool call: no human is at the table")
        except TransportError as exc:
            table.log.warning("could not reject question %s: %s", rid, exc)

    async def sweep(self) -> None:
        """Answer pending permission/question requests of our sessions (after a restart or a
        reconnect, events about them may have been missed)."""
        port = self.shell.port
        dirs = {t.state.directory for t in self.tables.values()}
        for d in dirs:
            try:
                for req in await port.permissions(d):
                    await self.answer_permission(req, d)
                for req in await port.questions(d):
                    await self.answer_question(req, d)
            except TransportError as exc:
                log.debug("request sweep of %s failed: %s", d, exc)
