"""Typed async client of OpenCode 2.x's HTTP API (``@opencode/cli`` 2.1.2): the V2 adapter's I/O.

Every fact here is pinned by a contract test against the real binary (``tests/contract/
test_v2_*.py``; docs/opencode-server.md, "2.x"). What differs from 1.x (:mod:`.client`):

- **Routes** are under ``/api/*`` and need HTTP Basic (user ``opencode``, the server's
  ``OPENCODE_SERVER_PASSWORD``); a 2.x server always has a password.
- **Location scoping**: a location route takes ``location[directory]=D`` (a deepObject query
  parameter) or the url-encoded header ``x-opencode-directory``; a plain ``?directory=D`` is
  silently ignored (the server's own directory is used). This client sends the query parameter.
  Routes by session id need no location.
- **Answers** wrap the result: ``{"data": …}`` (lists add ``"cursor": {"previous", "next"}``,
  location routes ``"location"``); :class:`V2Client` returns the unwrapped, typed value.
- **Errors** are ``{"_tag": "SessionNotFoundError", "message": …}``: 404 → :class:`V2NotFound`
  (a :class:`~roundtabled.errors.NotFound`), 401 → :class:`~roundtabled.errors.AuthFailed`, other
  4xx → :class:`V2Error` (not retryable), 5xx → :class:`V2Error` (retryable). ``tag`` keeps the
  ``_tag``.
- **A turn**: a prompt carries no agent and no model: :meth:`V2Client.switch_agent` and
  :meth:`V2Client.switch_model` change the session's (persistently; an agent's configured model
  is NOT applied), then :meth:`V2Client.prompt` admits a user message with a client-chosen ``msg_``
  id and ``metadata``. The turn ends with one ``session.execution.succeeded|failed|interrupted``
  event and one ``idle`` record; its reply is every assistant record after the delivered prompt
  up to that ``idle`` (records carry no ``parentID``): :func:`reply_of`.
- **Agents and plugins race**: the first ``GET /api/agent`` for a location not yet loaded
  answers ``[]`` or the built-ins only, ``GET /api/plugin`` ``[]`` (a while longer);
  :meth:`V2Client.agents` and :meth:`V2Client.plugins` wait until the list is stable.
- **Events**: ``GET /api/event`` frames ``{"id", "created", "type", "data", "location"?}``;
  :func:`parse_v2_event` turns one into a :class:`~roundtabled.opencode.events.Event` for the shared
  :class:`~roundtabled.opencode.stream.EventStream` (our own SSE decoder), see
  :func:`v2_event_stream`. The heartbeat is an SSE comment every 15 s.

Retries are :class:`~roundtabled.opencode.client.HttpTransport`'s: reads, switches, PATCH and
interrupt are retried on transient failures; creating a session and admitting a prompt are not
(a re-sent prompt with the same id returns the original admission and starts no new turn, but
still adds an empty ``idle`` record).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from roundtabled.errors import AuthFailed, NotFound, TransportError
from roundtabled.opencode.client import HttpTransport
from roundtabled.opencode.events import Event
from roundtabled.opencode.stream import EventStream

__all__ = [
    "EXECUTION_END_TYPES",
    "AgentInfo",
    "AssistantRecord",
    "IdleRecord",
    "LaterPrompt",
    "MessagePage",
    "ModelRef",
    "OtherRecord",
    "PluginInfo",
    "Record",
    "SessionInfo",
    "ToolStatus",
    "TurnEnd",
    "UserRecord",
    "V2Client",
    "V2Error",
    "V2Event",
    "V2NotFound",
    "later_prompts",
    "parse_v2_event",
    "plugins_reloaded",
    "reply_of",
    "tool_call_of",
    "turn_end",
    "v2_event_stream",
]

EXECUTION_END_TYPES = frozenset(
    {
        "session.execution.succeeded",
        "session.execution.failed",
        "session.execution.interrupted",
    }
)
"""The event that ends one execution (a turn) of a session; exactly one per execution."""

Outcome = Literal["succeeded", "failed", "interrupted"]


class V2Error(TransportError):
    """A 2.x error answer. ``tag`` is its ``_tag`` (``"ConflictError"``, …) or ``None``."""

    def __init__(self, message: str, *, status: int, tag: str | None) -> None:
        super().__init__(message, status=status, retryable=status >= 500)
        self.tag = tag


class V2NotFound(NotFound):
    """404 from a 2.x server: ``tag`` says what is missing (``"SessionNotFoundError"``,
    ``"MessageNotFoundError"``, ``"AgentNotFoundError"``, ``"LocationNotFoundError"``)."""

    def __init__(self, message: str, *, tag: str | None) -> None:
        super().__init__(message)
        self.tag = tag


# ── records ─────────────────────────────────────────────────────────────────────────────────────


class _Record(BaseModel):
    # The server adds fields between releases; only the ones read here are declared.
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


class ModelRef(_Record):
    """``{"id": "debater-1", "providerID": "scripted", "variant"?}`` (the model key is ``id``)."""

    id: str
    provider_id: str = Field(alias="providerID")
    variant: str | None = None

    def body(self) -> dict[str, str]:
        """The JSON of a ``switch_model``/``create_session`` body."""
        out = {"id": self.id, "providerID": self.provider_id}
        if self.variant is not None:
            out["variant"] = self.variant
        return out


class AgentInfo(_Record):
    """One item of ``GET /api/agent``."""

    id: str
    name: str | None = None
    mode: str | None = None
    hidden: bool = False
    color: str | None = None
    description: str | None = None
    system: str | None = None
    model: ModelRef | None = None


class PluginInfo(_Record):
    """One item of ``GET /api/plugin``: ``state.status`` is ``"active"`` or ``"failed"`` (then
    ``state.error`` says why)."""

    id: str | None = None
    source: dict[str, Any] = Field(default_factory=dict)
    state: dict[str, Any] = Field(default_factory=dict)

    @property
    def status(self) -> str | None:
        value = self.state.get("status")
        return value if isinstance(value, str) else None

    @property
    def path(self) -> str | None:
        """The plugin's file (``source.path`` of a ``local`` plugin), else ``None``."""
        value = self.source.get("path")
        return value if isinstance(value, str) else None


