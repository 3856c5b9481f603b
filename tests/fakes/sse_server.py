"""A scriptable fake of the OpenCode event stream (``GET /global/event``) on 127.0.0.1.

Each incoming connection takes the next script from a queue (or the default script when the queue
is empty). A script is a list of steps:

- :class:`Respond` — answer with a plain status (e.g. 401 with ``www-authenticate``) and stop;
- :class:`Send` — write raw bytes (use :func:`frame` / :func:`envelope` to build SSE frames);
- :class:`Drip` — write a big byte string in chunks with a pause between chunks (slow link);
- :class:`Sleep` — pause;
- :class:`Hang` — send nothing more but keep the socket open (half-open from the client's view);
- :class:`Cut` — abort the TCP connection (no chunked terminator: a truncated body);
- :class:`Close` — end the response cleanly (what the server does after ``instance.disposed``).

A script that runs out of steps hangs. Every request is recorded in :attr:`FakeSSEServer.requests`
(monotonic arrival time and ``Authorization`` header) so tests can check backoff spacing and auth.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web


@dataclass(frozen=True)
class Respond:
    status: int
    headers: dict[str, str] | None = None


@dataclass(frozen=True)
class Send:
    data: bytes


@dataclass(frozen=True)
class Drip:
    data: bytes
    chunk: int = 64 * 1024
    seconds: float = 1.0
    """Total time over which the chunks are spread."""


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Hang:
    pass


@dataclass(frozen=True)
class Cut:
    pass


@dataclass(frozen=True)
class Close:
    pass


Step = Respond | Send | Drip | Sleep | Hang | Cut | Close


def frame(obj: Any) -> bytes:
    """One SSE frame exactly as the server writes it: ``data: <json>\\n\\n``."""
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def envelope(
    etype: str, properties: dict[str, Any] | None = None, *, directory: str | None = "/proj"
) -> bytes:
    """A ``/global/event`` frame; ``directory=None`` gives the ``{"payload": …}`` form."""
    payload = {"id": "evt_x", "type": etype, "properties": properties or {}}
    if directory is None:
        return frame({"payload": payload})
    return frame({"directory": directory, "project": "p1", "payload": payload})


CONNECTED = envelope("server.connected", directory=None)
HEARTBEAT = envelope("server.heartbeat", directory=None)


@dataclass
class RequestRecord:
    at: float
    """``time.monotonic()`` at arrival (seconds)."""
    authorization: str | None
    path: str


class FakeSSEServer:
    """The fake server. ``await start()`` → base URL; ``await stop()`` at teardown."""

    def __init__(self, default: Sequence[Step] = (Hang(),)) -> None:
        self.default: list[Step] = list(default)
        self.scripts: deque[list[Step]] = deque()
        self.requests: list[RequestRecord] = []
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()
        self._arrived = asyncio.Condition()

    def script(self, *steps: Step) -> None:
        """Queue the script for the next unscripted connection."""
        self.scripts.append(list(steps))

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/global/event", self._handle)
        app.router.add_get("/event", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def wait_requests(self, n: int, within: float = 5.0) -> None:
        """Wait until at least ``n`` requests have arrived (at most ``within`` seconds)."""
        async with asyncio.timeout(within), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= n)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(
            RequestRecord(time.monotonic(), request.headers.get("Authorization"), request.path)
        )
        async with self._arrived:
            self._arrived.notify_all()
        steps = self.scripts.popleft() if self.scripts else list(self.default)
        if steps and isinstance(steps[0], Respond):
            first = steps[0]
            return web.Response(status=first.status, headers=first.headers)
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        try:
            for step in steps:
                if isinstance(step, Send):
                    await resp.write(step.data)
                elif isinstance(step, Drip):
                    n = max(1, -(-len(step.data) // step.chunk))
                    pause = step.seconds / n
                    for i in range(0, len(step.data), step.chunk):
                        await resp.write(step.data[i : i + step.chunk])
                        await asyncio.sleep(pause)
                elif isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                elif isinstance(step, Cut):
                    assert request.transport is not None
                    request.transport.abort()
                    return resp
                elif isinstance(step, Close):
                    await resp.write_eof()
                    return resp
                elif isinstance(step, Hang):
                    break
            await self._stopping.wait()
        except ConnectionError:  # the client went away
            pass
        return resp
