"""An in-memory OpenCode server for fast engine unit tests (kopf's fake API, aiogram's
MockedSession): :class:`FakeOpenCode` has the public methods of
:class:`roundtabled.opencode.client.OpenCodeClient`, keeps sessions, messages and parts in dicts,
runs scripted model turns as asyncio tasks and sends the server's event JSON to a subscriber.

Every behaviour here is pinned by ``tests/contract/test_fake_matches_server.py``, which runs the
same scenario against this fake and against the real ``opencode serve`` with the scripted LLM:
where the two differ, the contract test fails, not an engine test that trusts the fake.

What the fake does (and the real server does, see ``docs/opencode-server.md``):

- Sessions: ``POST /session`` with ``parentID``/``title``/``metadata``; ``PATCH`` of title and
  metadata (metadata replaces the whole object); ``DELETE`` (children first, ``session.deleted``
  each) after which every route of the session is a 404 (:class:`NotFound`); a busy session that
  is deleted keeps "generating" and then fails with ``session.error`` and idle events.
- Prompts: ``prompt_async`` stores the user message (client-chosen ``messageID``; a reused id
  appends parts), goes busy, runs one model request per step (scripted reply, else a default
  text), and ends ``session.status idle`` + ``session.idle``. A prompt to a busy session is queued;
  the loop then answers only the newest user message. ``model`` is sticky per session; ``agent``
  is not. An unknown model stores the user message, goes busy, sends ``session.error`` ("Model not
  found"), idle, a second ``session.error``, and no reply (no model request). An unknown agent:
  two ``session.error``, nothing stored, no busy/idle.
- ``noReply`` messages: stored with no busy/idle and no model request (in a busy session they
  become the newest user message and are answered).
- ``ignored`` text parts are kept and listed but never shown to the model: every model request is
  recorded (:class:`ModelRequest`) with the messages the model saw.
- ``PATCH`` of a part replaces it in place (``message.part.updated``).
- Abort of a running turn: ``session.error`` ``MessageAbortedError``, idle, the reply stored with
  that error (partial text kept, no finish), idle again; abort of an idle session: one idle pair.
- Provider error (``HttpError`` 4xx): ``session.error`` ``APIError``, idle, the errored reply,
  idle again. 429/5xx are retried (``session.status retry``) up to 5 times.
- ``GET /session/status`` lists only busy/retry sessions; message listing pages newest-first with
  ``limit``/``before`` and a cursor.
- Permission / question requests of a seat's tool (:class:`AskPermission`, :class:`AskQuestion`):
  the session stays busy until they are answered; a reject with a message is feedback (the model
  is called again), a bare reject ends the turn.

Time: :class:`FakeClock` (epoch ms from the event loop's clock). Under ``looptime`` (the engine
tests) the loop's clock is virtual, so turn timeouts and graces pass without sleeping; a test
moves time forward with ``await clock.advance(seconds)``.

Faults: :meth:`FakeOpenCode.fail_next` makes the next call(s) of a method raise;
:attr:`FakeOpenCode.event_filter` can drop, duplicate or delay events; :meth:`FakeOpenCode.emit`
sends a stale or forged event.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import secrets
import sys
import time
import types
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from roundtabled import ids
from roundtabled.errors import NotFound, TransportError
from roundtabled.offline.scripted_actions import Action, Hang, HttpError, Stall, Text, ToolCalls
from roundtabled.offline.scripted_llm import RequestLog, default_text
from roundtabled.opencode import events as ev

VERSION = "1.18.33"
EPOCH0_MS = 1_796_000_000_000
"""The fake clock's time zero (epoch ms, late 2026): fixed, so timestamps are reproducible."""
STEP_SECONDS = 0.05
"""Virtual seconds one model step takes when its action has no delays (so a turn is observably
busy for a moment, as on the real server)."""
RETRY_WAITS_S = (2.2, 4.9, 8.2, 19.1, 36.5)
"""Back-off between retries of a 429/5xx model request (the real server's measured waits)."""
Json = dict[str, Any]


# ----------------------------------------------------------------------------------------------
# Clock
# ----------------------------------------------------------------------------------------------


class FakeClock:
    """Epoch milliseconds derived from the running event loop's clock.

    ``now_ms()`` = :data:`EPOCH0_MS` + ms since the clock was first read. With ``looptime``
    active the loop's time is virtual: it advances only when every task waits, straight to the
    next timer, so ``await clock.advance(300)`` takes no real time.
    """

    def __init__(self, start_ms: int = EPOCH0_MS) -> None:
        self.start_ms = start_ms
        self._t0: float | None = None

    def _loop_time(self) -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    def monotonic(self) -> float:
        """Seconds (loop time)."""
        t = self._loop_time()
        if self._t0 is None:
            self._t0 = t
        return t - self._t0

    def now_ms(self) -> int:
        """Epoch milliseconds."""
        return self.start_ms + int(self.monotonic() * 1000)

    def time(self) -> float:
        """Epoch seconds (for code that calls ``time.time()``)."""
        return self.now_ms() / 1000

    async def advance(self, seconds: float) -> None:
        """Let ``seconds`` of (virtual) time pass, running everything that falls due."""
        await asyncio.sleep(seconds)

    def time_module(self) -> types.SimpleNamespace:
        """A stand-in for the ``time`` module: ``time``/``monotonic`` from this clock,
        ``perf_counter``/``thread_time``/``sleep`` real (metrics only)."""
        return types.SimpleNamespace(
            time=self.time,
            monotonic=self.monotonic,
            perf_counter=time.perf_counter,
            perf_counter_ns=time.perf_counter_ns,
            thread_time=time.thread_time,
            sleep=time.sleep,
        )

    def install(self, monkeypatch: Any, prefix: str = "roundtabled") -> list[str]:
        """Point every loaded ``roundtabled`` module's ``now_ms`` and ``time`` at this clock
        (module globals, so whatever module the engine split puts them in). Returns the patched
        ``module.name`` list."""
        patched: list[str] = []
        fake_time = self.time_module()
        for name, module in list(sys.modules.items()):
            if module is None or not (name == prefix or name.startswith(prefix + ".")):
                continue
            if name.startswith(prefix + ".testing"):
                continue
            if callable(getattr(module, "now_ms", None)):
                monkeypatch.setattr(module, "now_ms", self.now_ms)
                patched.append(f"{name}.now_ms")
            if getattr(module, "time", None) is time:
                monkeypatch.setattr(module, "time", fake_time)
                patched.append(f"{name}.time")
        return patched