class SessionInfo(_Record):
    """``Session.Info``: ``outcome`` is the last execution's, ``metadata`` the whole object."""

    id: str
    parent_id: str | None = Field(default=None, alias="parentID")
    title: str | None = None
    agent: str | None = None
    model: ModelRef | None = None
    metadata: dict[str, Any] | None = None
    location: dict[str, Any] | None = None
    outcome: str | None = None
    time: dict[str, Any] = Field(default_factory=dict)


class UserRecord(_Record):
    """A delivered user prompt (``type: "user"``); ``metadata`` is the prompt's."""

    type: Literal["user"]
    id: str
    text: str = ""
    metadata: dict[str, Any] | None = None
    time: dict[str, Any] = Field(default_factory=dict)


class AssistantRecord(_Record):
    """One model step (``type: "assistant"``): ``content`` is ``[text | reasoning | tool]`` parts;
    ``finish`` ``stop|length|tool-calls|content-filter|error|unknown``; ``error`` on failure."""

    type: Literal["assistant"]
    id: str
    agent: str | None = None
    model: ModelRef | None = None
    content: list[dict[str, Any]] = Field(default_factory=list)
    finish: str | None = None
    error: dict[str, Any] | None = None
    tokens: dict[str, Any] | None = None
    time: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str:
        """The step's text parts joined (reasoning and tools left out)."""
        return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")


class IdleRecord(_Record):
    """The end of one execution (``type: "idle"``): ``outcome`` and, on failure, ``error``."""

    type: Literal["idle"]
    id: str
    outcome: Outcome | None = None
    error: dict[str, Any] | None = None
    time: dict[str, Any] = Field(default_factory=dict)


class OtherRecord(_Record):
    """Any other record: ``agent-switched``, ``model-switched``, ``synthetic``, ``compaction``,
    ``shell``, …"""

    type: str
    id: str


Record = UserRecord | AssistantRecord | IdleRecord | OtherRecord
_RECORD: TypeAdapter[UserRecord | AssistantRecord | IdleRecord] = TypeAdapter(
    UserRecord | AssistantRecord | IdleRecord
)


