"""Subscription to the OpenCode server's event stream, with reconnect, backoff and liveness.

:class:`EventStream` reads ``GET {server_url}/global/event`` (every project directory's events,
gotcha 8) and hands each parsed :class:`~roundtabled.opencode.events.Event` to a cheap synchronous
callback. It runs until cancelled; it never gives up and never raises for network or server trouble.

Invariants and the server behaviour they come from:

- **Events are hints; there is no replay** (docs/opencode-server.md, 'The event stream': no ``id:``
  lines,
  ``Last-Event-ID`` ignored). Every time a connection is established — the first
  ``server.connected`` arrives — ``on_connect()`` is awaited so the daemon can resync everything
  from REST. ``on_connect`` runs in its own task, concurrently with event delivery (so a slow
  resync does not stall the reader and trip the liveness timeout); calls never overlap: a connect
  that happens while a resync still runs queues exactly one more resync.
- **Liveness is measured in bytes, not events.** The server sends ``server.heartbeat`` every 10.0 s.
  A connection that receives *no bytes* for ``heartbeat_timeout`` seconds (default 25 s: two
  missed heartbeats plus margin) is declared dead, even when the socket stays open (half-open TCP,
  a stuck proxy). The timer is re-armed on every received chunk, so an 8 MB
  ``message.part.updated`` that trickles in slowly keeps the connection alive.
- **Bounded retry.** Failed attempts and lost connections are retried after a capped, jittered,
  exponential delay (:class:`Backoff`: ``initial`` × ``factor``ⁿ up to ``maximum``, uniformly
  jittered but never below ``initial``, so even a steady 401 cannot turn into a tight loop). The
  delay returns to ``initial`` only after a connection stayed up for ``stable_after`` seconds.
- **Credentials never reach a log line or a reason string.** Userinfo in ``server_url`` is moved
  into Basic auth and stripped from the logged URL.

Why a hand-written SSE decoder (:class:`SSEDecoder`) over ``response.content.readany()`` instead
of aiohttp-sse-client: its reader takes whole lines (``StreamReader.readline()``), so a slowly
arriving 8 MB line shows no progress and liveness could not be measured in bytes (only through the
library's private response object); it decodes and copies every line before ``parse_event`` can
peek; its own reconnect loop (fixed doubling, no jitter, no cap) would fight ours; and it costs
more CPU per event. Measurements and the command: ``docs/design.md``, "The transport", and
``bench/README.md`` (``python -m bench.transport``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Final

import aiohttp
from yarl import URL

from roundtabled.opencode.events import (
    SERVER_CONNECTED,
    SERVER_HEARTBEAT,
    SERVER_INSTANCE_DISPOSED,
    Event,
    parse_event,
)

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "Backoff",
    "EventStream",
    "SSEDecoder",
    "SSEEventTooLarge",
]

log = logging.getLogger("roundtabled.stream")

DEFAULT_MAX_EVENT_BYTES: Final = 64 * 1024 * 1024
"""Largest accepted SSE event (bytes). Whole parts are sent in one event; 16 MB must pass."""

_READ_BUFSIZE: Final = 1024 * 1024
"""aiohttp's per-connection read buffer (bytes): bigger chunks, fewer Python iterations."""

_BOM: Final = b"\xef\xbb\xbf"


class SSEEventTooLarge(Exception):
    """An SSE event grew past ``max_event_bytes`` without a terminating blank line.

    ``payloads`` holds the events completed by the same feed before the oversized one.
    """

    def __init__(self, message: str, payloads: list[bytes]) -> None:
        super().__init__(message)
        self.payloads = payloads


def _basic_auth(username: str, password: str) -> str:
    """``Authorization`` header value (aiohttp 3.14 deprecates ``BasicAuth``; older lacks
    ``encode_basic_auth``)."""
    encode = getattr(aiohttp, "encode_basic_auth", None)
    if encode is not None:
        return str(encode(username, password))
    return str(aiohttp.BasicAuth(username, password).encode())


