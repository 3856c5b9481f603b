"""A scripted, OpenAI-compatible streaming chat-completions server for tests and the offline demo.

OpenCode is configured (see :func:`roundtabled.offline.opencode_server.offline_config`) with a
provider ``scripted`` whose ``baseURL`` is :attr:`ScriptedLLM.base_url`. Every model call of the
real ``opencode serve`` then lands here as ``POST /v1/chat/completions`` and is answered with the
SSE stream of docs/opencode-server.md, 'The scripted model' (role delta, content /
``reasoning_content``
deltas or streamed tool calls, a final ``delta:{}`` chunk with ``finish_reason`` and ``usage``, then
``data: [DONE]``).

Classification of a request (``kind``):

- ``"title"`` — the system text starts with ``"You are a title generator"``;
- ``"compaction"`` — it starts with one of :data:`COMPACTION_MARKERS` (the release's words), or
  (OpenCode 2.x, which sends the agent's own system prompt) the last user message starts with one
  of :data:`COMPACTION_REQUEST_MARKERS`; a 2.x compaction's default reply fills the request's
  ``<template>`` (:func:`template_summary`), which 2.x checks;
- ``"tool-followup"`` — the last message has role ``tool`` (2nd+ step of a tool turn);
- ``"turn"`` — anything else.

The *agent* of a turn is recognised from the system text: OpenCode puts the agent's configured
``prompt`` first, so :attr:`ScriptedLLM.agent_prompts` maps prompt prefixes to agent names (longest
matching prefix wins). Title and compaction requests get the pseudo-agents ``"title"`` and
``"compaction"``.

Actions: :mod:`roundtabled.offline.scripted_actions`. Routing:
:meth:`ScriptedLLM.script` appends actions to a FIFO queue keyed by ``(session, agent)``, either
part may be ``None`` (wildcard). A turn / tool-followup request pops from the first non-empty queue
of ``(sid, agent)``, ``(None, agent)``, ``(sid, None)``, ``(None, None)``, where ``sid`` is the
``x-opencode-session-id`` header OpenCode 2.x sends, else the ``x-session-id`` of 1.x (on 2.x
``x-session-id`` is the root session's id, the same for every child session). Title /
compaction requests only look at ``(sid, "title")``, ``(None, "title")`` (resp.
``"compaction"``) so they never eat a seat's script. With
nothing scripted the reply is a default: a deterministic but textually diverse text of 40–80
pseudo-random words (seeded by agent, session and per-(agent, session) request count) for turns and
follow-ups, a fixed short title or summary for title / compaction requests. Default replies are
intentionally dissimilar to each other (character-bigram Jaccard well below 0.85) so the daemon's
loop detection never fires on them.

OpenCode 2.x's requests differ in what the records show, not in what they do: the output limit is
``max_completion_tokens`` (1.x: ``max_tokens``; either is :attr:`RecordedRequest.max_tokens`), and a
user message ``<system-update>…`` (the tool catalogue changed) may come last; it is not the user's
text (``last_user_text`` skips it).

Invariants:

- Every request is recorded (:attr:`ScriptedLLM.requests`) *before* it is answered, so a test can
  see a request that hangs; the record is updated when the answer ends or the client disconnects.
- A client disconnect is always noticed (aiohttp ≥ 3.9 does not cancel handlers on disconnect, so
  waits poll the transport every 20 ms and writes catch connection errors); the handler then ends.
- Actions are consumed exactly once; ``reset()`` clears queues and records.

Control routes (for a separate process such as the offline demo): ``POST /script`` with body
``{"actions": [<action>...], "agent": str|null, "session": str|null}``; ``POST /reset``;
``POST /agent-prompts`` with ``{prefix: agent}``; ``GET /requests`` → JSON list of records.

Run standalone: ``python -m roundtabled.offline.scripted_llm --port 4010``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

import orjson
from aiohttp import web

from roundtabled.offline.opencode_server import AGENT_PROMPTS
from roundtabled.offline.scripted_actions import (
    Action,
    Hang,
    HttpError,
    Stall,
    Text,
    ToolCalls,
    parse_actions,
)

__all__ = [
    "RecordedRequest",
    "RequestLog",
    "ScriptedLLM",
    "content_text",
    "default_text",
]

TITLE_MARKER = "You are a title generator"
COMPACTION_MARKERS = (
    "You are a context summarization agent",  # 1.18.x
    "You are an anchored context summarization assistant",  # 1.17.x
)
"""How the compaction's system prompt starts on the releases tested (docs/testing.md)."""
COMPACTION_REQUEST_MARKERS = (
    "You MUST summarize the conversation above into a structured summary",
    "Update the existing checkpoint in the conversation above into one consolidated summary",
    "The previous response did not fill in the required summary template",
)
"""How the last user message of a 2.x compaction request starts (2.1.2; its system prompt is the
session agent's own)."""
SYSTEM_UPDATE_PREFIX = "<system-update>"
"""A user message 2.x adds to the history when its tool catalogue changed: not the user's text."""