def record_of(raw: Mapping[str, Any]) -> Record:
    """The typed record of one ``Session.Message.Info`` (unknown types → :class:`OtherRecord`)."""
    if raw.get("type") in ("user", "assistant", "idle"):
        try:
            return _RECORD.validate_python(raw)
        except ValidationError:
            pass
    return OtherRecord.model_validate(raw)


class MessagePage(_Record):
    """One page of ``GET /api/session/{id}/message``: ``next``/``previous`` are opaque cursors
    (pass one alone to :meth:`V2Client.messages`)."""

    records: list[Record]
    next: str | None = None
    previous: str | None = None


class TurnEnd(_Record):
    """The end of one execution, from a ``session.execution.*`` event."""

    session_id: str
    outcome: Outcome
    event_id: str | None = None
    error: dict[str, Any] | None = None


LOCATION_SHUTDOWN = "location.shutdown"
"""A location's instance is gone, its plugins with it (``POST /api/location/reload`` rebuilds
every loaded location). Seen on 2.1.2: ``location.shutdown`` of the directory, then the new
instance's plugins run their setup, then ``plugin.updated`` (also sent at a location's first
load, after its plugins' setup: no sign of a change)."""


def plugins_reloaded(event: Event) -> str | None:
    """The directory whose instance ``event`` says shut down (its plugins with it), ``""`` for
    every directory (no location given), else ``None``."""
    if event.type != LOCATION_SHUTDOWN:
        return None
    return event.directory or ""


def turn_end(event: Event) -> TurnEnd | None:
    """:class:`TurnEnd` for a ``session.execution.succeeded|failed|interrupted`` event, else
    ``None``. Its id's suffix equals the matching ``idle`` record's (``evt_X`` ↔ ``msg_X``)."""
    if event.type not in EXECUTION_END_TYPES or event.session_id is None:
        return None
    outcome: Outcome = event.type.rsplit(".", 1)[1]  # type: ignore[assignment]
    error = event.properties.get("error")
    return TurnEnd(
        session_id=event.session_id,
        outcome=outcome,
        event_id=event.id,
        error=error if isinstance(error, dict) else None,
    )


def reply_of(
    records: Sequence[Record], prompt_id: str
) -> tuple[list[AssistantRecord], IdleRecord | None]:
    """The reply to the prompt ``prompt_id`` in ``records`` (oldest first) and the ``idle``
    record that ended its execution (``None`` while it runs, or when the prompt is not delivered
    yet).

    2.x records carry no ``parentID``: the reply is every assistant record after that user
    record, up to the next user record (a prompt steered into the same execution gets its own
    reply) or the ``idle`` record, whichever comes first."""
    start = next(
        (i for i, r in enumerate(records) if isinstance(r, UserRecord) and r.id == prompt_id), None
    )
    if start is None:
        return [], None
    reply: list[AssistantRecord] = []
    own = True
    for r in records[start + 1 :]:
        if isinstance(r, IdleRecord):
            return reply, r
        if isinstance(r, UserRecord):
            own = False
        elif own and isinstance(r, AssistantRecord):
            reply.append(r)
    return reply, None


@dataclass(frozen=True)
class LaterPrompt:
    """A user record delivered after a given prompt (:func:`later_prompts`): the record, its
    reply (the assistant records up to the next user or ``idle`` record) and whether the
    execution that answered it has ended (an ``idle`` record follows it)."""

    prompt: UserRecord
    reply: list[AssistantRecord]
    ended: bool


def later_prompts(
    records: Sequence[Record], prompt_id: str, *, until: Callable[[UserRecord], bool]
) -> list[LaterPrompt]:
    """The user records delivered after ``prompt_id`` (oldest first), each with its reply: those
    steered into its execution (a prompt posted into a busy session is answered there, in turn)
    and those of later executions (a prompt posted into the idle session starts one), up to the
    first user record for which ``until`` is true (the next turn of the caller's) or the end of
    ``records``."""
    start = next(
        (i for i, r in enumerate(records) if isinstance(r, UserRecord) and r.id == prompt_id), None
    )
    found: list[tuple[UserRecord, list[AssistantRecord]]] = []
    ended = 0  # how many of ``found`` an ``idle`` record follows
    if start is None:
        return []
    for r in records[start + 1 :]:
        if isinstance(r, IdleRecord):
            ended = len(found)
        elif isinstance(r, UserRecord):
            if until(r):
                break
            found.append((r, []))
        elif found and isinstance(r, AssistantRecord):
            found[-1][1].append(r)
    return [LaterPrompt(u, reply, i < ended) for i, (u, reply) in enumerate(found)]


