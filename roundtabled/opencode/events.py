"""Typed events of the OpenCode server's SSE stream (docs/opencode-server.md, 'The event stream').

One SSE ``data:`` payload is one JSON object. From ``GET /global/event`` it is wrapped in an
envelope ``{"directory": D, "project": P, "payload": {<event>}}``; ``server.connected`` and
``server.heartbeat`` come as ``{"payload": {…}}`` only. From ``GET /event`` the event object comes
bare. :func:`parse_event` accepts both and returns an :class:`Event`.

Design and invariants:

- **Hints, not truth.** The daemon is level-triggered (design principle 1): an event only says
  *which* session to look at. So an :class:`Event` keeps the raw ``properties`` dict and exposes a
  few cheap accessors; it does not validate parts or messages. Full pydantic validation of every
  payload would cost far more than the parse itself on 8 MB ``message.part.updated`` events (a
  tool output or a long answer is sent whole in one event).
- **Never raise on content.** Unknown event types, unknown or missing fields and fields of the
  wrong JSON type are tolerated: the event is returned with ``type`` set and the accessor concerned
  gives ``None``. Only a payload that is not JSON, not a JSON object, or has no string ``type``
  gives ``None`` (the caller counts and logs it).
- **Speed.** Measured on the development machine (2 cores, orjson 3.13): ``orjson.loads`` of a
  190-byte ``message.part.delta`` envelope takes ~0.5 µs, of an 8.5 MB ``message.part.updated``
  envelope ~6 ms (10–12 ms measured on the loop under load, regression "huge events under
  load"). So the types whose body the daemon never reads (:data:`BODY_UNUSED`) are, above
  :data:`PEEK_THRESHOLD`, recognised from their first 1 KB instead (:func:`_peek_large`); any
  doubt (type or session id not found there) falls back to the full parse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

__all__ = [
    "MESSAGE_PART_DELTA",
    "MESSAGE_PART_UPDATED",
    "MESSAGE_REMOVED",
    "MESSAGE_UPDATED",
    "PERMISSION_ASKED",
    "PERMISSION_REPLIED",
    "QUESTION_ASKED",
    "SERVER_CONNECTED",
    "SERVER_HEARTBEAT",
    "SERVER_INSTANCE_DISPOSED",
    "SESSION_COMPACTED",
    "SESSION_CREATED",
    "SESSION_DELETED",
    "SESSION_ERROR",
    "SESSION_IDLE",
    "SESSION_STATUS",
    "SESSION_UPDATED",
    "SYNC",
    "Event",
    "is_heartbeat",
    "parse_event",
]

# --- event type names (docs/opencode-server.md, 'The event stream') ----------------------------
SERVER_CONNECTED: Final = "server.connected"
"""First event of every stream connection; ``properties`` is ``{}``."""
SERVER_HEARTBEAT: Final = "server.heartbeat"
"""Sent every 10.0 s on an idle or busy stream; ``properties`` is ``{}``."""
SERVER_INSTANCE_DISPOSED: Final = "server.instance.disposed"
"""``{directory}``; ``/event`` streams of that directory are closed by the server right after."""
SESSION_CREATED: Final = "session.created"
SESSION_UPDATED: Final = "session.updated"
SESSION_DELETED: Final = "session.deleted"
SESSION_STATUS: Final = "session.status"
"""``{sessionID, status: {type: "idle" | "busy" | "retry", …}}``."""
SESSION_IDLE: Final = "session.idle"
"""``{sessionID}``; fires twice on errors and aborts (gotcha 1) — a hint, not "turn done"."""
SESSION_ERROR: Final = "session.error"
"""``{sessionID?, error: {name, data}}``; ``sessionID`` may be absent."""
SESSION_COMPACTED: Final = "session.compacted"
MESSAGE_UPDATED: Final = "message.updated"
"""``{sessionID, info: Message}``."""
MESSAGE_REMOVED: Final = "message.removed"
"""``{sessionID, messageID}``."""
MESSAGE_PART_UPDATED: Final = "message.part.updated"
"""``{sessionID, part: Part, time}``; the part is sent whole (may be megabytes)."""
MESSAGE_PART_DELTA: Final = "message.part.delta"
"""``{sessionID, messageID, partID, field, delta}``."""
PERMISSION_ASKED: Final = "permission.asked"
"""``{id: "per_…", sessionID, permission, patterns, metadata, always, tool}``."""
PERMISSION_REPLIED: Final = "permission.replied"
"""``{sessionID, requestID, reply}``."""
QUESTION_ASKED: Final = "question.asked"
"""``{id, sessionID, …}`` (same shape as ``permission.asked`` for the id) [U]."""
SYNC: Final = "sync"
"""Durable per-session sequence events, only on ``/global/event``; no ``properties``."""

_SESSION_INFO_TYPES: Final = frozenset({SESSION_CREATED, SESSION_UPDATED, SESSION_DELETED})

_EMPTY: Final[dict[str, Any]] = {}


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _dict_or_empty(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else _EMPTY


@dataclass(frozen=True, slots=True)
class Event:
    """One server event.

    Attributes:
        type: the event type, e.g. ``"session.idle"``; any string (unknown types pass through).
        session_id: the session the event concerns, or ``None``. Taken from
            ``properties.sessionID``; else ``properties.info.id`` for ``session.*`` events (whose
            ``info`` is a Session); else ``properties.part.sessionID``; else
            ``properties.info.sessionID``.
        directory: the project directory from the ``/global/event`` envelope, or ``None`` (bare
            ``/event`` frames, ``server.*`` events).
        properties: the raw ``properties`` object (``{}`` when absent or not an object). Treat as
            read-only: it is shared, not copied.
        id: the ``evt_…`` id, or ``None``. The same id appears on ``/event`` and ``/global/event``
            (gotcha 25), but there is no replay by id.
    """

    type: str
    session_id: str | None = None
    directory: str | None = None
    properties: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    id: str | None = None

    @property
    def status_type(self) -> str | None:
        """``"idle"``, ``"busy"`` or ``"retry"`` for ``session.status``; ``None`` otherwise."""
        if self.type != SESSION_STATUS:
            return None
        return _str_or_none(_dict_or_empty(self.properties.get("status")).get("type"))

    @property
    def parent_id(self) -> str | None:
        """``info.parentID`` for ``session.created/updated/deleted``; ``None`` for root sessions."""
        if self.type not in _SESSION_INFO_TYPES:
            return None
        return _str_or_none(_dict_or_empty(self.properties.get("info")).get("parentID"))

    @property
    def message_id(self) -> str | None:
        """The message concerned: ``properties.messageID``, else ``part.messageID``, else
        ``info.id`` of a ``message.updated``; ``None`` if none applies."""
        props = self.properties
        mid = props.get("messageID")
        if isinstance(mid, str):
            return mid
        part = props.get("part")
        if isinstance(part, dict):
            return _str_or_none(part.get("messageID"))
        if self.type == MESSAGE_UPDATED:
            return _str_or_none(_dict_or_empty(props.get("info")).get("id"))
        return None

    @property
    def part_id(self) -> str | None:
        """``part.id`` (``message.part.updated``) or ``partID`` (``message.part.delta``)."""
        props = self.properties
        part = props.get("part")
        if isinstance(part, dict):
            return _str_or_none(part.get("id"))
        return _str_or_none(props.get("partID"))

    @property
    def part_type(self) -> str | None:
        """``part.type`` of a ``message.part.updated`` (``"text"``, ``"tool"``, ``"step-start"``…).

        ``message.part.delta`` carries no part type (its ``field`` is ``"text"`` even for
        reasoning parts); look it up by :attr:`part_id` from the preceding update.
        """
        return _str_or_none(_dict_or_empty(self.properties.get("part")).get("type"))

    @property
    def permission_id(self) -> str | None:
        """``properties.id`` (``per_…``) of ``permission.asked``; ``properties.requestID`` of
        ``permission.replied``; ``None`` otherwise."""
        if self.type == PERMISSION_ASKED:
            return _str_or_none(self.properties.get("id"))
        if self.type == PERMISSION_REPLIED:
            return _str_or_none(self.properties.get("requestID"))
        return None

    @property
    def question_id(self) -> str | None:
        """``properties.id`` of ``question.asked``; ``None`` otherwise."""
        if self.type == QUESTION_ASKED:
            return _str_or_none(self.properties.get("id"))
        return None

    @property
    def error_name(self) -> str | None:
        """``error.name`` of ``session.error`` (e.g. ``"APIError"``); ``None`` otherwise."""
        if self.type != SESSION_ERROR:
            return None
        return _str_or_none(_dict_or_empty(self.properties.get("error")).get("name"))


def parse_event(
    data: bytes | bytearray | memoryview | str, *, lazy_types: frozenset[str] = frozenset()
) -> Event | None:
    """Parse one SSE ``data:`` payload into an :class:`Event`.

    Accepts a ``/global/event`` envelope (``{"directory", "project", "payload"}`` or
    ``{"payload"}``) or a bare ``/event`` object. Returns ``None`` when the payload is not JSON,
    not an object, or has no string ``type``; never raises for content.

    ``lazy_types``: event types whose ``properties`` the caller never reads; a payload of such a
    type larger than :data:`PEEK_THRESHOLD` bytes yields an event with ``properties == {}``
    (type, session id and directory are still set). The daemon passes :data:`BODY_UNUSED`.
    """
    if lazy_types and len(data) > PEEK_THRESHOLD:
        peeked = _peek_large(data, lazy_types)
        if peeked is not None:
            return peeked
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    directory: str | None = None
    payload = obj.get("payload")
    if type(payload) is dict and "type" not in obj:
        d = obj.get("directory")
        directory = d if type(d) is str else None
        obj = payload
    etype = obj.get("type")
    if type(etype) is not str:
        return None
    props = obj.get("properties")
    if type(props) is not dict:
        props = {}
    sid = props.get("sessionID")
    if type(sid) is not str:
        sid = _fallback_session_id(etype, props)
    eid = obj.get("id")
    return Event(etype, sid, directory, props, eid if type(eid) is str else None)


PEEK_THRESHOLD = 256 * 1024
"""Payloads larger than this (bytes) of a type the daemon never reads the body of are not parsed."""
BODY_UNUSED = frozenset({MESSAGE_PART_UPDATED, MESSAGE_PART_DELTA, SYNC})
"""Event types whose body the daemon does not use (it reads messages over REST). ``sync``
repeats each ``message.part.updated`` whole in its ``syncEvent`` (OpenCode 1.18: a second 8 MB
line per huge part) and has no ``properties``, so it has no session id either."""
_PEEK_TYPE = re.compile(rb'"type"\s*:\s*"([a-z.]+)"')
_PEEK_SESSION = re.compile(rb'"sessionID"\s*:\s*"(ses_[A-Za-z0-9]+)"')
_PEEK_DIRECTORY = re.compile(rb'^\{\s*"directory"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _peek_large(
    data: bytes | bytearray | memoryview | str, lazy_types: frozenset[str]
) -> Event | None:
    """A cheap :class:`Event` for a huge ``message.part.*`` payload, or ``None`` to parse it.

    An 8 MB ``message.part.updated`` (a long reply, regression "huge events under load") takes
    ~6 ms of orjson on the event loop, delaying every other roundtable's handoff; the daemon only
    needs its type and session id (it reads the reply itself over REST). The type and the
    session id are taken from the first 1 KB (the server writes ``type`` and
    ``properties.sessionID`` before the part); when they are not there, the payload is parsed.
    A ``sync`` event has no ``properties`` (its full parse has no session id either): its type
    alone suffices.
    """
    head = bytes(data[:1024]) if not isinstance(data, str) else data[:1024].encode()
    m = _PEEK_TYPE.search(head)
    etype = m.group(1).decode() if m is not None else None
    if etype is None or etype not in lazy_types:
        return None
    session: str | None = None
    if etype != SYNC:
        sid = _PEEK_SESSION.search(head)
        if sid is None:
            return None
        session = sid.group(1).decode()
    d = _PEEK_DIRECTORY.search(head)
    directory = d.group(1).decode() if d else None
    return Event(etype, session, directory, {}, None)


def _fallback_session_id(etype: str, props: dict[str, Any]) -> str | None:
    info = props.get("info")
    if type(info) is dict and etype.startswith("session."):
        value = info.get("id")
        if type(value) is str:
            return value
    part = props.get("part")
    if type(part) is dict:
        value = part.get("sessionID")
        if type(value) is str:
            return value
    if type(info) is dict:
        value = info.get("sessionID")
        if type(value) is str:
            return value
    return None


def is_heartbeat(ev: Event) -> bool:
    """True for ``server.heartbeat`` (every 10.0 s; carries nothing but liveness)."""
    return ev.type == SERVER_HEARTBEAT