class SSEDecoder:
    """Incremental decoder of ``text/event-stream`` bytes into ``data`` payloads.

    Follows the WHATWG SSE parsing rules that matter for a data-only client: lines end in CRLF, LF
    or CR (a CR at a chunk boundary is held until the next byte arrives); lines starting with
    ``:`` are comments; ``data`` lines of one event are joined with ``\\n``; a single space after
    the colon is removed; ``event``, ``id`` and ``retry`` are ignored (the OpenCode server sends
    none and the event type lives inside the JSON: docs/opencode-server.md, 'The event stream'); an
    event without ``data``
    is not dispatched; a leading UTF-8 BOM is dropped; an unterminated event at end of stream is
    discarded (:meth:`reset`).

    Cost is linear in the input: each feed scans only the new bytes for the blank-line terminator,
    and the common frame ``data: <json>\\n\\n`` is sliced out without per-line work.
    """

    __slots__ = ("_buf", "_pending_cr", "_started", "max_event_bytes")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        """``max_event_bytes``: a pending event longer than this makes :meth:`feed` raise
        :class:`SSEEventTooLarge` (after which the decoder is reset)."""
        self.max_event_bytes = max_event_bytes
        self._buf = bytearray()
        self._pending_cr = False
        self._started = False

    def reset(self) -> None:
        """Forget any partial event (call at the start of every connection)."""
        self._buf = bytearray()
        self._pending_cr = False
        self._started = False

    @property
    def pending_bytes(self) -> int:
        """Bytes of the event currently being received (not yet terminated)."""
        return len(self._buf)

    def feed(self, chunk: bytes | bytearray) -> list[bytes]:
        """Add received bytes; return the ``data`` payloads of the events they complete."""
        if not chunk:
            return []
        if not self._started:
            self._started = True
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
        if self._pending_cr:
            self._pending_cr = False
            chunk = b"\r" + chunk
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):
                self._pending_cr = True
                chunk = chunk[:-1]
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf
        # A terminator "\n\n" may straddle the old and the new bytes: rescan one old byte.
        scan = len(buf) - 1 if buf else 0
        buf += chunk
        out: list[bytes] = []
        pos = 0
        size = len(buf)
        with memoryview(buf) as view:  # slices copy once (``bytes(buf[a:b])`` copies twice)
            while pos < size:
                if buf[pos] == 10:  # a blank line with no event before it
                    pos += 1
                    continue
                end = buf.find(b"\n\n", pos if pos > scan else scan)
                if end < 0:
                    break
                if buf.startswith(b"data: ", pos) and buf.find(b"\n", pos, end) < 0:
                    out.append(bytes(view[pos + 6 : end]))
                else:
                    data = _block_data(bytes(view[pos:end]))
                    if data is not None:
                        out.append(data)
                pos = end + 2
        if pos:
            del buf[:pos]
        if len(buf) > self.max_event_bytes:
            pending = len(buf)
            self.reset()
            raise SSEEventTooLarge(
                f"event larger than {self.max_event_bytes} bytes ({pending} bytes without end)",
                out,
            )
        return out


def _block_data(block: bytes) -> bytes | None:
    """The joined ``data`` of one event block (lines without the blank terminator), or None."""
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line[0] == 58:  # ":" comment
            continue
        name, _, value = line.partition(b":")
        if name == b"data":
            data.append(value[1:] if value.startswith(b" ") else value)
    if not data:
        return None
    return b"\n".join(data)