Kind = Literal["turn", "tool-followup", "title", "compaction"]

Responder = Callable[["RecordedRequest"], Action | None]
"""A request's record -> the action to answer it with, or ``None``: see
:attr:`ScriptedLLM.responder`."""


DEFAULT_TITLE = "Scripted roundtable title"
DEFAULT_SUMMARY = (
    "Summary: the participants discussed the topic, exchanged arguments and agreed to continue."
)

_POLL = 0.02  # seconds between transport checks while waiting
# request storage key of an already prepared stream response
_PREPARED = web.RequestKey("scripted_llm.prepared", web.StreamResponse)


# ----------------------------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------------------------


CHARS_PER_TOKEN = 4
"""Characters per token of the measured ``prompt_tokens`` (a rough English average)."""


@dataclass
class RecordedRequest:
    """One ``/v1/chat/completions`` request as received, and how it ended.

    Times: ``t_mono`` = ``time.monotonic()`` seconds at arrival, ``t_wall`` = epoch seconds;
    ``disconnected_at`` / ``finished_at`` are monotonic seconds too.
    """

    index: int
    t_mono: float
    t_wall: float
    session_id: str | None
    model: str | None
    agent: str | None
    kind: Kind
    system: str
    messages: list[dict[str, Any]]
    tools: list[str]
    last_user_text: str
    body_len: int
    max_tokens: int | None = None
    """The request's output limit: ``max_tokens`` (1.x) or ``max_completion_tokens`` (2.x)."""
    prompt_chars: int = 0
    """Characters of the request's message contents (system, user, assistant, tool)."""
    action: str = "pending"  # action kind served, "default", or "pending" while running
    reply_text: str = ""
    disconnected: bool = False
    disconnected_at: float | None = None
    finished_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------