ToolStatus = Literal["pending", "running", "completed", "error"]
"""A tool call's status as the 1.x engine names it (2.x's ``streaming`` is ``pending``: its
input is still being written)."""


def tool_call_of(record: Record, call_id: str) -> tuple[ToolStatus, str, dict[str, Any]]:
    """Status, result text and result metadata (``{}`` when none) of the tool call ``call_id``
    in one assistant record (a 2.x tool part: ``{"type": "tool", "id", "state": {"status",
    "content": [{"type": "text", "text"}], "metadata"}}``); ``("pending", "", {})`` when the
    record has no such part yet."""
    content = record.content if isinstance(record, AssistantRecord) else []
    for part in content:
        if part.get("type") == "tool" and part.get("id") == call_id:
            st = part.get("state") or {}
            raw = str(st.get("status") or "")
            status: ToolStatus = (
                raw if raw in ("running", "completed", "error") else "pending"  # type: ignore[assignment]
            )
            out = st.get("content")
            text = (
                "".join(str(c.get("text", "")) for c in out if isinstance(c, dict))
                if isinstance(out, list)
                else str(out or "")
            )
            meta = st.get("metadata")
            return status, text, meta if isinstance(meta, dict) else {}
    return "pending", "", {}


# ── events ──────────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class V2Event(Event):
    """An :class:`~roundtabled.opencode.events.Event` of the 2.x stream with ``seq``: a durable
    event's ``durable.seq``, its number in its session's own sequence (one more than the
    session's previous durable event: a gap is an event missed); ``None`` for a volatile event
    (deltas, ``session.usage.updated``)."""

    seq: int | None = field(default=None, compare=False)


def parse_v2_event(payload: bytes | bytearray | str) -> V2Event | None:
    """One ``GET /api/event`` ``data:`` payload → :class:`V2Event` (``properties`` = the
    event's ``data``, ``directory`` = ``location.directory``, ``session_id`` = ``data.sessionID``,
    ``seq`` = ``durable.seq``). ``None`` when it is not a JSON object with a string ``type``.
    Some session events carry no ``location`` (``session.execution.*``,
    ``session.usage.updated``): map them by session."""
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    etype = obj.get("type")
    if type(etype) is not str:
        return None
    data = obj.get("data")
    if type(data) is not dict:
        data = {}
    sid = data.get("sessionID")
    location = obj.get("location")
    directory = location.get("directory") if type(location) is dict else None
    eid = obj.get("id")
    durable = obj.get("durable")
    seq = durable.get("seq") if type(durable) is dict else None
    return V2Event(
        etype,
        sid if type(sid) is str else None,
        directory if type(directory) is str else None,
        data,
        eid if type(eid) is str else None,
        seq if type(seq) is int else None,
    )


HEARTBEAT_S = 15.0
"""Seconds between the 2.x server's ``: heartbeat`` comments."""


def v2_event_stream(
    server_url: str,
    on_event: Callable[[Event], None],
    *,
    password: str | None,
    on_connect: Callable[[], Awaitable[None]] | None = None,
    on_disconnect: Callable[[str], None] | None = None,
    **kwargs: Any,
) -> EventStream:
    """An :class:`EventStream` of ``GET /api/event`` (every location) decoding 2.x envelopes;
    liveness allows two missed 15 s heartbeats plus margin. ``kwargs`` go to
    :class:`EventStream`."""
    kwargs.setdefault("heartbeat_timeout", 2 * HEARTBEAT_S + 10.0)
    return EventStream(
        server_url,
        on_event,
        on_connect=on_connect,
        on_disconnect=on_disconnect,
        password=password,
        path="/api/event",
        parse=parse_v2_event,
        **kwargs,
    )