class Backoff:
    """Capped exponential backoff with jitter (seconds).

    The n-th delay (n from 0) is drawn uniformly from ``[initial, ceiling_n]`` where
    ``ceiling_n = min(maximum, initial * factor**n)``: full jitter over the exponential window,
    floored at ``initial`` so a persistent failure (401, connection refused) never retries in a
    tight loop, and spread so many daemons do not reconnect in lock-step after a server restart.
    """

    __slots__ = ("_rng", "attempt", "factor", "initial", "maximum")

    def __init__(
        self,
        initial: float = 0.5,
        factor: float = 2.0,
        maximum: float = 30.0,
        *,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or factor < 1 or maximum < initial:
            raise ValueError("need 0 < initial <= maximum and factor >= 1")
        self.initial = initial
        self.factor = factor
        self.maximum = maximum
        self.attempt = 0
        self._rng = rng or random.Random()

    def ceiling(self) -> float:
        """Upper bound (seconds) of the next delay."""
        return min(self.maximum, self.initial * self.factor**self.attempt)

    def next_delay(self) -> float:
        """The next delay in seconds; advances the attempt counter."""
        ceiling = self.ceiling()
        if ceiling < self.maximum:
            self.attempt += 1  # stops growing once capped (no float overflow)
        if ceiling <= self.initial:
            return self.initial
        return self._rng.uniform(self.initial, ceiling)

    def reset(self) -> None:
        """Back to ``initial`` (after a stable connection)."""
        self.attempt = 0


class EventStream:
    """A self-healing subscription to ``GET {server_url}/global/event``.

    Health attributes (read-only for callers): ``connected``, ``last_event_at`` and
    ``last_rx_at`` (``time.monotonic()`` seconds of the last dispatched event / received chunk, or
    ``None``), ``events`` (dispatched), ``malformed`` (payloads that were not an event), ``bytes``
    (body bytes received), ``connects`` (connections established), ``reconnects`` (attempts after
    the first), ``last_error`` (reason of the last disconnect or failed attempt while the stream
    is down; ``None`` once a connection delivers its first event again).
    """

    def __init__(
        self,
        server_url: str,
        on_event: Callable[[Event], None],
        *,
        on_connect: Callable[[], Awaitable[None]] | None = None,
        on_disconnect: Callable[[str], None] | None = None,
        username: str = "opencode",
        password: str | None = None,
        path: str = "/global/event",
        heartbeat_timeout: float = 25.0,
        connect_timeout: float = 10.0,
        backoff_initial: float = 0.5,
        backoff_factor: float = 2.0,
        backoff_max: float = 30.0,
        stable_after: float = 60.0,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        session: aiohttp.ClientSession | None = None,
        rng: random.Random | None = None,
        lazy_types: frozenset[str] = frozenset(),
        parse: Callable[[bytes], Event | None] | None = None,
    ) -> None:
        """Configure; nothing connects before :meth:`run`.

        Args:
            server_url: base URL of ``opencode serve``, e.g. ``http://127.0.0.1:4096``. Userinfo
                in it (``http://user:pw@host``) is used as Basic auth when ``password`` is None.
            on_event: called synchronously for every parsed event, heartbeats included; must be
                cheap (it runs on the reader). Exceptions are logged and swallowed.
            on_connect: awaited (in a separate task) after each connection is established, i.e.
                when its first event (normally ``server.connected``) arrives: resync here.
            on_disconnect: called with a human reason each time an attempt fails or an
                established connection ends ("server closed the stream", "instance disposed",
                "no heartbeat for 25.0 s", "connection refused", "401 unauthorized: …").
            username, password: HTTP Basic credentials (``OPENCODE_SERVER_USERNAME`` /
                ``OPENCODE_SERVER_PASSWORD`` of the server: docs/opencode-server.md,
                'Authentication').
            path: stream route; ``/global/event`` covers every directory (gotcha 8).
            heartbeat_timeout: seconds without any received byte after which the connection is
                declared dead (the server sends a heartbeat every 10.0 s).
            connect_timeout: seconds allowed to connect and receive the response headers.
            backoff_initial, backoff_factor, backoff_max: see :class:`Backoff` (seconds).
            stable_after: seconds a connection must stay up for the backoff to reset.
            max_event_bytes: largest accepted event (bytes); larger ones drop the connection.
            session: an aiohttp session to use (not closed here); default: an own session.
            rng: random source for jitter (tests pass a seeded one).
            lazy_types: event types whose body the consumer never reads: huge payloads of these
                types are not JSON-parsed (see :func:`~roundtabled.opencode.events.parse_event`).
            parse: turns one event's ``data`` payload into an :class:`Event` (``None`` =
                malformed); default :func:`~roundtabled.opencode.events.parse_event` (1.x
                envelopes).
                OpenCode 2.x passes :func:`roundtabled.opencode.v2.parse_v2_event`.
        """
        url = URL(server_url)
        if url.user is not None and password is None:
            username, password = url.user, url.password or ""
        self._base = url.with_user(None).with_password(None)
        self._url = self._base / path.lstrip("/")  # keeps a reverse-proxy path prefix
        self._headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if password is not None:
            self._headers["Authorization"] = _basic_auth(username, password)
        self._password_set = password is not None
        self._on_event = on_event
        self._on_connect = on_connect
        self._on_disconnect = on_disconnect
        self._heartbeat_timeout = heartbeat_timeout
        self._connect_timeout = connect_timeout
        self._stable_after = stable_after
        self._session = session
        self._backoff = Backoff(backoff_initial, backoff_factor, backoff_max, rng=rng)
        self.lazy_types = lazy_types
        self._parse = parse
        self._decoder = SSEDecoder(max_event_bytes)
        self._connect_pending = False
        self._connect_task: asyncio.Task[None] | None = None
        self._resync_again = False
        self._connected_at: float | None = None
        self._last_type: str | None = None
        self._last_reason: str | None = None

        self.connected = False
        self.last_event_at: float | None = None
        self.last_rx_at: float | None = None
        self.events = 0
        self.malformed = 0
        self.bytes = 0
        self.connects = 0
        self.reconnects = 0
        self.last_error: str | None = None
        self.down_since: float | None = None
        """Wall-clock time (s since the epoch) the stream went down; ``None`` while it is up."""

    @property
    def url(self) -> str:
        """The stream URL, without credentials (safe to log)."""
        return str(self._url)

    @property
    def backoff(self) -> Backoff:
        """The reconnect backoff (for health reports and tests)."""
        return self._backoff

    # --- parse + dispatch path (also the benchmark hook) ----------------------------------------

    def feed_bytes(self, chunk: bytes | bytearray) -> int:
        """Decode received body bytes, parse and dispatch the events they complete.

        This is exactly the path the live connection uses, so a benchmark can push recorded SSE
        bytes through it without a network. Needs no event loop. Returns the number of events
        dispatched. Raises :class:`SSEEventTooLarge` like the live path.
        """
        self.bytes += len(chunk)
        try:
            payloads = self._decoder.feed(chunk)
        except SSEEventTooLarge as exc:
            self._dispatch(exc.payloads)
            raise
        if not payloads:
            return 0
        return self._dispatch(payloads)

    def _dispatch(self, payloads: list[bytes]) -> int:
        on_event = self._on_event
        count = 0
        for payload in payloads:
            ev = (
                parse_event(payload, lazy_types=self.lazy_types)
                if self._parse is None
                else self._parse(payload)
            )
            if ev is None:
                self.malformed += 1
                log.warning("skipping malformed event payload: %r", payload[:200])
                continue
            etype = ev.type
            if not self.connected:
                self._mark_connected(etype)
            if etype != SERVER_HEARTBEAT:
                self._last_type = etype
            try:
                on_event(ev)
            except Exception:
                log.exception("on_event failed for %s", etype)
            count += 1
        if count:
            self.events += count
            self.last_event_at = time.monotonic()
        return count

    def _mark_connected(self, first_type: str) -> None:
        if first_type != SERVER_CONNECTED:
            log.warning("event stream began with %s, not %s", first_type, SERVER_CONNECTED)
        if self.last_error is not None:
            # Health reports read ``last_error``: once events flow again the old reason is
            # history, and a report still naming it says the stream is down while it is not.
            log.info("event stream %s is back (it was lost: %s)", self.url, self.last_error)
            self.last_error = None
        self.down_since = None
        self.connected = True
        self.connects += 1
        self._connected_at = time.monotonic()
        self._connect_pending = True

    # --- connection loop ------------------------------------------------------------------------

    async def run(self) -> None:
        """Stream forever: connect, dispatch, reconnect with backoff. Returns only by cancel."""
        own = self._session is None
        session = self._session or aiohttp.ClientSession()
        try:
            first = True
            while True:
                if not first:
                    self.reconnects += 1
                first = False
                reason = await self._attempt(session)
                self._disconnected(reason)
                await asyncio.sleep(self._backoff.next_delay())
        finally:
            self.connected = False
            task = self._connect_task
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            if own:
                await session.close()

    async def _attempt(self, session: aiohttp.ClientSession) -> str:
        """One connection attempt, read until it ends; returns why it ended."""
        self._decoder.reset()
        self.connected = False
        self._connected_at = None
        self._last_type = None
        self._connect_pending = False
        try:
            async with asyncio.timeout(self._connect_timeout):
                resp = await session.get(
                    self._url,
                    headers=self._headers,
                    timeout=aiohttp.ClientTimeout(
                        total=None, sock_connect=self._connect_timeout, sock_read=None
                    ),
                    read_bufsize=_READ_BUFSIZE,
                )
        except TimeoutError:
            return f"no response within {self._connect_timeout:.1f} s"
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, ConnectionRefusedError):
                return "connection refused"
            return f"cannot connect: {exc.os_error or exc}"
        except (aiohttp.ClientError, OSError) as exc:
            return f"request failed: {type(exc).__name__}: {exc}"
        try:
            if resp.status == 401:
                if self._password_set:
                    return "401 unauthorized: OPENCODE_SERVER_PASSWORD rejected"
                return "401 unauthorized: server needs OPENCODE_SERVER_PASSWORD, none configured"
            if resp.status != 200:
                return f"HTTP {resp.status} {resp.reason or ''}".rstrip()
            if resp.content_type != "text/event-stream":
                return f"unexpected content type {resp.content_type!r}"
            return await self._read(resp)
        finally:
            resp.close()

    async def _read(self, resp: aiohttp.ClientResponse) -> str:
        content = resp.content
        hb = self._heartbeat_timeout
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(hb) as deadline:
                while True:
                    chunk = await content.readany()
                    if not chunk:
                        break
                    deadline.reschedule(loop.time() + hb)
                    self.last_rx_at = time.monotonic()
                    try:
                        self.feed_bytes(chunk)
                    finally:
                        if self._connect_pending:
                            self._start_on_connect()
        except TimeoutError:
            return f"no heartbeat for {hb:.1f} s"
        except SSEEventTooLarge as exc:
            return str(exc)
        except (aiohttp.ClientError, OSError) as exc:
            return f"connection lost: {type(exc).__name__}: {exc}".rstrip(": ")
        if self._last_type == SERVER_INSTANCE_DISPOSED:
            return "instance disposed"
        return "server closed the stream"

    def _disconnected(self, reason: str) -> None:
        was_connected = self.connected
        now = time.monotonic()
        if (
            was_connected
            and self._connected_at is not None
            and now - self._connected_at >= self._stable_after
        ):
            self._backoff.reset()
        self.connected = False
        self.last_error = reason
        if self.down_since is None:
            self.down_since = time.time()
        if reason == "instance disposed":
            log.info("event stream %s ended: instance disposed; reconnecting", self.url)
        elif was_connected:
            log.warning("event stream %s lost: %s", self.url, reason)
        elif reason != self._last_reason:
            log.warning("event stream %s unavailable: %s", self.url, reason)
        else:
            log.debug("event stream %s still unavailable: %s", self.url, reason)
        self._last_reason = reason
        if self._on_disconnect is not None:
            try:
                self._on_disconnect(reason)
            except Exception:
                log.exception("on_disconnect failed")

    def _start_on_connect(self) -> None:
        self._connect_pending = False
        if self._on_connect is None:
            return
        if self._connect_task is not None and not self._connect_task.done():
            self._resync_again = True  # coalesce: one more run after the current one
            return
        self._connect_task = asyncio.create_task(self._run_on_connect(), name="on_connect")

    async def _run_on_connect(self) -> None:
        assert self._on_connect is not None
        while True:
            self._resync_again = False
            try:
                await self._on_connect()
            except Exception:
                log.exception("on_connect failed")
            if not self._resync_again:
                return