def content_text(content: Any) -> str:
    """Text of an OpenAI message ``content`` (a string or a list of ``{type:"text",text}``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return str(content)


_VOCAB = (  # noqa: SIM905
    "argument budget cadence dependency evidence feature gradient hypothesis iteration journey "
    "kernel latency milestone network outcome priority quarterly roadmap scalability throughput "
    "usability velocity workflow xylophone yardstick zeppelin abacus blizzard crimson dolphin "
    "eclipse fjord gazebo harbor igloo jigsaw kayak lantern marmalade nebula orchard pumpkin "
    "quartz "
    "rhubarb saffron tundra umbrella vortex walnut yogurt zucchini backlog customer deploy "
    "experiment fallback governance hotfix incident jitter kanban legacy metric onboarding "
    "pipeline "
    "quota refactor sprint telemetry upgrade vendor warranty exabyte zipcode chowder quibble "
    "sphinx jukebox wizard foxglove mystique rhythm syzygy oxygen fjeld squawk buzzword knapsack "
    "vaccine equinox ukulele pixel hedgehog "
).split()


def default_text(agent: str | None, session: str | None, n: int) -> str:
    """Deterministic 40–80 word filler reply for ``(agent, session, n-th request)``.

    Includes random two-letter tokens and numbers so that two default replies share few character
    bigrams (loop detection at Jaccard > 0.85 must not fire).
    """
    seed = hashlib.sha256(f"{agent}|{session}|{n}".encode()).digest()
    rng = random.Random(seed)
    words: list[str] = []
    for _ in range(rng.randint(40, 80)):
        r = rng.random()
        if r < 0.15:
            words.append(
                "".join(rng.choice("bcdfghjklmnpqrstvwxzaeiouy") for _ in range(rng.randint(2, 5)))
            )
        elif r < 0.22:
            words.append(str(rng.randint(0, 9999)))
        else:
            words.append(rng.choice(_VOCAB))
    words[0] = words[0].capitalize()
    return " ".join(words) + "."


def template_summary(request_text: str) -> str | None:
    """A reply to a 2.x compaction request that fills its ``<template>…</template>``: each section
    heading kept, each ``[placeholder]`` bullet answered (the Objective with a line of
    :data:`DEFAULT_SUMMARY`, the rest ``(none)``), the template's instructions left out. ``None``
    when ``request_text`` holds no template (the 2.x retry message repeats none)."""
    start, end = request_text.find("<template>"), request_text.find("</template>")
    if start < 0 or end < start:
        return None
    out: list[str] = []
    section = ""
    for line in request_text[start + len("<template>") : end].strip().splitlines():
        if line.startswith("#"):
            section = line.lstrip("#").strip()
            out.append(line)
        elif "[" in line and line.lstrip().startswith(("-", "1.")):
            bullet = "1." if line.lstrip().startswith("1.") else "-"
            answer = DEFAULT_SUMMARY if section == "Objective" else "(none)"
            out.append(f"{bullet} {answer}")
        elif not line.strip():
            out.append("")
    return "\n".join(out).strip()


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    """Text of the last user message that is not a 2.x ``<system-update>`` (``""`` if none)."""
    for m in reversed(messages):
        if m.get("role") == "user":
            text = content_text(m.get("content"))
            if not text.lstrip().startswith(SYSTEM_UPDATE_PREFIX):
                return text
    return ""


class _Disconnected(Exception):
    pass


class Filterable(Protocol):
    """What :meth:`RequestLog.requests_for` filters a record on."""

    @property
    def agent(self) -> str | None: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def kind(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...


RecordT = TypeVar("RecordT", bound=Filterable)


class RequestLog(Generic[RecordT]):
    """The model requests a scripted server received, in order, and their filter.

    :class:`ScriptedLLM` keeps one; so does the tests' in-memory server, whose requests a test
    filters the same way as the real server's.
    """

    requests: list[RecordT]

    def requests_for(
        self,
        agent: str | None = None,
        session: str | None = None,
        kind: str | None = None,
        model: str | None = None,
    ) -> list[RecordT]:
        """Recorded requests matching every given filter (``None`` = don't filter)."""
        return [
            r
            for r in self.requests
            if (agent is None or r.agent == agent)
            and (session is None or r.session_id == session)
            and (kind is None or r.kind == kind)
            and (model is None or r.model == model)
        ]


# ----------------------------------------------------------------------------------------------
# Server
# ----------------------------------------------------------------------------------------------

QueueKey = tuple[str | None, str | None]  # (session id, agent)


class ScriptedLLM(RequestLog[RecordedRequest]):
    """The scripted server. Usage::

    llm = ScriptedLLM()            # agent_prompts pre-filled with the offline config's seats
    await llm.start(port=0)        # 0 = pick a free port
    llm.base_url                   # "http://127.0.0.1:<port>/v1"
    llm.script(Text(text="hi"), agent="pm", session=None)
    ...
    await llm.stop()
    """

    def __init__(
        self, agent_prompts: dict[str, str] | None = None, *, measured_tokens: bool = False
    ) -> None:
        if agent_prompts is None:
            agent_prompts = dict(AGENT_PROMPTS)
        #: prompt prefix → agent name; the longest prefix the system text starts with wins.
        self.agent_prompts: dict[str, str] = agent_prompts
        #: every chat-completions request, in arrival order.
        self.requests: list[RecordedRequest] = []
        self._queues: dict[QueueKey, deque[Action]] = {}
        self._counts: dict[tuple[str | None, str | None], int] = {}
        #: answers a turn (or a tool follow-up) nothing is scripted for, before the default
        #: reply: called with the request's record, returns an action or ``None`` (then the
        #: default). For replies that depend on what was asked: seats answering generated
        #: questions, :func:`roundtabled.offline.orchestrator.orchestrator_reply`.
        self.responder: Responder | None = None
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._stopping = asyncio.Event()
        self.port: int = 0
        self.host = "127.0.0.1"
        #: Report ``prompt_tokens`` from the request received (its message characters / 4,
        #: :data:`CHARS_PER_TOKEN`) instead of the fixed 100 the suite's budgets and compaction
        #: thresholds are written for; an action's own ``prompt_tokens`` wins either way.
        self.measured_tokens = measured_tokens

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (control routes live here)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The provider ``baseURL`` for OpenCode: ``http://127.0.0.1:<port>/v1``."""
        return f"{self.url}/v1"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        app.router.add_post("/script", self._handle_script)
        app.router.add_post("/reset", self._handle_reset)
        app.router.add_post("/agent-prompts", self._handle_agent_prompts)
        app.router.add_get("/requests", self._handle_requests)
        app.router.add_get("/health", self._handle_health)
        return app

    async def start(self, port: int = 0, host: str = "127.0.0.1") -> None:
        """Listen on ``host:port`` (port 0 = any free port; the chosen one is :attr:`port`)."""
        self.host = host
        self._stopping = asyncio.Event()
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, host, port)
        await self._site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Stop listening; pending hangs/stalls end at once."""
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- scripting --------------------------------------------------------------------------

    def script(
        self, *actions: Action, agent: str | None = None, session: str | None = None
    ) -> None:
        """Append ``actions`` to the queue of ``(session, agent)``; ``None`` = any.

        ``agent="title"`` / ``agent="compaction"`` script title / compaction replies.
        """
        q = self._queues.setdefault((session, agent), deque())
        q.extend(actions)

    def pending(self, agent: str | None = None, session: str | None = None) -> int:
        """Number of queued, not yet consumed actions for exactly ``(session, agent)``."""
        return len(self._queues.get((session, agent), ()))

    def reset(self) -> None:
        """Forget all queued actions and recorded requests (agent_prompts are kept)."""
        self._queues.clear()
        self._counts.clear()
        self.requests.clear()

    async def wait_for_requests(
        self, n: int, within: float = 10.0, **filters: Any
    ) -> list[RecordedRequest]:
        """Wait up to ``within`` s until ≥ ``n`` requests match ``filters`` (see
        :meth:`requests_for`); raise :class:`TimeoutError` otherwise."""
        deadline = time.monotonic() + within
        while True:
            found = self.requests_for(**filters)
            if len(found) >= n:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(found)}/{n} requests matching {filters} after {within}s")
            await asyncio.sleep(0.02)

    # -- classification -----------------------------------------------------------------------

    def classify(self, body: dict[str, Any]) -> tuple[Kind, str | None, str]:
        """Return ``(kind, agent, system_text)`` for a chat-completions body."""
        messages = body.get("messages") or []
        system = "\n".join(
            content_text(m.get("content"))
            for m in messages
            if isinstance(m, dict) and m.get("role") == "system"
        )
        head = system.lstrip()
        if head.startswith(TITLE_MARKER):
            return "title", "title", system
        if head.startswith(COMPACTION_MARKERS):
            return "compaction", "compaction", system
        last_user = _last_user_text(messages)
        if last_user.lstrip().startswith(COMPACTION_REQUEST_MARKERS):
            return "compaction", "compaction", system
        agent: str | None = None
        best = -1
        for prefix, name in self.agent_prompts.items():
            if head.startswith(prefix) and len(prefix) > best:
                agent, best = name, len(prefix)
        last = messages[-1] if messages else {}
        kind: Kind = "tool-followup" if last.get("role") == "tool" else "turn"
        return kind, agent, system

    def _pop(self, kind: Kind, session: str | None, agent: str | None) -> Action | None:
        if kind in ("title", "compaction"):
            keys: list[QueueKey] = [(session, agent), (None, agent)]
        else:
            keys = [(session, agent), (None, agent), (session, None), (None, None)]
            if agent is None:
                keys = [(session, None), (None, None)]
        for key in keys:
            q = self._queues.get(key)
            if q:
                return q.popleft()
        return None

    # -- handlers -----------------------------------------------------------------------------

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body: dict[str, Any] = orjson.loads(raw) if raw else {}
        kind, agent, system = self.classify(body)
        session = request.headers.get("x-opencode-session-id") or request.headers.get(
            "x-session-id"
        )
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        last_user = _last_user_text(messages)
        limit = body.get("max_tokens", body.get("max_completion_tokens"))
        rec = RecordedRequest(
            index=len(self.requests),
            t_mono=time.monotonic(),
            t_wall=time.time(),
            session_id=session,
            model=body.get("model"),
            agent=agent,
            kind=kind,
            system=system,
            messages=messages,
            tools=[
                str((t.get("function") or {}).get("name"))
                for t in body.get("tools") or []
                if isinstance(t, dict)
            ],
            last_user_text=last_user,
            body_len=len(raw),
            max_tokens=limit if isinstance(limit, int) else None,
            prompt_chars=sum(len(content_text(m.get("content"))) for m in messages),
        )
        self.requests.append(rec)
        count_key = (agent, session)
        n = self._counts.get(count_key, 0)
        self._counts[count_key] = n + 1

        action = self._pop(kind, session, agent)
        if action is None and self.responder is not None and kind in ("turn", "tool-followup"):
            action = self.responder(rec)
        if action is None:
            rec.action = "default"
            if kind == "title":
                action = Text(text=DEFAULT_TITLE)
            elif kind == "compaction":
                filled = None
                if last_user.lstrip().startswith(COMPACTION_REQUEST_MARKERS):
                    filled = next(
                        (
                            t
                            for m in reversed(messages)
                            if (t := template_summary(content_text(m.get("content"))))
                        ),
                        None,
                    )
                action = Text(text=filled or DEFAULT_SUMMARY)
            else:
                action = Text(text=default_text(agent, session, n))
        else:
            rec.action = action.kind
        try:
            return await self._serve(request, rec, action, str(body.get("model") or "scripted"))
        except (_Disconnected, ConnectionError):
            self._mark_disconnected(rec)
            # once a stream is prepared, aiohttp expects that same object back
            prepared = request.get(_PREPARED)
            return prepared if prepared is not None else web.Response(status=499)
        finally:
            rec.finished_at = time.monotonic()

    @staticmethod
    def _mark_disconnected(rec: RecordedRequest) -> None:
        if not rec.disconnected:
            rec.disconnected = True
            rec.disconnected_at = time.monotonic()

    async def _wait(self, request: web.Request, seconds: float) -> None:
        """Sleep ``seconds``; raise :class:`_Disconnected` as soon as the client goes away."""
        deadline = time.monotonic() + seconds
        while True:
            transport = request.transport
            if transport is None or transport.is_closing():
                raise _Disconnected()
            if self._stopping.is_set():
                raise _Disconnected()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(_POLL, left))

    async def _serve(
        self, request: web.Request, rec: RecordedRequest, action: Action, model: str
    ) -> web.StreamResponse:
        if action.first_byte_delay > 0:
            await self._wait(request, action.first_byte_delay)
        if isinstance(action, HttpError):
            headers: dict[str, str] = {}
            if action.retry_after is not None:
                headers["retry-after"] = f"{action.retry_after:g}"
                headers["retry-after-ms"] = str(int(action.retry_after * 1000))
            payload = {
                "error": {
                    "message": action.message,
                    "type": action.error_type,
                    "code": action.status,
                }
            }
            return web.json_response(payload, status=action.status, headers=headers)
        if isinstance(action, Hang):
            await self._wait(request, action.max_seconds)
            return web.json_response({"error": {"message": "hang ended"}}, status=504)

        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        request[_PREPARED] = resp
        created = int(time.time())
        cid = f"chatcmpl-scripted-{rec.index}"

        async def send(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
            chunk: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
            transport = request.transport
            if transport is None or transport.is_closing():
                raise _Disconnected()
            await resp.write(b"data: " + orjson.dumps(chunk) + b"\n\n")

        await send({"role": "assistant", "content": ""})
        finish = "stop"
        if isinstance(action, Text):
            if action.reasoning:
                for piece in _chunks(action.reasoning, action.chunk_size):
                    await send({"reasoning_content": piece})
                    if action.chunk_delay:
                        await self._wait(request, action.chunk_delay)
            for piece in _chunks(action.text, action.chunk_size):
                await send({"content": piece})
                rec.reply_text += piece
                if action.chunk_delay:
                    await self._wait(request, action.chunk_delay)
            finish = action.finish_reason
        elif isinstance(action, Stall):
            pieces = _chunks(action.text, action.chunk_size)
            for i, piece in enumerate(pieces):
                if i == action.chunks_before:
                    await self._wait(request, action.pause)
                await send({"content": piece})
                rec.reply_text += piece
            if len(pieces) <= action.chunks_before:  # short text: stall before finishing
                await self._wait(request, action.pause)
        elif isinstance(action, ToolCalls):
            if action.text:
                await send({"content": action.text})
                rec.reply_text += action.text
            for i, call in enumerate(action.calls):
                args = orjson.dumps(call.arguments).decode()
                half = max(1, len(args) // 2)
                await send(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": call.id or f"call_{rec.index}_{i}",
                                "type": "function",
                                "function": {"name": call.name, "arguments": ""},
                            }
                        ]
                    }
                )
                for piece in (args[:half], args[half:]):
                    if action.chunk_delay:
                        await self._wait(request, action.chunk_delay)
                    await send({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
            finish = "tool_calls"
        if action.prompt_tokens is not None:
            prompt_tokens = action.prompt_tokens
        elif self.measured_tokens:
            prompt_tokens = max(1, rec.prompt_chars // CHARS_PER_TOKEN)
        else:
            prompt_tokens = 100
        completion_tokens = action.completion_tokens if action.completion_tokens is not None else 20
        await send(
            {},
            finish,
            usage={
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        )
        await resp.write(b"data: [DONE]\n\n")
        with contextlib.suppress(ConnectionError):
            await resp.write_eof()
        return resp

    async def _handle_script(self, request: web.Request) -> web.Response:
        data = orjson.loads(await request.read())
        actions = parse_actions(data.get("actions") or [])
        self.script(*actions, agent=data.get("agent"), session=data.get("session"))
        return web.json_response({"queued": len(actions)})

    async def _handle_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response(True)

    async def _handle_agent_prompts(self, request: web.Request) -> web.Response:
        data = orjson.loads(await request.read())
        self.agent_prompts.update({str(k): str(v) for k, v in data.items()})
        return web.json_response(self.agent_prompts)

    async def _handle_requests(self, request: web.Request) -> web.Response:
        return web.Response(
            body=orjson.dumps([r.to_json() for r in self.requests]),
            content_type="application/json",
        )

    async def _handle_health(self, request: web.Request) -> web.Response:
        return web.json_response({"healthy": True, "requests": len(self.requests)})


def _main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=4010)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--measured-tokens",
        action="store_true",
        help="report prompt_tokens from each request received (characters / 4)",
    )
    args = parser.parse_args(argv)

    async def run() -> None:
        llm = ScriptedLLM(measured_tokens=args.measured_tokens)
        await llm.start(port=args.port, host=args.host)
        print(f"scripted LLM listening on {llm.base_url}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await llm.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    _main()
