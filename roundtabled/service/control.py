"""The daemon's local control API (aiohttp.web): used by the tool shims, the CLI and scripts.

Contract: docs/control-api.md. Security: loopback only (or a Unix socket made 0600), every
route but ``/v1/ping`` needs ``Authorization: Bearer <token>`` where the token is read from a 0600
file that the tool shims and the CLI read too. Bad input never yields a 500: each handler maps
:class:`ValidationFailed` to 400 with ``{"error": "Error: …", "field": …}``; the server being
unreachable is a 502 with a clear message. Tokens and passwords are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from roundtabled import __version__
from roundtabled.core.server_records import AgentRecord
from roundtabled.core.state import Budget
from roundtabled.core.validation import PresetSpec, apply_preset, parse_request, seat_agents
from roundtabled.engine.plugins import (
    PLUGIN_VERSION,
    PLUGIN_VERSION_V2,
    PluginRegistry,
    parse_report,
)
from roundtabled.engine.registry import Engine
from roundtabled.engine.v2run import V2Runner
from roundtabled.errors import TransportError, ValidationFailed
from roundtabled.opencode.stream import EventStream
from roundtabled.service import export, listing, plan
from roundtabled.service.notices import Notices

log = logging.getLogger("roundtabled.control")

MAX_BODY_BYTES = 1 << 20
"""Largest request body accepted (1 MiB)."""
MAX_WAIT_S = 60.0
"""Longest long-poll of ``/result`` in seconds."""
RETRY_AFTER_S = 1
"""The retry hint of a "starting" or "restarting" answer (s)."""

FEED_POLL_S = 1.0
"""How often an idle progress feed checks whether the daemon is stopping (s)."""
FEED_KEEPALIVE_S = 10.0
"""Keep-alive comment interval of an idle progress feed (s)."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def iso_utc(epoch_s: float) -> str:
    """``epoch_s`` (seconds since the epoch) as ISO 8601 UTC, to the second."""
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="seconds")


def ensure_token(path: Path) -> str:
    """Read the control token from ``path``, creating it (mode 0600) when missing.

    Raises:
        OSError: the file cannot be read or created.
    """
    try:
        token = path.read_text().strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    os.replace(private_draft(path, token + "\n"), path)
    return token


