"""The product's records of a child session's messages, of the 1.x engine and the 2.x shell.

The rules of the core (:mod:`~roundtabled.core.history`, :mod:`~roundtabled.core.machine`,
:mod:`~roundtabled.core.opening`, :mod:`~roundtabled.core.lifecycle`) decide from these, never
from a server's JSON: the 1.x adapter (:mod:`roundtabled.opencode.v1_wire`) reads ``GET
/session/{id}/message`` into them, the 2.x shell builds them from its port's
:class:`~roundtabled.core.server_records.TurnOutcome`. docs/design.md, "The server port".

Pure: no I/O. Token counts are tokens, costs USD.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from roundtabled.core.state import Marker, ToolCallSummary, Usage

__all__ = [
    "BUSY_MARKERS",
    "AnswerView",
    "MessageView",
    "Status",
    "TextPart",
    "UserView",
    "busy_text",
    "status_of",
]

Status = Literal["idle", "busy", "retry", "unknown"]
"""A session's status as the rules read it (``unknown``: not read)."""


def status_of(statuses: Mapping[str, Status], session_id: str) -> Status:
    """The status of ``session_id`` among the ``statuses`` the server listed: the server lists
    only sessions that are not idle, so an absent one is idle (docs/opencode-server.md)."""
    return statuses.get(session_id, "idle")


@dataclass(frozen=True, slots=True)
class TextPart:
    """A text part of a message, as the rules decide about it: to hide it, or to show the verdict
    in words in its place (docs/design.md, "What the TUI shows"; docs/result.md, "The observer's
    verdict").

    ``message_id`` / ``id``: the message and the part (``msg_…`` / ``prt_…``). ``text``: its text
    (in a command, the text it is to have). ``handle``: the adapter's own copy of the part as the
    server stored it, opaque to the core (an edit rewrites the whole part in place, so the adapter
    sends it back with only the text or the visibility changed); never compared.
    """

    message_id: str
    id: str
    text: str
    handle: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class UserView:
    """A user message of S2.

    ``marker``: the daemon's verified marker, or ``None`` for a person's (or the server's)
    message. ``text``: visible text (parts neither ignored nor synthetic). ``synthetic``: every
    visible part is server-generated (e.g. auto-compaction's "Continue…"). ``compaction``: the
    message starts a compaction. ``state_block``: it carries the daemon's state block, alone
    (a ``noReply`` message of its own: ``marker`` is ``None``) or beside turn 1's prompt (one
    message: ``marker`` is that turn's; docs/design.md, "State format"). ``visible_parts``: its
    visible text parts (to hide them later; the state part, ``ignored``, is never among them).
    The flags default to a plain message: none of them.
    """

    id: str
    created: int
    marker: Marker | None
    text: str
    synthetic: bool = False
    compaction: bool = False
    state_block: bool = False
    visible_parts: tuple[TextPart, ...] = ()


@dataclass(frozen=True, slots=True)
class AnswerView:
    """An assistant message (one model step) of S2 (``docs/opencode-server.md``, "steps").

    ``created``: epoch ms. ``finish``: the step's finish reason (``stop``, ``tool-calls``, …) or
    ``None``. ``error_name`` / ``error_message``: the step's error, ``None`` when it has none.
    ``text``: the reply text of the step's last attempt. ``files``: names of attached files.
    ``summary``: a compaction's summary."""

    id: str
    parent_id: str | None
    agent: str
    created: int
    completed: bool
    finish: str | None
    error_name: str | None
    error_message: str | None
    text: str
    tool_calls: tuple[ToolCallSummary, ...]
    files: tuple[str, ...]
    usage: Usage
    summary: bool


MessageView = UserView | AnswerView


BUSY_MARKERS = ("Failed to execute statement", "database is locked", "UnknownError")
"""Texts of a 500 body meaning "the database was locked, nothing was written" (OpenCode on
SQLite; the body names only ``UnknownError``, its log the ``SQLiteError: database is locked``)."""


def busy_text(text: str | None) -> bool:
    """Whether an error text (an HTTP body, a ``session.error`` or a step's ``name: message``)
    names the server's transient write failure (see :data:`BUSY_MARKERS`)."""
    return bool(text) and any(marker in str(text) for marker in BUSY_MARKERS)