# ----------------------------------------------------------------------------------------------
# Fake-only scripted actions (the real server gets these from a tool that asks)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AskPermission:
    """A step that calls ``tool`` which needs ``permission``: the session stays busy until the
    request is answered. ``reject`` → the tool part errors; without a message the turn ends (no
    further model request), with one the model is called again with it as feedback;
    ``once``/``always`` → the tool completes and the model is called again. A scripted call of a
    tool listed in :attr:`FakeOpenCode.permission_agents` for the seat asks the same way."""

    permission: str = "external_directory"
    patterns: tuple[str, ...] = ("/etc/*",)
    tool: str = "read"


@dataclass(frozen=True)
class AskQuestion:
    """A step that calls the ``question`` tool: busy until answered (the answer becomes the tool
    output and the model is called again) or rejected (the turn ends)."""

    questions: tuple[dict[str, Any], ...] = (
        {"question": "Which one?", "header": "Pick", "options": [{"label": "A"}]},
    )


FakeAction = Action | AskPermission | AskQuestion


# ----------------------------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------------------------


@dataclass
class ModelRequest:
    """One model request the fake made (what the scripted LLM records for the real server).

    ``messages``: OpenAI-style ``{"role", "content"}`` dicts of everything the model saw (no
    system message; ``ignored`` parts left out). ``model``: the model id. ``kind``: ``"turn"`` or
    ``"tool-followup"``. ``action``: the scripted action kind served, or ``"default"``.
    """

    index: int
    session_id: str
    agent: str
    model: str
    kind: str
    messages: list[dict[str, Any]]
    last_user_text: str
    action: str = "default"
    reply_text: str = ""
    at_ms: int = 0


@dataclass
class FakeSession:
    info: Json
    messages: list[Json] = field(default_factory=list)  # {"info", "parts"} in creation order
    status: Json | None = None  # None = idle
    runner: asyncio.Task[None] | None = None
    rerun: bool = False
    last_model: Json | None = None
    deleted: bool = False


@dataclass
class _Request:
    kind: str  # "permission" | "question"
    props: Json
    reply: asyncio.Future[tuple[str, Any]]


def _fresh(prefix: str) -> str:
    return ids.ascending_id(prefix)


_SES_COUNTER = [0]
_BASE62 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _session_id() -> str:
    # Session ids descend on the real server (a newer session sorts first): never sort by id.
    _SES_COUNTER[0] += 1
    value = 0xFFFFFFFFFFFF - _SES_COUNTER[0]
    tail = "".join(secrets.choice(_BASE62) for _ in range(14))
    return f"ses_{value:012x}{tail}"


# ----------------------------------------------------------------------------------------------
# The fake server
# ----------------------------------------------------------------------------------------------


DEFAULT_MODELS = ("debater-1", "debater-2", "debater-3", "observer-1", "orchestrator-1")
DEFAULT_AGENTS: dict[str, str | None] = {
    "build": None,
    "plan": None,
    "general": None,
    "explore": None,
    "pm": "debater-1",
    "dev": "debater-2",
    "rv": "debater-3",
    "roundtable-observer": None,
    "asker": "debater-1",
    "basher": "debater-1",
}