# ── the client ──────────────────────────────────────────────────────────────────────────────────


def _seg(value: str) -> str:
    return quote(value, safe="")


def _loc(directory: str | None) -> dict[str, str] | None:
    # deepObject form; a plain ``directory=`` is ignored by location routes.
    return {"location[directory]": directory} if directory else None


BUILTIN_AGENTS = frozenset(
    {"build", "plan", "general", "explore", "compaction", "title", "summary"}
)
"""The agents OpenCode 2.x brings itself (``GET /api/agent`` marks none of them, unlike 1.x's
``native``; docs/opencode-server.md, "2.x"): what ``roundtabled agents`` lists after the
debaters, as on 1.x."""
LIST_SETTLE_S = 0.5
"""Seconds a location's agent or plugin list must stay the same to be trusted the first time."""
LIST_WAIT_S = 15.0
"""Longest wait for a location's agent or plugin list to settle (seconds)."""
ItemT = TypeVar("ItemT")


class V2Client(HttpTransport):
    """Async client of one OpenCode 2.x server (arguments as
    :class:`~roundtabled.opencode.client.HttpTransport`; ``password`` is required by the server).
    """

    def __init__(self, base_url: str, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._settled_keys: set[tuple[str, str | None]] = set()

    def _error(self, method: str, path: str, status: int, raw: bytes | bytearray) -> TransportError:
        tag: str | None = None
        message = raw[:300].decode("utf-8", "replace").strip()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        if isinstance(body, dict):
            tag = body.get("_tag") if isinstance(body.get("_tag"), str) else None
            if isinstance(body.get("message"), str):
                message = body["message"]
        if status == 401:
            return AuthFailed(
                "OpenCode 2 rejected the credentials (401): set OPENCODE_SERVER_PASSWORD (or "
                "server_password in roundtabled's config) to the server's password"
            )
        text = f"{method} {path}: {tag or f'HTTP {status}'}: {message}"
        if status == 404:
            return V2NotFound(text, tag=tag)
        return V2Error(text, status=status, tag=tag)

    async def _data(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        retry: bool = True,
    ) -> Any:
        raw, _ = await self._request(method, path, params=params, body=body, retry=retry)
        if isinstance(raw, dict) and "data" in raw:
            return raw["data"]
        return raw

    # -- server ----------------------------------------------------------------------------------

    async def info(self) -> dict[str, Any]:
        """``GET /api/info`` → ``{"version": "2.1.2", "pid", "urls", "paths", "capabilities"}``."""
        raw, _ = await self._request("GET", "/api/info")
        return dict(raw)

    async def location(self, directory: str | None = None) -> dict[str, Any]:
        """``GET /api/location`` → ``{"directory", "project": {"id", …}}`` of ``directory``
        (default: the server's). Unknown directory → :class:`V2NotFound`
        (``LocationNotFoundError``)."""
        return dict(await self._data("GET", "/api/location", params=_loc(directory)))

    async def config(self, directory: str | None = None) -> list[dict[str, Any]]:
        """``GET /api/config``: the config sources, e.g. ``[{"type": "directory", "path"},
        {"type": "document", "path", "info": {normalized config: "agents", "model", …}}]``."""
        return list(await self._data("GET", "/api/config", params=_loc(directory)))

    async def plugins(
        self,
        directory: str | None = None,
        *,
        settle: float = LIST_SETTLE_S,
        wait: float = LIST_WAIT_S,
    ) -> list[PluginInfo]:
        """``GET /api/plugin``: the location's plugins (some 90 built-in ones included) and their
        state. Like :meth:`agents`, the first answers for a location not loaded yet are ``[]``
        (for longer than the agents'), so the first time per location this waits until the list
        is not empty and stayed the same for ``settle`` s (at most ``wait`` s)."""

        async def fetch() -> list[PluginInfo]:
            items = await self._data("GET", "/api/plugin", params=_loc(directory))
            return [PluginInfo.model_validate(p) for p in items]

        return await self._settled(
            ("plugin", directory),
            fetch,
            lambda p: str(p.source.get("path") or p.id or ""),
            set(),
            settle,
            wait,
        )

    async def providers(self, directory: str | None = None) -> list[dict[str, Any]]:
        """``GET /api/provider`` (raw items)."""
        return list(await self._data("GET", "/api/provider", params=_loc(directory)))

    async def models(self, directory: str | None = None) -> list[dict[str, Any]]:
        """``GET /api/model`` (raw items: ``{"id", "providerID", "limit", …}``)."""
        return list(await self._data("GET", "/api/model", params=_loc(directory)))

    async def default_model(self, directory: str | None = None) -> ModelRef:
        """``GET /api/model/default``: the model a new session runs on."""
        return ModelRef.model_validate(
            await self._data("GET", "/api/model/default", params=_loc(directory))
        )

    # -- agents ----------------------------------------------------------------------------------

    async def configured_agents(self, directory: str | None = None) -> set[str]:
        """Agent ids named by the location's config documents (``info.agents``), without the
        disabled ones: what a settled agent list must hold."""
        names: set[str] = set()
        for source in await self.config(directory):
            info = source.get("info") if isinstance(source, dict) else None
            agents = info.get("agents") if isinstance(info, dict) else None
            if isinstance(agents, dict):
                for name, cfg in agents.items():
                    if not (isinstance(cfg, dict) and cfg.get("disabled")):
                        names.add(str(name))
        return names

    async def agents(
        self,
        directory: str | None = None,
        *,
        settle: float = LIST_SETTLE_S,
        wait: float = LIST_WAIT_S,
    ) -> list[AgentInfo]:
        """``GET /api/agent`` of ``directory``.

        The first calls for a location the server has not loaded yet answer ``[]``, then the
        built-ins only, then everything (within about a second). So the first time per location
        this polls until the list holds every agent the config names
        (:meth:`configured_agents`) and has stayed the same for ``settle`` s, at most ``wait``
        s (then it returns the last list). Later calls for the location are one request.
        """
        configured: set[str] = set()
        if ("agent", directory) not in self._settled_keys:
            configured = await self.configured_agents(directory)
        return await self._settled(
            ("agent", directory),
            lambda: self._agents(directory),
            lambda a: a.id,
            configured,
            settle,
            wait,
        )

    async def _settled(
        self,
        key: tuple[str, str | None],
        fetch: Callable[[], Awaitable[list[ItemT]]],
        ident: Callable[[ItemT], str],
        must_hold: set[str],
        settle: float,
        wait: float,
    ) -> list[ItemT]:
        """``fetch()`` once if ``key`` (route, location) settled before; else poll it until the
        list is not empty, holds every id of ``must_hold`` and stayed the same for ``settle``
        s; after ``wait`` s the last list is returned (and ``key`` stays unsettled)."""
        if key in self._settled_keys:
            return await fetch()
        deadline = time.monotonic() + wait
        last = await fetch()
        since = time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.sleep(min(0.1, settle))
            now = await fetch()
            ids = [ident(x) for x in now]
            if ids != [ident(x) for x in last]:
                last, since = now, time.monotonic()
                continue
            if ids and must_hold <= set(ids) and time.monotonic() - since >= settle:
                self._settled_keys.add(key)
                return now
        return last

    async def _agents(self, directory: str | None) -> list[AgentInfo]:
        items = await self._data("GET", "/api/agent", params=_loc(directory))
        return [AgentInfo.model_validate(a) for a in items]

    # -- sessions --------------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        directory: str | None = None,
        parent_id: str | None = None,
        title: str | None = None,
        agent: str | None = None,
        model: ModelRef | None = None,
        metadata: Mapping[str, Any] | None = None,
        permissions: Sequence[Mapping[str, str]] | None = None,
        session_id: str | None = None,
    ) -> SessionInfo:
        """``POST /api/session`` (never retried: it creates). A child takes its parent's
        location; ``metadata`` absent → copied from the parent, given → used as is. An unknown
        ``parent_id`` → :class:`V2NotFound`; an unknown ``agent`` is accepted here and fails the
        first execution."""
        body: dict[str, Any] = {}
        for key, value in (
            ("id", session_id),
            ("parentID", parent_id),
            ("title", title),
            ("agent", agent),
            ("metadata", dict(metadata) if metadata is not None else None),
            ("permissions", [dict(p) for p in permissions] if permissions is not None else None),
        ):
            if value is not None:
                body[key] = value
        if model is not None:
            body["model"] = model.body()
        if directory and not parent_id:
            body["location"] = {"directory": directory}
        data = await self._data("POST", "/api/session", body=body, retry=False)
        return SessionInfo.model_validate(data)

    async def get_session(self, session_id: str) -> SessionInfo:
        """``GET /api/session/{id}``; deleted → :class:`V2NotFound`."""
        return SessionInfo.model_validate(
            await self._data("GET", f"/api/session/{_seg(session_id)}")
        )

    async def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """``PATCH /api/session/{id}`` (204). ``metadata`` REPLACES the whole object (no
        merge): read-modify-write."""
        body: dict[str, Any] = {}
        if title is not None:
            body["title"] = title
        if metadata is not None:
            body["metadata"] = dict(metadata)
        await self._request("PATCH", f"/api/session/{_seg(session_id)}", body=body)

    async def delete_session(self, session_id: str) -> None:
        """``DELETE /api/session/{id}`` (children go too; a busy session is interrupted
        first)."""
        await self._request("DELETE", f"/api/session/{_seg(session_id)}")

    async def children(self, session_id: str) -> list[SessionInfo]:
        """``GET /api/session?parentID={id}``: the child sessions (one page of up to 1000)."""
        items = await self._data(
            "GET", "/api/session", params={"parentID": session_id, "limit": "1000"}
        )
        return [SessionInfo.model_validate(s) for s in items]

    async def sessions(self, directory: str, *, limit: int = 200) -> list[SessionInfo]:
        """``GET /api/session?directory=D&limit=N&order=desc``: the newest ``limit`` sessions of
        ``directory``, children included (the filter is the plain query ``directory=``, not the
        location form; without it every location's sessions are listed)."""
        items = await self._data(
            "GET",
            "/api/session",
            params={"directory": directory, "limit": str(limit), "order": "desc"},
        )
        return [SessionInfo.model_validate(s) for s in items]

    async def active(self) -> dict[str, str]:
        """``GET /api/session/active`` → ``{session id: "running"}`` for every running session
        of every location (idle sessions are absent; there is no ``retry`` state)."""
        data = await self._data("GET", "/api/session/active")
        return {
            str(k): str(v.get("type")) if isinstance(v, dict) else str(v)
            for k, v in (data or {}).items()
        }

    async def interrupt(self, session_id: str) -> bool:
        """``POST /api/session/{id}/interrupt`` → whether an execution was running (``False``
        for the idle no-op). Unknown session → :class:`V2NotFound`."""
        raw, _ = await self._request("POST", f"/api/session/{_seg(session_id)}/interrupt")
        data = raw.get("data", raw) if isinstance(raw, dict) else {}
        return bool(data.get("interrupted")) if isinstance(data, dict) else False

    # -- messages --------------------------------------------------------------------------------

    async def messages(
        self,
        session_id: str,
        *,
        limit: int | None = None,
        order: Literal["asc", "desc"] | None = None,
        type: str | None = None,
        cursor: str | None = None,
    ) -> MessagePage:
        """One page of ``GET /api/session/{id}/message``. The server's default order is
        **desc** (newest first). ``cursor`` (a page's ``next``/``previous``) is sent without
        ``order`` (the cursor holds it; both → 400 ``InvalidCursorError``); ``type`` filters by
        record type and must be repeated with the cursor."""
        params: dict[str, str] = {}
        if limit is not None:
            params["limit"] = str(limit)
        if type is not None:
            params["type"] = type
        if cursor is not None:
            params["cursor"] = cursor
        elif order is not None:
            params["order"] = order
        raw, _ = await self._request(
            "GET", f"/api/session/{_seg(session_id)}/message", params=params
        )
        items = raw.get("data") or [] if isinstance(raw, dict) else []
        cur = raw.get("cursor") or {} if isinstance(raw, dict) else {}
        return MessagePage(
            records=[record_of(r) for r in items],
            next=cur.get("next") if isinstance(cur, dict) else None,
            previous=cur.get("previous") if isinstance(cur, dict) else None,
        )

    async def all_messages(self, session_id: str, *, page: int = 200) -> list[Record]:
        """Every record of the session, oldest first (pages of ``page`` asc)."""
        out: list[Record] = []
        current = await self.messages(session_id, limit=page, order="asc")
        while True:
            out.extend(current.records)
            if not current.next or not current.records:
                return out
            current = await self.messages(session_id, limit=page, cursor=current.next)

    async def message(self, session_id: str, message_id: str) -> Record:
        """``GET /api/session/{id}/message/{mid}``; missing → :class:`V2NotFound`
        (``MessageNotFoundError``)."""
        data = await self._data(
            "GET", f"/api/session/{_seg(session_id)}/message/{_seg(message_id)}"
        )
        return record_of(data)

    # -- a turn ----------------------------------------------------------------------------------

    async def switch_agent(self, session_id: str, agent: str) -> None:
        """``POST /api/session/{id}/agent`` (204): later executions run as ``agent``. Not
        validated: an unknown agent fails the next execution ("Agent not found")."""
        await self._request("POST", f"/api/session/{_seg(session_id)}/agent", body={"agent": agent})

    async def switch_model(self, session_id: str, model: ModelRef) -> None:
        """``POST /api/session/{id}/model`` (204): later executions use ``model``. Not
        validated: an unknown model fails the next execution (``provider.no-route``)."""
        await self._request(
            "POST", f"/api/session/{_seg(session_id)}/model", body={"model": model.body()}
        )

    async def prompt(
        self,
        session_id: str,
        text: str,
        *,
        message_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        delivery: Literal["steer", "queue"] | None = None,
        resume: bool | None = None,
    ) -> dict[str, Any]:
        """``POST /api/session/{id}/prompt``: admit one user message (never retried here).

        ``message_id`` must start ``msg_``; re-sending a used id returns the original admission
        and starts no turn. ``delivery``: ``"steer"`` (default: joins the running execution at
        its next step boundary) or ``"queue"`` (a later execution); a prompt to a busy session
        gets its own reply either way. ``resume=False`` parks it in the inbox until the next
        execution. Returns the admission (``{"id", "type": "user", "payload", "delivery"}``)."""
        body: dict[str, Any] = {"text": text}
        if message_id is not None:
            body["id"] = message_id
        if metadata is not None:
            body["metadata"] = dict(metadata)
        if delivery is not None:
            body["delivery"] = delivery
        if resume is not None:
            body["resume"] = resume
        data = await self._data(
            "POST", f"/api/session/{_seg(session_id)}/prompt", body=body, retry=False
        )
        return dict(data)

    async def synthetic(
        self,
        session_id: str,
        text: str,
        *,
        message_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        delivery: Literal["steer", "queue"] | None = None,
        resume: bool | None = None,
    ) -> dict[str, Any]:
        """``POST /api/session/{id}/synthetic``: admit a ``synthetic`` record (sent to the model
        as a user message). With ``resume=False`` it is parked in the inbox (:meth:`inbox`, not in
        :meth:`messages`) until the next execution delivers it; with ``resume`` true (the
        server's default) it starts one. Re-sending a used ``message_id`` returns the stored
        record (parked or delivered) and adds no second one. Never retried here."""
        body: dict[str, Any] = {"text": text}
        for key, value in (
            ("id", message_id),
            ("description", description),
            ("metadata", dict(metadata) if metadata is not None else None),
            ("delivery", delivery),
            ("resume", resume),
        ):
            if value is not None:
                body[key] = value
        data = await self._data(
            "POST", f"/api/session/{_seg(session_id)}/synthetic", body=body, retry=False
        )
        return dict(data)

    async def inbox(self, session_id: str) -> list[dict[str, Any]]:
        """``GET /api/session/{id}/inbox``: items admitted and not delivered yet (``{"id",
        "type": "user" | "synthetic", "payload": {"text", "metadata"?}, "delivery"}``). A prompt
        whose execution failed before delivering it (an unknown agent) stays here."""
        return list(await self._data("GET", f"/api/session/{_seg(session_id)}/inbox") or [])
