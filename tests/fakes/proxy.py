"""A fault-injecting HTTP + SSE proxy between the daemon and the REAL ``opencode serve``.

Every request is forwarded unchanged (method, path, query, headers, body) to :attr:`upstream`;
responses come back unchanged. The event stream routes (``/global/event``, ``/event``) are relayed
block by block (an SSE block ends with a blank line) and can be tampered with:

- ``drop``: a predicate on the decoded event; matching events are not forwarded (lost events);
- ``duplicate_after``: seconds; every ``session.idle`` is forwarded again that much later (the
  server itself sends ``session.idle`` twice on errors and aborts);
- :meth:`inject`: send an invented event to every open stream;
- ``cut_on_idle``: the next ``n`` ``session.idle`` events are swallowed and their stream is closed
  at that very moment (the daemon must notice by resync, not by the event);
- :meth:`half_open`: open streams stop relaying bytes but stay open (no FIN, no heartbeats);
  :meth:`heal` resumes normal relaying for new connections.

Usage: ``proxy = FaultProxy(server.url, auth_headers); url = await proxy.start()``; point the
daemon at ``url``; ``await proxy.stop()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web

STREAM_PATHS = ("/global/event", "/event")
_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


def event_type(payload: dict[str, Any]) -> str:
    """The event type of a decoded ``data:`` payload (``/global/event`` wraps it)."""
    inner = payload.get("payload")
    if isinstance(inner, dict):
        return str(inner.get("type") or "")
    return str(payload.get("type") or "")


def decode_frame(block: bytes) -> dict[str, Any] | None:
    """The JSON object in an SSE frame's ``data:`` line, or ``None`` (no data line, not JSON, not
    an object)."""
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            try:
                data = json.loads(line[5:].strip())
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


class FaultProxy:
    """The proxy. Attributes are plain and may be changed at any time by the test.

    Args:
        upstream: base URL of the real server (changeable, e.g. after a restart on a new port).
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.drop: Callable[[dict[str, Any]], bool] | None = None
        self.duplicate_after: float | None = None
        self.cut_on_idle = 0
        self.stream_connections = 0
        self.cuts = 0
        self.forwarded: list[str] = []
        """Types of the events relayed to the daemon, in order."""
        self.dropped: list[str] = []
        self._half_open = False
        self._silenced: set[web.StreamResponse] = set()
        self._streams: set[web.StreamResponse] = set()
        self._http: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.url = ""

    async def start(self) -> str:
        """Listen on a free loopback port; returns the proxy's base URL."""
        self._http = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self.url

    async def stop(self) -> None:
        """Close every stream and the listener."""
        for t in list(self._tasks):
            t.cancel()
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._runner.cleanup(), 5)
        if self._http is not None:
            await self._http.close()

    # -- controls ---------------------------------------------------------------------------

    def half_open(self) -> None:
        """From now on, relay nothing: open streams go silent for good (but stay open), and so
        do streams opened before :meth:`heal`."""
        self._half_open = True
        self._silenced |= self._streams

    def heal(self) -> None:
        """Streams opened from now on relay normally (silenced ones stay silent)."""
        self._half_open = False

    async def inject(self, payload: dict[str, Any] | bytes) -> None:
        """Send ``payload`` (a dict as JSON, bytes as they are) as one SSE event to every open
        stream."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        frame = b"data: " + data + b"\n\n"
        for resp in list(self._streams):
            with contextlib.suppress(ConnectionError, RuntimeError):
                await resp.write(frame)

    # -- relaying ---------------------------------------------------------------------------

    def _headers(self, request: web.Request) -> dict[str, str]:
        return {k: v for k, v in request.headers.items() if k.lower() not in _HOP}

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path in STREAM_PATHS and request.method == "GET":
            return await self._stream(request)
        assert self._http is not None
        body = await request.read()
        try:
            async with self._http.request(
                request.method,
                self.upstream + request.rel_url.path_qs,
                data=body or None,
                headers=self._headers(request),
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=120),
            ) as up:
                data = await up.read()
                headers = {k: v for k, v in up.headers.items() if k.lower() not in _HOP}
                return web.Response(body=data, status=up.status, headers=headers)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return web.Response(status=502, text=f"proxy: upstream failed: {exc!r}")

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        assert self._http is not None
        try:
            up = await self._http.get(
                self.upstream + request.rel_url.path_qs,
                headers=self._headers(request),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            return web.Response(status=502, text=f"proxy: upstream failed: {exc!r}")
        if up.status != 200:
            data = await up.read()
            up.release()
            return web.Response(body=data, status=up.status)
        self.stream_connections += 1
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        self._streams.add(resp)
        if self._half_open:
            self._silenced.add(resp)
        buf = b""
        try:
            async for chunk in up.content.iter_any():
                if resp in self._silenced:
                    continue  # swallow everything; the socket stays open
                buf += chunk.replace(b"\r\n", b"\n")
                while b"\n\n" in buf:
                    block, buf = buf.split(b"\n\n", 1)
                    if not await self._relay(request, resp, block + b"\n\n"):
                        return resp  # cut: close right now
        except (ConnectionError, aiohttp.ClientError, asyncio.CancelledError):
            pass
        finally:
            self._streams.discard(resp)
            self._silenced.discard(resp)
            up.close()
        return resp

    async def _relay(self, request: web.Request, resp: web.StreamResponse, frame: bytes) -> bool:
        """Forward one SSE frame (or not). Returns False when the stream must be cut now."""
        payload = decode_frame(frame)
        etype = event_type(payload) if payload is not None else ""
        if payload is not None and self.drop is not None and self.drop(payload):
            self.dropped.append(etype)
            return True
        if etype == "session.idle" and self.cut_on_idle > 0:
            self.cut_on_idle -= 1
            self.cuts += 1
            self.dropped.append(etype)
            if request.transport is not None:
                request.transport.close()  # the socket dies now: no final chunk, no EOF
            return False
        await resp.write(frame)
        self.forwarded.append(etype)
        if etype == "session.idle" and self.duplicate_after is not None:
            self._relay_again(resp, frame, etype, self.duplicate_after)
        return True

    def _relay_again(
        self, resp: web.StreamResponse, frame: bytes, etype: str, delay: float
    ) -> None:
        """Forward ``frame`` (an event of type ``etype``) to ``resp`` once more ``delay`` s from
        now, as a duplicate; skipped if the stream has closed by then."""

        async def again() -> None:
            await asyncio.sleep(delay)
            with contextlib.suppress(ConnectionError, RuntimeError):
                await resp.write(frame)
                self.forwarded.append(etype)

        t = asyncio.create_task(again())
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