class FakeOpenCode(RequestLog[ModelRequest]):
    """An in-memory OpenCode server with :class:`OpenCodeClient`'s interface.

    Args:
        directory: the project directory the server serves (sessions default to it).
        clock: the time source (timestamps in messages, ``next`` of retries).
        agents: agent name → model id of the ``scripted`` provider (``None``: the default model).
        models: model ids of the ``scripted`` provider (others are "not found").
        default_model: ``config.model``'s model id.
        step_seconds: virtual seconds of a model step without delays of its own.
    """

    def __init__(
        self,
        directory: str = "/project",
        *,
        clock: FakeClock | None = None,
        agents: dict[str, str | None] | None = None,
        models: Iterable[str] = DEFAULT_MODELS,
        default_model: str = "orchestrator-1",
        provider: str = "scripted",
        step_seconds: float = STEP_SECONDS,
    ) -> None:
        self.directory = directory
        self.clock = clock or FakeClock()
        self.provider = provider
        self.agent_models: dict[str, str | None] = dict(
            DEFAULT_AGENTS if agents is None else agents
        )
        self.models = set(models)
        self.default_model = default_model
        self.step_seconds = step_seconds
        self.sessions: dict[str, FakeSession] = {}
        self.requests: list[ModelRequest] = []
        """Every model request, in order (like :attr:`ScriptedLLM.requests`)."""
        self.events: list[Json] = []
        """Every event emitted, as the JSON object the stream would carry."""
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        """Every client call: ``(method name, arguments)``."""
        self.call_times: list[int] = []
        """Epoch ms of each entry of :attr:`calls` (same index)."""
        self.toasts: list[Json] = []
        self.event_filter: Callable[[Json], list[Json]] | None = None
        """Maps each emitted event to the events delivered (``[]`` loses it, ``[e, e]``
        duplicates it); the log :attr:`events` always has the original."""
        self.pending_requests: dict[str, _Request] = {}
        self.answered_requests: list[tuple[str, str, Any]] = []
        self.permission_agents: dict[str, set[str]] = {"basher": {"bash"}}
        """Agent → tools whose call asks for permission (``"ask"`` in the agent's config)."""
        self.question_agents: set[str] = {"asker"}
        """Agents allowed the ``question`` tool: their ``question`` call waits for an answer."""
        self.tool_outputs: dict[str, str] = {}
        """Tool name → output of a completed call; a call of any other tool is refused (an
        error part, as for a seat whose tools are all denied)."""
        self.bytes_read = 0
        self.subscriber_errors: list[BaseException] = []
        self._queues: dict[tuple[str | None, str | None], deque[FakeAction]] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self._faults: dict[str, deque[BaseException]] = {}
        self._subscribers: list[Callable[[ev.Event], None]] = []
        self._outbox: asyncio.Queue[Json] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._connected = True

    # -- test controls ------------------------------------------------------------------------

    def script(
        self, *actions: FakeAction, agent: str | None = None, session: str | None = None
    ) -> None:
        """Queue replies for ``(session, agent)`` (``None`` = any), as :meth:`ScriptedLLM.script`:
        a model request pops from ``(sid, agent)``, ``(None, agent)``, ``(sid, None)``, ``(None,
        None)`` in that order, else gets :func:`default_text`."""
        self._queues.setdefault((session, agent), deque()).extend(actions)

    def fail_next(self, method: str, exc: BaseException | None = None, times: int = 1) -> None:
        """The next ``times`` calls of client method ``method`` raise ``exc`` (default: a
        retryable :class:`TransportError`) before doing anything."""
        err = exc or TransportError(f"{method}: injected failure", retryable=True)
        q = self._faults.setdefault(method, deque())
        for _ in range(times):
            q.append(err)

    def calls_of(self, method: str, session_id: str | None = None) -> list[tuple[Any, ...]]:
        """Arguments of every call of ``method`` (optionally only those whose first argument is
        ``session_id``)."""
        return [
            a
            for m, a in self.calls
            if m == method and (session_id is None or (a and a[0] == session_id))
        ]

    def times_of(self, method: str, session_id: str | None = None) -> list[int]:
        """Epoch ms of every call of ``method`` (optionally to ``session_id``)."""
        return [
            t
            for (m, a), t in zip(self.calls, self.call_times, strict=True)
            if m == method and (session_id is None or (a and a[0] == session_id))
        ]

    def subscribe(self, callback: Callable[[ev.Event], None]) -> None:
        """Deliver every later event to ``callback`` (the engine's ``on_event``), parsed by
        :func:`roundtabled.opencode.events.parse_event` from the JSON bytes as the stream would."""
        self._subscribers.append(callback)

    def unsubscribe(self, callback: Callable[[ev.Event], None]) -> None:
        """Stop delivering events to ``callback`` (a stopped daemon)."""
        if callback in self._subscribers:
            self._subscribers.remove(callback)

    def add_tool_call(
        self, session_id: str, call_id: str, *, tool: str = "roundtable", status: str = "running"
    ) -> str:
        """Store an assistant message in ``session_id`` with one ``tool`` part (the
        orchestrator's call waiting for a roundtable's result); returns the message id. No
        events: it stands for a turn of the session that began before the test."""
        s = self._get(session_id)
        mid = _fresh("msg")
        now = self.clock.now_ms()
        info: Json = {
            "id": mid,
            "sessionID": session_id,
            "role": "assistant",
            "agent": "build",
            "mode": "build",
            "modelID": self.default_model,
            "providerID": self.provider,
            "time": {"created": now},
            "cost": 0,
            "tokens": _tokens(0, 0),
        }
        part = {
            "id": _fresh("prt"),
            "sessionID": session_id,
            "messageID": mid,
            "type": "tool",
            "tool": tool,
            "callID": call_id,
            "state": {"status": status, "input": {}, "time": {"start": now}},
        }
        s.messages.append({"info": info, "parts": [part]})
        return mid

    def set_tool_state(
        self,
        session_id: str,
        message_id: str,
        call_id: str,
        status: str,
        output: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Move that tool call to ``status`` (``completed`` with ``output`` and the tool's
        ``metadata``, ``error`` …)."""
        for m in self._get(session_id).messages:
            if m["info"]["id"] != message_id:
                continue
            for p in m["parts"]:
                if p.get("callID") == call_id:
                    p["state"] = {**p["state"], "status": status, "output": output}
                    if metadata is not None:
                        p["state"]["metadata"] = metadata
                    if status in ("completed", "error"):
                        m["info"]["time"]["completed"] = self.clock.now_ms()
                    return
        raise KeyError(call_id)

    def set_busy(self, session_id: str, busy: bool = True) -> None:
        """Mark a session busy (as if a turn of someone else were running) or idle, with the
        status events; no model request."""
        if busy:
            self._status(session_id, {"type": "busy"})
        else:
            self._idle(session_id)

    def connect(self) -> None:
        """(Re)connect the event stream: ``server.connected`` first, as on the real stream."""
        self._connected = True
        self.emit("server.connected", {})

    def disconnect(self) -> None:
        """Drop the stream: events emitted until :meth:`connect` are lost (no replay)."""
        self._connected = False

    def emit(self, etype: str, props: Json) -> Json:
        """Send one event (also usable by a test to inject a stale or duplicated one)."""
        event = {"id": _fresh("evt"), "type": etype, "properties": props}
        self.events.append(event)
        if not self._connected and etype != "server.connected":
            return event
        out = [event] if self.event_filter is None else self.event_filter(event)
        if self._subscribers:
            queue = self._ensure_pump()
            for e in out:
                queue.put_nowait(copy.deepcopy(e))
        return event

    async def settle(self, rounds: int = 50) -> None:
        """Run the event loop until queued events are delivered (no time passes)."""
        for _ in range(rounds):
            await asyncio.sleep(0)
            if self._outbox is None or self._outbox.empty():
                break
        for _ in range(5):
            await asyncio.sleep(0)

    def events_of(self, session_id: str | None = None, *types: str) -> list[Json]:
        """Emitted events of ``session_id`` (any with ``None``) of the given ``types`` (all with
        none given)."""
        out = []
        for e in self.events:
            if types and e["type"] not in types:
                continue
            if session_id is not None and _event_session(e) != session_id:
                continue
            out.append(e)
        return out

    def status_sequence(self, session_id: str) -> list[str]:
        """``busy``/``retry``/``idle`` (``session.status``), ``idle!`` (``session.idle``) and
        ``error:<name>`` (``session.error``) of ``session_id``, in order."""
        return status_sequence(self.events, session_id)

    async def close(self) -> None:
        """Stop every running turn and the event pump."""
        for s in self.sessions.values():
            if s.runner is not None and not s.runner.done():
                s.runner.cancel()
        tasks = [s.runner for s in self.sessions.values() if s.runner is not None]
        if self._pump is not None:
            self._pump.cancel()
            tasks.append(self._pump)
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- plumbing -----------------------------------------------------------------------------

    def _ensure_pump(self) -> asyncio.Queue[Json]:
        if self._outbox is None:
            self._outbox = asyncio.Queue()
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._deliver(self._outbox), name="fake-events")
        return self._outbox

    async def _deliver(self, queue: asyncio.Queue[Json]) -> None:
        while True:
            raw = await queue.get()
            parsed = ev.parse_event(orjson.dumps(raw), lazy_types=ev.BODY_UNUSED)
            if parsed is None:
                continue
            for cb in list(self._subscribers):
                try:
                    cb(parsed)
                except Exception as exc:  # on_event must never raise: the test checks this list
                    self.subscriber_errors.append(exc)

    def _enter(self, method: str, *args: Any) -> None:
        self.calls.append((method, args))
        self.call_times.append(self.clock.now_ms())
        q = self._faults.get(method)
        if q:
            raise q.popleft()

    def _get(self, session_id: str) -> FakeSession:
        s = self.sessions.get(session_id)
        if s is None or s.deleted:
            raise NotFound(f"session {session_id}: not found (Session not found: {session_id})")
        return s

    def _model_ref(self, model_id: str) -> Json:
        return {"providerID": self.provider, "modelID": model_id}

    # -- server ---------------------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        self._enter("health")
        return {"healthy": True, "version": VERSION}

    async def path(self) -> dict[str, Any]:
        """``GET /path``: the server's own directories."""
        self._enter("path")
        return {"directory": self.directory, "worktree": self.directory}

    async def _request(self, method: str, path: str, **_: Any) -> tuple[Any, dict[str, str]]:
        # The engine's start-up scan reads ``/path`` through the client's private helper.
        if (method, path) == ("GET", "/path"):
            return await self.path(), {}
        raise TransportError(f"{method} {path}: not faked", retryable=False)

    async def agents(self, directory: str | None = None) -> list[dict[str, Any]]:
        self._enter("agents", directory)
        out = []
        for name, model in self.agent_models.items():
            out.append(
                {
                    "name": name,
                    "description": f"{name} agent",
                    "mode": "primary" if name in ("build", "plan") else "subagent",
                    "native": name in ("build", "plan", "general", "explore"),
                    "hidden": None,
                    "model": self._model_ref(model) if model else None,
                    "prompt": f"You are {name}.",
                    "options": {},
                    "permission": [],
                }
            )
        return out

    async def providers(self, directory: str | None = None) -> dict[str, Any]:
        """``GET /config/providers``: none listed (the daemon then warns of no seat's model)."""
        return {"providers": []}

    async def tool_ids(self, directory: str | None = None) -> list[str]:
        """``GET /experimental/tool/ids``: the built-ins and the roundtable tools."""
        return ["bash", "read", "task", "roundtable", "available_agents"]

    async def config(self, directory: str | None = None) -> dict[str, Any]:
        self._enter("config", directory)
        return {
            "model": f"{self.provider}/{self.default_model}",
            "small_model": f"{self.provider}/{self.default_model}",
            "agent": {},
        }

    # -- sessions -------------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        directory: str | None,
        parent_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        self._enter("create_session", directory, parent_id, title, metadata)
        now = self.clock.now_ms()
        sid = _session_id()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now / 1000)) + f".{now % 1000:03d}Z"
        info: Json = {
            "id": sid,
            "slug": "fake-" + sid[-6:].lower(),
            "projectID": "global",
            "directory": directory or self.directory,
            "path": "",
            "title": title or f"{'Child' if parent_id else 'New'} session - {stamp}",
            "version": VERSION,
            "time": {"created": now, "updated": now},
        }
        if parent_id:
            info["parentID"] = parent_id
        if metadata is not None:
            info["metadata"] = copy.deepcopy(metadata)
        self.sessions[sid] = FakeSession(info=info)
        self.emit("session.created", {"sessionID": sid, "info": copy.deepcopy(info)})
        return copy.deepcopy(info)

    async def get_session(self, session_id: str) -> dict[str, Any]:
        self._enter("get_session", session_id)
        return copy.deepcopy(self._get(session_id).info)

    async def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        self._enter("update_session", session_id, title, metadata)
        s = self._get(session_id)
        if title is not None:
            s.info["title"] = title
        if metadata is not None:
            s.info["metadata"] = copy.deepcopy(metadata)  # replaces the whole object
            s.info["time"]["updated"] = self.clock.now_ms()
        self.emit("session.updated", {"sessionID": session_id, "info": copy.deepcopy(s.info)})
        return copy.deepcopy(s.info)

    async def delete_session(self, session_id: str) -> None:
        self._enter("delete_session", session_id)
        self._get(session_id)
        self._delete(session_id)

    def _delete(self, session_id: str) -> None:
        for child in [
            k
            for k, v in self.sessions.items()
            if v.info.get("parentID") == session_id and not v.deleted
        ]:
            self._delete(child)
        s = self.sessions[session_id]
        s.deleted = True  # a busy session's turn runs on and fails (see _run)
        self.emit("session.deleted", {"sessionID": session_id, "info": copy.deepcopy(s.info)})

    async def list_sessions(
        self, directory: str | None = None, *, limit: int = 1_000_000
    ) -> list[dict[str, Any]]:
        self._enter("list_sessions", directory)
        where = directory or self.directory
        found = [
            s.info for s in self.sessions.values() if not s.deleted and s.info["directory"] == where
        ]
        found.sort(key=lambda i: i["time"]["updated"], reverse=True)
        return copy.deepcopy(found[:limit])

    async def children(self, session_id: str) -> list[dict[str, Any]]:
        self._enter("children", session_id)
        self._get(session_id)
        return [
            copy.deepcopy(s.info)
            for s in self.sessions.values()
            if not s.deleted and s.info.get("parentID") == session_id
        ]

    async def statuses(self, directory: str | None = None) -> dict[str, dict[str, Any]]:
        self._enter("statuses", directory)
        where = directory or self.directory
        return {
            sid: dict(s.status)
            for sid, s in self.sessions.items()
            if s.status is not None and s.info["directory"] == where and not s.deleted
        }

    async def abort(self, session_id: str) -> None:
        self._enter("abort", session_id)
        s = self.sessions.get(session_id)
        if s is None or s.deleted:
            return  # always ``true``, also for unknown sessions
        runner = s.runner
        if runner is None or runner.done():
            self._idle(session_id)  # abort of an idle session still sends an idle pair
            return
        s.rerun = False  # queued prompts are not answered
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner

    # -- messages -------------------------------------------------------------------------------

    async def messages(
        self, session_id: str, *, limit: int | None = None, before: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        self._enter("messages", session_id, limit, before)
        s = self._get(session_id)
        msgs = s.messages
        if before is not None:
            try:
                cursor = orjson.loads(base64.urlsafe_b64decode(before + "=" * (-len(before) % 4)))
                cid = cursor["id"]
            except (ValueError, KeyError, TypeError) as exc:
                raise TransportError(
                    f"GET /session/{session_id}/message: HTTP 400", status=400, retryable=False
                ) from exc
            index = next((i for i, m in enumerate(msgs) if m["info"]["id"] == cid), None)
            msgs = [] if index is None else msgs[:index]
        if limit:
            page = msgs[-limit:]
            nxt = None
            if len(msgs) > limit and page:
                first = page[0]["info"]
                nxt = _cursor(first["id"], first["time"]["created"])
            return copy.deepcopy(page), nxt
        return copy.deepcopy(msgs), None

    async def message(self, session_id: str, message_id: str) -> dict[str, Any]:
        self._enter("message", session_id, message_id)
        s = self._get(session_id)
        for m in s.messages:
            if m["info"]["id"] == message_id:
                return copy.deepcopy(m)
        raise NotFound(f"message {message_id}: not found")

    def _store_user(self, s: FakeSession, body: Json, *, model: Json | None, agent: str) -> Json:
        sid = s.info["id"]
        mid = body.get("messageID") or _fresh("msg")
        existing = next((m for m in s.messages if m["info"]["id"] == mid), None)
        if existing is None:
            info: Json = {
                "id": mid,
                "sessionID": sid,
                "role": "user",
                "time": {"created": self.clock.now_ms()},
                "agent": agent,
            }
            if model is not None:
                info["model"] = dict(model)
            if body.get("system"):
                info["system"] = body["system"]
            existing = {"info": info, "parts": []}
            s.messages.append(existing)
        self.emit("message.updated", {"sessionID": sid, "info": copy.deepcopy(existing["info"])})
        for raw in body.get("parts") or []:
            part = copy.deepcopy(raw)
            part.setdefault("id", _fresh("prt"))
            part["sessionID"] = sid
            part["messageID"] = mid
            existing["parts"].append(part)  # a reused message id appends (upsert)
            self.emit(
                "message.part.updated",
                {"sessionID": sid, "part": copy.deepcopy(part), "time": self.clock.now_ms()},
            )
        self.emit("session.updated", {"sessionID": sid, "info": copy.deepcopy(s.info)})
        return existing

    async def prompt_async(self, session_id: str, body: dict[str, Any]) -> None:
        self._enter("prompt_async", session_id, copy.deepcopy(body))
        s = self._get(session_id)
        agent = str(body.get("agent") or "build")
        if agent not in self.agent_models:
            msg = f'Agent not found: "{agent}". Available agents: ' + ", ".join(
                sorted(self.agent_models)
            )
            self._error(session_id, "UnknownError", msg)
            self._error(session_id, "UnknownError", f"Error: {msg}\n    at prompt")
            return
        # ``model`` given > the agent's configured model > the session's last (sticky) > the
        # server's default (contract test "model of a prompt without one").
        model = body.get("model")
        if model is None and self.agent_models.get(agent):
            model = self._model_ref(str(self.agent_models[agent]))
        if model is None:
            model = s.last_model or self._model_ref(self.default_model)
        model = {"providerID": model["providerID"], "modelID": model["modelID"]}
        s.last_model = model  # sticky: the next prompt without ``model`` reuses it
        self._store_user(s, body, model=model, agent=agent)
        self._start(s)

    async def prompt(
        self, session_id: str, body: dict[str, Any], *, timeout: float = 600.0
    ) -> dict[str, Any]:
        """The synchronous ``POST /session/{id}/message``: the turn of :meth:`prompt_async`,
        answered once the session is idle again with its last assistant message
        (``{"info", "parts"}``; an empty dict when none was stored)."""
        await self.prompt_async(session_id, body)
        s = self._get(session_id)
        async with asyncio.timeout(timeout):
            while s.runner is not None and not s.runner.done():
                await asyncio.shield(s.runner)
        answers = [m for m in s.messages if m["info"].get("role") == "assistant"]
        return copy.deepcopy(answers[-1]) if answers else {}

    async def post_no_reply(
        self,
        session_id: str,
        parts: list[dict[str, Any]],
        *,
        message_id: str,
        agent: str | None = None,
    ) -> dict[str, Any]:
        self._enter("post_no_reply", session_id, copy.deepcopy(parts), message_id)
        s = self._get(session_id)
        stored = self._store_user(
            s,
            {"parts": parts, "messageID": message_id},
            model=s.last_model or self._model_ref(self.default_model),
            agent=agent or "build",
        )
        if s.runner is not None and not s.runner.done():
            s.rerun = True  # the newest user message of a busy session gets answered
        return copy.deepcopy(stored)

    async def update_part(
        self, session_id: str, message_id: str, part: dict[str, Any]
    ) -> dict[str, Any]:
        self._enter("update_part", session_id, message_id, copy.deepcopy(part))
        s = self._get(session_id)
        for m in s.messages:
            if m["info"]["id"] != message_id:
                continue
            for i, p in enumerate(m["parts"]):
                if p["id"] == part["id"]:
                    new = copy.deepcopy(part)
                    new["sessionID"], new["messageID"] = session_id, message_id
                    m["parts"][i] = new
                    self.emit(
                        "message.part.updated",
                        {"sessionID": session_id, "part": copy.deepcopy(new), "time": 0},
                    )
                    return copy.deepcopy(new)
        raise NotFound(f"part {part.get('id')}: not found")

    # -- TUI, permissions, questions ------------------------------------------------------------

    async def toast(
        self,
        message: str,
        *,
        title: str | None = None,
        variant: str = "info",
        duration_ms: int | None = None,
        directory: str | None = None,
    ) -> None:
        self._enter("toast", message, variant)
        toast = {"title": title, "message": message, "variant": variant, "duration": duration_ms}
        self.toasts.append(toast)
        self.emit("tui.toast.show", toast)

    async def permissions(self, directory: str | None = None) -> list[dict[str, Any]]:
        self._enter("permissions", directory)
        return [
            copy.deepcopy(r.props) for r in self.pending_requests.values() if r.kind == "permission"
        ]

    async def reply_permission(
        self,
        request_id: str,
        reply: str,
        message: str | None = None,
        directory: str | None = None,
    ) -> None:
        self._enter("reply_permission", request_id, reply, message)
        self._settle(request_id, "permission", (reply, message), "permission.replied", reply=reply)

    async def questions(self, directory: str | None = None) -> list[dict[str, Any]]:
        self._enter("questions", directory)
        return [
            copy.deepcopy(r.props) for r in self.pending_requests.values() if r.kind == "question"
        ]

    async def answer_question(
        self, request_id: str, answers: list[list[str]], directory: str | None = None
    ) -> None:
        self._enter("answer_question", request_id, answers)
        self._settle(request_id, "question", ("answer", answers), "question.replied")

    async def reject_question(self, request_id: str, directory: str | None = None) -> None:
        self._enter("reject_question", request_id)
        self._settle(request_id, "question", ("reject", None), "question.rejected")

    def _settle(
        self, request_id: str, kind: str, answer: tuple[str, Any], event: str, **props: Any
    ) -> None:
        """Answer the pending ``kind`` request ``request_id`` with ``answer`` (what the asking
        tool call gets, and what :attr:`answered_requests` records after the id) and send
        ``event`` with its session, its id and ``props``.

        Raises:
            NotFound: no pending ``kind`` request has that id (the server's 404).
        """
        req = self.pending_requests.pop(request_id, None)
        if req is None or req.kind != kind:
            raise NotFound(f"{kind} {request_id}: not found")
        self.answered_requests.append((request_id, *answer))
        self.emit(event, {"sessionID": req.props["sessionID"], "requestID": request_id, **props})
        if not req.reply.done():
            req.reply.set_result(answer)

    # -- the model loop -------------------------------------------------------------------------

    def _status(self, session_id: str, status: Json | None) -> None:
        s = self.sessions[session_id]
        s.status = status
        self.emit(
            "session.status",
            {"sessionID": session_id, "status": dict(status or {"type": "idle"})},
        )

    def _idle(self, session_id: str) -> None:
        self._status(session_id, None)
        self.emit("session.idle", {"sessionID": session_id})

    def _error(self, session_id: str, name: str, message: str, **data: Any) -> None:
        self.emit(
            "session.error",
            {
                "sessionID": session_id,
                "error": {"name": name, "data": {"message": message, **data}},
            },
        )

    def _start(self, s: FakeSession) -> None:
        if s.runner is not None and not s.runner.done():
            s.rerun = True  # answered after the running turn, as the newest user message
            return
        self._status(s.info["id"], {"type": "busy"})
        s.runner = asyncio.create_task(self._run(s), name=f"fake-turn-{s.info['id']}")

    def _pop(self, session_id: str, agent: str) -> FakeAction | None:
        for key in ((session_id, agent), (None, agent), (session_id, None), (None, None)):
            q = self._queues.get(key)
            if q:
                return q.popleft()
        return None

    async def _run(self, s: FakeSession) -> None:
        """The server's loop for one busy period: answer the newest user message, again while
        prompts keep arriving, then go idle."""
        sid = s.info["id"]
        state: dict[str, Any] = {"assistant": None}
        try:
            while True:
                s.rerun = False
                target = [m for m in s.messages if m["info"]["role"] == "user"][-1]
                ok = await self._turn(s, target, state)
                if not ok or not s.rerun:
                    break
            if ok:
                self._status(sid, {"type": "busy"})
                self._idle(sid)
                self._trailing(s, target)
        except asyncio.CancelledError:
            self._aborted(s, state.get("assistant"))
            raise
        finally:
            s.runner = None

    def _trailing(self, s: FakeSession, target: Json) -> None:
        if s.deleted:
            return
        target["info"].setdefault("summary", {"diffs": []})
        self.emit(
            "message.updated", {"sessionID": s.info["id"], "info": copy.deepcopy(target["info"])}
        )

    def _aborted(self, s: FakeSession, assistant: Json | None) -> None:
        sid = s.info["id"]
        if assistant is None or assistant["info"]["time"].get("completed"):
            self._idle(sid)
            return
        self._error(sid, "MessageAbortedError", "Aborted")
        self._idle(sid)
        for p in assistant["parts"]:
            if p["type"] == "tool" and (p.get("state") or {}).get("status") == "running":
                p["state"] = {
                    "status": "error",
                    "input": {},
                    "error": "Tool execution aborted",
                    "metadata": {"interrupted": True},
                    "time": _span(self),
                }
            if p["type"] in ("text", "tool"):
                self.emit(
                    "message.part.updated", {"sessionID": sid, "part": copy.deepcopy(p), "time": 0}
                )
        info = assistant["info"]
        info["error"] = {"name": "MessageAbortedError", "data": {"message": "Aborted"}}
        info["time"]["completed"] = self.clock.now_ms()
        self.emit("message.updated", {"sessionID": sid, "info": copy.deepcopy(info)})
        self._idle(sid)

    def _model_request(self, s: FakeSession, agent: str, model: str, kind: str) -> ModelRequest:
        seen: list[dict[str, Any]] = []
        for m in s.messages:
            info = m["info"]
            texts = [
                str(p.get("text") or "")
                for p in m["parts"]
                if p.get("type") == "text" and not p.get("ignored") and p.get("text")
            ]
            if info["role"] == "user":
                if texts:
                    seen.append({"role": "user", "content": "\n".join(texts)})
            elif texts or any(p.get("type") == "tool" for p in m["parts"]):
                seen.append({"role": "assistant", "content": "\n".join(texts)})
                for p in m["parts"]:
                    if p.get("type") == "tool":
                        st = p.get("state") or {}
                        seen.append(
                            {
                                "role": "tool",
                                "content": str(st.get("output") or st.get("error") or ""),
                            }
                        )
        last_user = next((x["content"] for x in reversed(seen) if x["role"] == "user"), "")
        rec = ModelRequest(
            index=len(self.requests),
            session_id=s.info["id"],
            agent=agent,
            model=model,
            kind=kind,
            messages=seen,
            last_user_text=last_user,
            at_ms=self.clock.now_ms(),
        )
        self.requests.append(rec)
        return rec

    async def _turn(self, s: FakeSession, target: Json, state: dict[str, Any]) -> bool:
        """Run the model steps answering ``target``. Returns False when the loop must stop."""
        sid = s.info["id"]
        uinfo = target["info"]
        agent = str(uinfo.get("agent") or "build")
        model = uinfo.get("model") or self._model_ref(self.default_model)
        if model.get("providerID") != self.provider or model.get("modelID") not in self.models:
            # Unknown model: busy (already), error, idle, a second error; nothing stored.
            text = f"Model not found: {model.get('providerID')}/{model.get('modelID')}."
            self._error(sid, "UnknownError", text)
            self._idle(sid)
            self._error(sid, "UnknownError", text)
            return False
        kind = "turn"
        attempt = 0
        while True:
            now = self.clock.now_ms()
            assistant: Json = {
                "info": {
                    "id": _fresh("msg"),
                    "sessionID": sid,
                    "role": "assistant",
                    "parentID": uinfo["id"],
                    "agent": agent,
                    "mode": agent,
                    "modelID": model["modelID"],
                    "providerID": model["providerID"],
                    "path": {"cwd": s.info["directory"], "root": s.info["directory"]},
                    "time": {"created": now},
                    "cost": 0,
                    "tokens": _tokens(0, 0),
                },
                "parts": [],
            }
            s.messages.append(assistant)
            state["assistant"] = assistant
            self.emit(
                "message.updated", {"sessionID": sid, "info": copy.deepcopy(assistant["info"])}
            )
            rec = self._model_request(s, agent, model["modelID"], kind)
            key = (agent, sid)
            n = self._counts.get(key, 0)
            self._counts[key] = n + 1
            action = self._pop(sid, agent)
            if action is None:
                action = Text(text=default_text(agent, sid, n))
            else:
                rec.action = getattr(action, "kind", type(action).__name__)
            outcome = await self._step(s, assistant, action, rec, attempt)
            if s.deleted:
                # The server keeps generating for a deleted session and fails at the write.
                # Seen on the real server: error, two idle pairs, a second error.
                self._error(sid, "UnknownError", 'Failed query: insert into "part"')
                self._idle(sid)
                self._idle(sid)
                self._error(sid, "UnknownError", 'Failed query: insert into "part"')
                return False
            if outcome == "retry":
                attempt += 1
                s.messages.remove(assistant)
                continue
            if outcome in ("again", "again-turn"):
                # After tool results the request ends with a tool message ("tool-followup" in
                # the scripted LLM's terms); after a step with no finish reason it is a turn.
                kind = "tool-followup" if outcome == "again" else "turn"
                attempt = 0
                self._status(sid, {"type": "busy"})
                continue
            return outcome == "done"

    def _part(self, s: FakeSession, assistant: Json, part: Json) -> Json:
        part = {
            "id": _fresh("prt"),
            "sessionID": s.info["id"],
            "messageID": assistant["info"]["id"],
            **part,
        }
        assistant["parts"].append(part)
        if s.deleted:
            return part  # the server's write fails for a deleted session
        self.emit(
            "message.part.updated",
            {"sessionID": s.info["id"], "part": copy.deepcopy(part), "time": self.clock.now_ms()},
        )
        return part

    def _complete(self, s: FakeSession, assistant: Json, finish: str | None, tokens: Json) -> None:
        info = assistant["info"]
        info["tokens"] = tokens
        if s.deleted:
            return
        if finish is not None:
            info["finish"] = finish
            self.emit("message.updated", {"sessionID": s.info["id"], "info": copy.deepcopy(info)})
        info["time"]["completed"] = self.clock.now_ms()
        self.emit("message.updated", {"sessionID": s.info["id"], "info": copy.deepcopy(info)})

    async def _step(
        self, s: FakeSession, assistant: Json, action: FakeAction, rec: ModelRequest, attempt: int
    ) -> str:
        """One model step. Returns ``"done"`` (the turn ended), ``"again"`` (call the model
        again: tool results or an unknown finish), ``"retry"`` (a retried provider error) or
        ``"stop"`` (the turn failed)."""
        sid = s.info["id"]
        delay = getattr(action, "first_byte_delay", 0.0)
        if isinstance(action, Hang):
            # No response headers until ``max_seconds``; then the scripted LLM answers 504.
            await asyncio.sleep(action.max_seconds)
            action, delay = HttpError(status=504, message="hang ended"), 0.0
        if isinstance(action, HttpError):
            await asyncio.sleep(delay or self.step_seconds)
            if action.status in (429, 500, 503) and attempt < len(RETRY_WAITS_S):
                wait = (
                    action.retry_after if action.retry_after is not None else RETRY_WAITS_S[attempt]
                )
                self._status(
                    sid,
                    {
                        "type": "retry",
                        "attempt": attempt + 1,
                        "message": action.message,
                        "next": self.clock.now_ms() + int(wait * 1000),
                    },
                )
                await asyncio.sleep(wait)
                self._status(sid, {"type": "busy"})
                return "retry"
            error = {
                "name": "APIError",
                "data": {
                    "message": action.message,
                    "statusCode": action.status,
                    "isRetryable": action.status in (429, 500, 503),
                },
            }
            self.emit("session.error", {"sessionID": sid, "error": error})
            self._idle(sid)
            assistant["info"]["error"] = error
            self._complete(s, assistant, None, _tokens(0, 0))
            self._idle(sid)  # the errored reply comes between two idle pairs
            return "stop"
        self._part(s, assistant, {"type": "step-start"})
        tokens = _tokens(
            getattr(action, "prompt_tokens", None) or 100,
            getattr(action, "completion_tokens", None) or 20,
        )
        if (
            isinstance(action, ToolCalls)
            and len(action.calls) == 1
            and action.calls[0].name == "question"
            and s.messages
            and self._may_ask(assistant)
        ):
            # The model calls the ``question`` tool of an agent allowed to use it.
            questions = tuple(action.calls[0].arguments.get("questions") or ())
            action = AskQuestion(questions=questions or AskQuestion().questions)
        elif (
            isinstance(action, ToolCalls)
            and len(action.calls) == 1
            and action.calls[0].name
            in self.permission_agents.get(str(assistant["info"]["agent"]), set())
        ):
            call = action.calls[0]
            pattern = call.arguments.get("command") or call.arguments.get("filePath") or "*"
            action = AskPermission(permission=call.name, patterns=(str(pattern),), tool=call.name)
        if isinstance(action, AskPermission | AskQuestion):
            return await self._ask(s, assistant, action, tokens)
        if isinstance(action, ToolCalls):
            await asyncio.sleep(delay or self.step_seconds)
            if action.text:
                self._part(s, assistant, {"type": "text", "text": action.text, "time": _span(self)})
                rec.reply_text += action.text
            for i, call in enumerate(action.calls):
                state: Json
                if call.name in self.tool_outputs:
                    state = {
                        "status": "completed",
                        "input": dict(call.arguments),
                        "output": self.tool_outputs[call.name],
                        "title": "",
                        "metadata": {"truncated": False},
                        "time": _span(self),
                    }
                else:
                    # Seats have no tools (``"*": "deny"``): the server records the refusal and
                    # calls the model again.
                    state = {
                        "status": "error",
                        "input": dict(call.arguments),
                        "error": "Model tried to call unavailable tool 'invalid'. "
                        "Available tools: .",
                        "time": _span(self),
                    }
                self._part(
                    s,
                    assistant,
                    {
                        "type": "tool",
                        "tool": call.name,
                        "callID": call.id or f"call_{rec.index}_{i}",
                        "state": state,
                    },
                )
            self._part(
                s,
                assistant,
                {"type": "step-finish", "reason": "tool-calls", "tokens": tokens, "cost": 0},
            )
            self._complete(s, assistant, "tool-calls", tokens)
            return "again"
        assert isinstance(action, Text | Stall)
        text = action.text
        finish_reason = action.finish_reason if isinstance(action, Text) else "stop"
        if isinstance(action, Text) and action.reasoning:
            self._part(
                s, assistant, {"type": "reasoning", "text": action.reasoning, "time": _span(self)}
            )
        chunks = max(1, -(-len(text) // action.chunk_size)) if text else 0
        per_chunk = action.chunk_delay if isinstance(action, Text) else 0.0
        streamed: Json | None = None
        if text:
            streamed = self._part(
                s, assistant, {"type": "text", "text": "", "time": {"start": self.clock.now_ms()}}
            )
        total = delay + per_chunk * chunks
        if isinstance(action, Stall):
            # The first chunks arrive, then the pause (a stalled provider stream).
            if streamed is not None:
                streamed["text"] = "".join(
                    text[i : i + action.chunk_size]
                    for i in range(0, action.chunks_before * action.chunk_size, action.chunk_size)
                )
                rec.reply_text = streamed["text"]
            await asyncio.sleep(action.pause)
        elif per_chunk and streamed is not None:
            # Partial text so far is what an abort leaves in the message.
            for i in range(chunks):
                await asyncio.sleep(per_chunk)
                streamed["text"] = text[: (i + 1) * action.chunk_size]
                rec.reply_text = streamed["text"]
            if delay:
                await asyncio.sleep(delay)
        else:
            await asyncio.sleep(total or self.step_seconds)
        rec.reply_text = text
        if streamed is not None:
            streamed["text"] = text
            streamed["time"] = {"start": streamed["time"]["start"], "end": self.clock.now_ms()}
            self.emit(
                "message.part.updated",
                {"sessionID": sid, "part": copy.deepcopy(streamed), "time": 0},
            )
        finish = _FINISH.get(finish_reason, "unknown")
        self._part(
            s, assistant, {"type": "step-finish", "reason": finish, "tokens": tokens, "cost": 0}
        )
        self._complete(s, assistant, finish, tokens)
        if finish == "unknown":
            self._status(sid, {"type": "busy"})
            return "again-turn"  # the server calls the model again at once (no finish reason)
        return "done"

    def _may_ask(self, assistant: Json) -> bool:
        return str(assistant["info"]["agent"]) in self.question_agents

    async def _ask(
        self, s: FakeSession, assistant: Json, action: AskPermission | AskQuestion, tokens: Json
    ) -> str:
        sid = s.info["id"]
        call_id = f"call_{secrets.token_hex(4)}"
        tool = action.tool if isinstance(action, AskPermission) else "question"
        part = self._part(
            s,
            assistant,
            {
                "type": "tool",
                "tool": tool,
                "callID": call_id,
                "state": {"status": "running", "input": {}, "time": {"start": self.clock.now_ms()}},
            },
        )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[str, Any]] = loop.create_future()
        tool_ref = {"messageID": assistant["info"]["id"], "callID": call_id}
        if isinstance(action, AskPermission):
            rid = _fresh("per")
            props: Json = {
                "id": rid,
                "sessionID": sid,
                "permission": action.permission,
                "patterns": list(action.patterns),
                "metadata": {},
                "always": [],
                "tool": tool_ref,
            }
            self.pending_requests[rid] = _Request("permission", props, future)
            self.emit("permission.asked", copy.deepcopy(props))
        else:
            rid = _fresh("que")
            props = {
                "id": rid,
                "sessionID": sid,
                "questions": list(action.questions),
                "tool": tool_ref,
            }
            self.pending_requests[rid] = _Request("question", props, future)
            self.emit("question.asked", copy.deepcopy(props))
        try:
            reply, payload = await future
        finally:
            self.pending_requests.pop(rid, None)
        refused = reply == "reject"
        # A reject with a message is feedback the model gets (the turn goes on); a bare reject
        # ends the turn after the tool step (contract "permission request … until replied").
        feedback = payload if isinstance(action, AskPermission) and refused else None
        if refused:
            error = "The user dismissed this question"
            if isinstance(action, AskPermission):
                error = "The user rejected permission to use this specific tool call" + (
                    f" with the following feedback: {feedback}" if feedback else "."
                )
            part["state"] = {"status": "error", "input": {}, "error": error, "time": _span(self)}
        else:
            output = (
                "\n".join(", ".join(a) for a in payload)
                if isinstance(action, AskQuestion) and payload
                else self.tool_outputs.get(tool, "ok")
            )
            part["state"] = {
                "status": "completed",
                "input": {},
                "output": output,
                "title": "",
                "metadata": {"truncated": False},
                "time": _span(self),
            }
        self.emit(
            "message.part.updated", {"sessionID": sid, "part": copy.deepcopy(part), "time": 0}
        )
        self._part(
            s,
            assistant,
            {"type": "step-finish", "reason": "tool-calls", "tokens": tokens, "cost": 0},
        )
        self._complete(s, assistant, "tool-calls", tokens)
        refused = refused and not feedback
        if refused:
            return "done"  # a refused tool ends the turn: no further model request
        self._status(sid, {"type": "busy"})
        return "again"


_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "content_filter": "content-filter",
}


def _tokens(inp: int, out: int) -> Json:
    return {
        "total": inp + out,
        "input": inp,
        "output": out,
        "reasoning": 0,
        "cache": {"read": 0, "write": 0},
    }


def _span(fake: FakeOpenCode) -> Json:
    now = fake.clock.now_ms()
    return {"start": now, "end": now}


def _cursor(message_id: str, created: int) -> str:
    raw = orjson.dumps({"id": message_id, "time": created})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _event_session(e: Json) -> str | None:
    props = e.get("properties") or {}
    sid = props.get("sessionID")
    if isinstance(sid, str):
        return sid
    info = props.get("info") or {}
    part = props.get("part") or {}
    return (
        info.get("id")
        if e["type"].startswith("session.")
        else (part.get("sessionID") or info.get("sessionID"))
    )


def status_sequence(events: Iterable[Json], session_id: str) -> list[str]:
    """The status story of one session from raw events (shared with the contract tests):
    ``busy``/``retry``/``idle`` for ``session.status``, ``idle!`` for ``session.idle`` and
    ``error:<name>`` for ``session.error``, in order."""
    out: list[str] = []
    for e in events:
        if _event_session(e) != session_id:
            continue
        props = e.get("properties") or {}
        if e["type"] == "session.status":
            out.append(str((props.get("status") or {}).get("type")))
        elif e["type"] == "session.idle":
            out.append("idle!")
        elif e["type"] == "session.error":
            out.append("error:" + str((props.get("error") or {}).get("name")))
    return out