def private_draft(path: Path, text: str) -> Path:
    """Write ``text`` to a file beside ``path`` that only its owner can read or write (mode
    0600, from its creation on) and return that file's path, for the caller to move or link
    into place; ``path``'s folder is created when missing.

    Raises:
        OSError: the folder or the file cannot be created or written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # The process id keeps two processes writing the same file apart.
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    return tmp


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _retry(message: str, key: str) -> web.Response:
    """HTTP 503 for a daemon that is ``starting`` or ``restarting`` (``key``): the error text
    ending with the retry hint, ``key: true``, ``retryAfterS`` and a ``Retry-After`` header; a
    caller retries the same request (docs/control-api.md, "Starting and restarting")."""
    resp = _json(
        {
            "error": f"Error: {message}; retry in {RETRY_AFTER_S} s",
            key: True,
            "retryAfterS": RETRY_AFTER_S,
        },
        503,
    )
    resp.headers["Retry-After"] = str(RETRY_AFTER_S)
    return resp


def _agent_item(agent: AgentRecord, model_as_object: bool) -> dict[str, Any]:
    """One item of ``GET /v1/agents`` (docs/control-api.md): ``name``, ``description``,
    ``mode``, ``color``, ``model``, ``native``. ``model``: ``{"providerID", "modelID"}`` on 1.x
    (``model_as_object``), ``"provider/model"`` on 2.x; ``null`` when the agent names none."""
    model: Any = None
    if agent.model is not None:
        model = agent.model.dump() if model_as_object else agent.model.label()
    return {
        "name": agent.id,
        "description": agent.description,
        "mode": agent.mode,
        "color": agent.color,
        "model": model,
        "native": agent.native,
    }


def _error(message: str, status: int = 400, field: str | None = None) -> web.Response:
    body: dict[str, Any] = {
        "error": message if message.startswith("Error:") else f"Error: {message}"
    }
    if field is not None:
        body["field"] = field
    return _json(body, status)


class ControlAPI:
    """Builds the aiohttp application around an :class:`Engine`.

    Args:
        engine: the engine to drive.
        token: the bearer token every request must carry.
        stream: the daemon's event stream, whose ``connected``, ``last_error``, ``down_since``
            and ``backoff`` ``/v1/health`` reports (``None``: reported as not connected).
        presets: the configured panels by name (``[presets.NAME]``), applied to a call naming
            one and listed by ``/v1/agents``.
        default_budget: the configured ``budget_*`` limits for a call that gives none.
    """

    def __init__(
        self,
        engine: Engine,
        token: str,
        stream: EventStream | None = None,
        *,
        presets: dict[str, PresetSpec] | None = None,
        default_budget: Budget | None = None,
    ) -> None:
        self.engine = engine
        #: the 2.x shell when the server is OpenCode 2.x (set by the daemon once it knows): every
        #: route about roundtables goes to it
        self.v2: V2Runner | None = None
        #: roundtables of a server replaced in place by another OpenCode major (the daemon
        #: switched driver): S2 → (its last status, its result), answered as they are
        self.ended_elsewhere: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}
        #: the toasts the server cannot show (2.x), for the plugin's TUI part (/v1/notices)
        self.notices = Notices()
        self.stream = stream
        self.presets = dict(presets or {})
        self.default_budget = default_budget
        self._token = token.encode()
        self._stopping = False
        self._stopped = asyncio.Event()
        self.app = web.Application(middlewares=[self._guard], client_max_size=MAX_BODY_BYTES)
        r = self.app.router
        r.add_get("/v1/ping", self.ping)
        r.add_get("/v1/health", self.health)
        r.add_get("/v1/agents", self.agents)
        r.add_post("/v1/plugin", self.plugin)
        r.add_post("/v1/roundtables", self.create)
        r.add_get("/v1/roundtables", self.list)
        r.add_get("/v1/roundtables/{ses}", self.status)
        r.add_get("/v1/roundtables/{ses}/result", self.result)
        r.add_post("/v1/roundtables/{ses}/cancel", self.cancel)
        r.add_get("/v1/roundtables/{ses}/events", self.events)
        r.add_get("/v1/roundtables/{ses}/export", self.export)
        r.add_get("/v1/notices", self.notices_route)

    def stop_accepting(self) -> None:
        """From now on refuse new and extended roundtables with 503 (the daemon is stopping: a
        roundtable started now would be cut by the engine's shutdown before its first turn).
        Every other route keeps answering until the API itself is closed."""
        self._stopping = True
        self._stopped.set()

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path != "/v1/ping":
            auth = request.headers.get("Authorization", "")
            given = auth[7:].strip().encode() if auth.startswith("Bearer ") else b""
            if not given or not hmac.compare_digest(given, self._token):
                return _error(
                    "missing or wrong token: send 'Authorization: Bearer <token>' "
                    "with the content of roundtabled's token file",
                    401,
                )
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            # Unknown route (404), wrong method (405), body over the limit (413): JSON too.
            where = {413: "body", 405: "method"}.get(exc.status, "path")
            return _error(f"{exc.reason} ({request.method} {request.path})", exc.status, where)
        except ValidationFailed as exc:
            return _error(str(exc), 400, exc.field)
        except TransportError as exc:
            return _error(f"the OpenCode server did not answer as expected: {exc}", 502)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("control API handler failed: %s %s", request.method, request.path)
            return _error("internal error in roundtabled (see its log)", 500)

    async def _body(self, request: web.Request) -> Any:
        if not request.can_read_body:
            return {}
        raw = await request.read()
        if not raw:
            return {}
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ValidationFailed("body", "the request body is not valid JSON") from None

    async def ping(self, request: web.Request) -> web.Response:
        """Liveness (no auth)."""
        return _json({"ok": True, "service": "roundtabled", "version": __version__})

    async def health(self, request: web.Request) -> web.Response:
        """Daemon and server health."""
        e = self.engine
        stream = self.stream
        return _json(
            {
                "ok": e.ready.is_set() and e.last_error is None,
                "version": __version__,
                "ready": e.ready.is_set(),
                "stopping": self._stopping,
                "server": {
                    "url": e.server_url,
                    "version": e.server_version,
                    "connected": stream is not None and stream.connected,
                    "lastError": e.last_error or (stream.last_error if stream else None),
                    # the stream retries until it is back: since when, and the longest wait
                    "reconnectingSince": (
                        iso_utc(stream.down_since)
                        if stream is not None and stream.down_since is not None
                        else None
                    ),
                    "retryMaxS": stream.backoff.ceiling() if stream is not None else None,
                },
                "active": len(e.tables) if self.v2 is None else self.v2.active(),
                "plugin": {
                    "version": PLUGIN_VERSION if self.v2 is None else PLUGIN_VERSION_V2,
                    "reports": self._plugins().snapshot(),
                },
            }
        )

    async def plugin(self, request: web.Request) -> web.Response:
        """The roundtable plugin reports itself loaded in a server instance (docs/plugin.md):
        ``{"version", "directory", "serverUrl"?}`` → ``{"accepted": bool, "reason"?}``. On 2.x
        the 2.x plugin's report goes to the 2.x shell's registry (:attr:`V2Runner.plugins`)."""
        plugins = self._plugins()
        report = parse_report(await self._body(request), plugins.clock())
        accepted, why = plugins.register(report)
        if not accepted:
            log.info("plugin report from %s refused: %s", report.directory, why)
            return _json({"accepted": False, "reason": why})
        return _json({"accepted": True})

    def _plugins(self) -> PluginRegistry:
        """The registry of the plugin reports of the server's major (1.x: the engine's)."""
        return self.v2.plugins if self.v2 is not None else self.engine.shell.plugins

    async def agents(self, request: web.Request) -> web.Response:
        """Agents a roundtable may seat (``available_agents``, docs/behaviour.md, 'The call')."""
        directory = request.query.get("directory") or None
        if directory is not None and not directory.startswith("/"):
            raise ValidationFailed("directory", "directory must be an absolute path")
        if self.v2 is not None:
            records = await self.v2.port.agents(directory or "")
        else:
            records = await self.engine.shell.port.agents(directory)
        names = seat_agents(records)
        listed = [_agent_item(a, self.v2 is None) for a in records if not a.hidden]
        listed.sort(key=lambda a: str(a["name"]))
        text = "Available agents: " + ", ".join(names)
        if self.presets:
            # The tool's one-line answer names the presets too: `preset` is a roundtable argument.
            text += ". Presets (roundtable's preset argument): " + ", ".join(sorted(self.presets))
        presets = [
            {"name": name, "agents": list(p.agents) if p.agents else None, "rounds": p.rounds}
            for name, p in sorted(self.presets.items())
        ]
        return _json({"agents": listed, "presets": presets, "text": text})

    async def create(self, request: web.Request) -> web.Response:
        """Start or extend a roundtable (503 once the daemon is stopping)."""
        if self._stopping:
            return _error(
                "roundtabled is shutting down and takes no new roundtables; start it again "
                "(systemctl --user start roundtabled, or roundtabled serve) and retry",
                503,
            )
        req = apply_preset(
            parse_request(await self._body(request)), self.presets, self.default_budget
        )
        if req.extend and (early := self._not_yet()) is not None:
            return early  # the roundtable to extend may be one recovery is loading
        if self.v2 is not None and req.dry_run:
            return _json(await plan.dry_run_v2(self.v2, req))
        if self.v2 is not None:
            state = await self.v2.start(req)  # what 2.x cannot run yet is refused there
            if not req.extend:  # 2.x shows no toast: kept for the plugin's TUI part
                self.notices.add(state, f"Roundtable started: {state.title}", "info")
        elif req.dry_run:
            # The plan only: no session is created (docs/control-api.md).
            engine = self.engine
            planned = await plan.dry_run(
                engine.shell.port, req, plugins=engine.shell.plugins, reads=engine.start_reads
            )
            return _json(planned)
        else:
            state = await self.engine.start(req)
        return _json(
            {
                "sessionID": state.session_id,
                "phase": state.phase.value,
                "title": state.title,
                "extended": req.extend,
                "totalRounds": state.total_rounds,
                "protocol": state.options.protocol,
                # e.g. the low-diversity warning: shown at once by the CLI (docs/deliberation.md)
                "notes": list(state.notes),
            }
        )

    async def list(self, request: web.Request) -> web.Response:
        """Active and recent roundtables, read from the server (``?all=true``, ``?limit=N``)."""
        if self.v2 is not None:
            return _json(await listing.list_roundtables_v2(self.v2, request.query))
        return _json(await listing.list_roundtables(self.engine, request.query))

    def _ses(self, request: web.Request) -> str:
        ses = request.match_info["ses"]
        if not ses.startswith("ses_") or len(ses) > 100:
            raise ValidationFailed("sessionID", f"sessionID must look like 'ses_…', got {ses!r}")
        return ses

    def _not_yet(self, *, waiting: bool = False) -> web.Response | None:
        """The answer to a request about one roundtable while the daemon cannot answer it
        truly: "starting" until the start-up recovery has loaded every roundtable (before that
        an id may be one it is about to resume, never "unknown"); for a request that would wait
        (``waiting``: the result's long-poll, the progress feed), "restarting" once the daemon
        stops. Other requests are answered until the API closes."""
        if waiting and self._stopping:
            return _retry(
                "roundtabled is restarting (stopping now); the roundtables resume when it is back",
                "restarting",
            )
        starting = self.engine.starting()
        return None if starting is None else _retry(starting, "starting")

    def _gone(self, ses: str) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
        """What :attr:`ended_elsewhere` holds for ``ses``, unless the driver now running holds
        it again (its server came back and the roundtable was resumed there)."""
        gone = self.ended_elsewhere.get(ses)
        if gone is None:
            return None
        held = self.v2.status(ses) if self.v2 is not None else self.engine.status(ses)
        return gone if held is None else None

    async def status(self, request: web.Request) -> web.Response:
        """One roundtable's status."""
        ses = self._ses(request)
        if (gone := self._gone(ses)) is not None:
            return _json(gone[0])
        if (early := self._not_yet()) is not None:
            return early
        if self.v2 is not None:
            st = self.v2.status(ses) or await listing.stored_status_v2(self.v2, ses, result=True)
        else:
            st = self.engine.status(ses, result=True) or await self.engine.stored_status(
                ses, result=True
            )
        if st is None:
            return _error(f"no roundtable {ses!r} is known to this daemon", 404, "sessionID")
        return _json(st)

    async def result(self, request: web.Request) -> web.Response:
        """Long-poll for the result (``wait`` seconds, 0–60)."""
        ses = self._ses(request)
        try:
            wait = float(request.query.get("wait", "25"))
        except ValueError:
            raise ValidationFailed(
                "wait", "wait must be a number of seconds from 0 to 60"
            ) from None
        if not 0 <= wait <= MAX_WAIT_S:
            raise ValidationFailed("wait", f"wait must be from 0 to 60 seconds, got {wait:g}")
        call_id = request.query.get("callID") or None
        gone = self._gone(ses)
        if gone is not None and gone[1] is not None:
            return _json(gone[1])
        if (early := self._not_yet(waiting=True)) is not None:
            return early
        # A stopping daemon ends the long-poll at once, with words (never a silent close).
        waiter = self.v2.wait_result if self.v2 is not None else self.engine.wait_result
        polling = asyncio.ensure_future(waiter(ses, wait))
        stopping = asyncio.ensure_future(self._stopped.wait())
        try:
            done, _ = await asyncio.wait({polling, stopping}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            polling.cancel()
            stopping.cancel()
            raise
        stopping.cancel()
        if polling not in done:
            polling.cancel()
            early = self._not_yet(waiting=True)
            assert early is not None
            return early
        res = polling.result()
        if res is None:
            st = (self.v2.status(ses) if self.v2 is not None else self.engine.status(ses)) or {}
            return _json(
                {
                    "done": False,
                    "phase": st.get("phase"),
                    "round": st.get("round"),
                    "agent": st.get("agent"),
                }
            )
        if request.transport is None or request.transport.is_closing():
            return _json(res)  # the poller is gone: do not consume
        if self.v2 is not None:
            taken = self.v2.take_result(ses, tool_call_id=call_id) or res
        else:
            taken = self.engine.take_result(ses, tool_call_id=call_id) or res
        return _json({k: v for k, v in taken.items() if k != "consumedByTool"})

    async def cancel(self, request: web.Request) -> web.Response:
        """Cancel a roundtable."""
        ses = self._ses(request)
        body = await self._body(request)
        if not isinstance(body, dict):
            raise ValidationFailed("body", "the body must be a JSON object")
        summarize = body.get("summarize", False)
        if not isinstance(summarize, bool):
            raise ValidationFailed("summarize", "summarize must be true or false")
        reason = body.get("reason", "cancelled by the user")
        if not isinstance(reason, str) or len(reason) > 500:
            raise ValidationFailed("reason", "reason must be a string of at most 500 characters")
        if (gone := self._gone(ses)) is not None:  # already over: its server was replaced
            return _json({"ok": True, "phase": gone[0].get("phase")})
        if (early := self._not_yet()) is not None:
            return early
        if self.v2 is not None:
            state = await self.v2.cancel(ses, summarize=summarize, reason=reason)
        else:
            state = await self.engine.cancel(ses, summarize=summarize, reason=reason)
        return _json({"ok": True, "phase": state.phase.value})

    async def events(self, request: web.Request) -> web.StreamResponse:
        """SSE feed of one roundtable's progress."""
        ses = self._ses(request)
        gone = self._gone(ses)
        if gone is not None and gone[1] is not None:
            # its server was replaced by another major: the feed is its end
            done = {"type": "done", **gone[1]}
            resp = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await resp.prepare(request)
            with contextlib.suppress(ConnectionResetError):
                await resp.write(b"data: " + orjson.dumps(done) + b"\n\n")
                await resp.write_eof()
            return resp
        if (early := self._not_yet(waiting=True)) is not None:
            return early
        feed: V2Runner | Engine = self.v2 if self.v2 is not None else self.engine
        q = feed.subscribe(ses)
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        idle_s = 0.0
        try:
            while True:
                try:
                    item = await asyncio.wait_for(q.get(), timeout=FEED_POLL_S)
                except TimeoutError:
                    # A stopping daemon ends its feeds, so a follower (`roundtabled watch`) sees
                    # the end at once and reattaches to the next daemon.
                    if self._stopping:
                        restarting = {"type": "restarting", "restarting": True}
                        await resp.write(b"data: " + orjson.dumps(restarting) + b"\n\n")
                        break
                    idle_s += FEED_POLL_S
                    if idle_s >= FEED_KEEPALIVE_S:
                        idle_s = 0.0
                        await resp.write(b": keep-alive\n\n")
                    continue
                idle_s = 0.0
                await resp.write(b"data: " + orjson.dumps(item) + b"\n\n")
                if item.get("type") == "done":
                    break
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            feed.unsubscribe(ses, q)
        with contextlib.suppress(ConnectionResetError):
            await resp.write_eof()
        return resp

    async def notices_route(self, request: web.Request) -> web.Response:
        """The toasts kept for the TUI (``after``: the last ``seq`` seen, absent for where to
        start; ``directory``: only that project's; ``wait``: seconds, 0–60), as
        ``{"notices": [...], "next": N}`` (roundtabled/service/notices.py)."""
        q = request.query
        after: int | None = None
        if "after" in q:
            try:
                after = int(q["after"])
            except ValueError:
                raise ValidationFailed(
                    "after", f"after must be a whole number (a notice's seq), got {q['after']!r}"
                ) from None
        try:
            wait = float(q.get("wait", "0"))
        except ValueError:
            raise ValidationFailed(
                "wait", "wait must be a number of seconds from 0 to 60"
            ) from None
        if not 0 <= wait <= MAX_WAIT_S:
            raise ValidationFailed("wait", f"wait must be from 0 to 60 seconds, got {wait:g}")
        return _json(await self.notices.wait(after, q.get("directory") or None, wait))

    async def export(self, request: web.Request) -> web.Response:
        """The whole debate as Markdown or JSON."""
        ses = self._ses(request)
        fmt = request.query.get("format", "md")
        if fmt not in ("md", "json"):
            raise ValidationFailed("format", f"format must be 'md' or 'json', got {fmt!r}")
        if (early := self._not_yet()) is not None:
            return early
        if self.v2 is not None:
            data = await export.collect_v2(self.v2, ses)
        else:
            data = await export.collect(self.engine, ses)
        if fmt == "json":
            return _json(data)
        return web.Response(text=export.to_markdown(data), content_type="text/markdown")


async def serve_control(api: ControlAPI, host: str, port: int) -> web.AppRunner:
    """Start the control API on ``host:port`` (loopback) or ``unix:/path`` (made 0600).

    Returns the runner (``await runner.cleanup()`` to stop). ``port`` 0 picks a free port; the
    chosen one is in ``runner.addresses``.
    """
    runner = web.AppRunner(api.app, access_log=None, handle_signals=False)
    await runner.setup()
    if host.startswith("unix:"):
        path = host[5:]
        site: web.BaseSite = web.UnixSite(runner, path)
        await site.start()
        os.chmod(path, 0o600)
    else:
        site = web.TCPSite(runner, host, port)
        await site.start()
    return runner
