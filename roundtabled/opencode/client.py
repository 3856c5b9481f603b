"""Typed async client of the OpenCode server's HTTP API (opencode-ai 1.18.33).

The one place that talks HTTP to the server once connected, and the one place with retries of
its requests (tenacity; ``detect.py`` asks a starting 2.x again before that):

- Idempotent requests (GET, PATCH, abort, permission replies) are retried on transient failures
  (connection errors, timeouts, 5xx) with capped exponential backoff: 3 attempts, 0.2 s → 1 s.
- A **busy database** (:func:`busy_database`: a 500 ``UnknownError`` / ``Failed to execute
  statement`` / ``database is locked``) is what OpenCode on SQLite answers when another process
  holds the write lock for longer than the server's own 5 s lock timeout; nothing was written.
  Idempotent requests then keep retrying for up to :data:`BUSY_WINDOW_S` seconds (jittered
  backoff, 0.5 s → 4 s), and so do ``noReply`` messages, each retry only after a read showed the
  message (client-chosen id) is not stored yet.
- Requests that create something new (``prompt_async``, session creation) are never retried
  here: a retried prompt could become a second turn (a reused message id appends parts). The
  engine re-reads the session and decides (level-triggered: docs/design.md).
- Every request has a timeout (``timeout`` seconds, default 30) and the number of requests in
  flight is bounded (``max_concurrency``).
- 404 → :class:`NotFound` (a deleted session is never "completed"), 401 → :class:`AuthFailed`
  naming ``OPENCODE_SERVER_PASSWORD``; the password itself never appears in an error or a log.
- Bodies are requested uncompressed (``Accept-Encoding: identity``): the daemon runs beside the
  server (loopback), where gzip only costs both processes CPU on the same cores. Measured with an
  8 MB reply (regression "huge events under load", 2 cores): its message list is ~9 KB gzipped
  but took 17–66 ms to inflate on the event loop (plus the server's deflate); uncompressed it is
  read in ~7 ms. Bodies are read in slices (:func:`_read_body`) so that no one event-loop step
  handles more than :data:`READ_SLICE` bytes of one; ``orjson.loads`` of an 8 MB list (~6 ms,
  holding the GIL, so no thread would help) is the one remaining step of that size.

``bytes_read`` counts response body bytes, so tests and benchmarks can check that a turn reads only
its own messages (regression: message lists of tens of MB)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any, Self
from urllib.parse import quote

import aiohttp
import orjson
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    wait_exponential,
    wait_random_exponential,
)

from roundtabled.core.messages import busy_text
from roundtabled.errors import AuthFailed, NotFound, TransportError
from roundtabled.opencode.http_clock import HTTP_CLOCK, HttpClock

# ── when a request is sent again (the rules of the module docstring, as tenacity callbacks) ─────


def retryable(exc: BaseException) -> bool:
    """Whether ``exc`` may be retried: a transient :class:`TransportError` (connection error,
    timeout, 5xx), never a 401."""
    return isinstance(exc, TransportError) and exc.retryable and not isinstance(exc, AuthFailed)


BUSY_WINDOW_S = 30.0
"""Seconds a write keeps being retried while the server's database is busy."""
ATTEMPTS = 3
"""Attempts of an idempotent request on other transient failures."""


def busy_database(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the server's transient 500 for a locked database (see
    :data:`BUSY_MARKERS`). A malformed path id also gives 500 ``UnknownError``; the daemon only
    sends ids it read from the server or made itself, so there it means a busy database."""
    return isinstance(exc, TransportError) and exc.status == 500 and busy_text(str(exc))


class RetryPolicy:
    """When to stop and how long to wait (tenacity callbacks): a busy database is retried for
    ``busy_window`` s with jittered backoff from ``busy_wait`` s (×2, at most 8×); other
    retryable failures get :data:`ATTEMPTS` attempts, 0.2 s → 1 s apart."""

    def __init__(self, busy_window: float, busy_wait: float) -> None:
        self.busy_window = busy_window
        self._busy = wait_random_exponential(multiplier=busy_wait, max=busy_wait * 8)
        self._other = wait_exponential(multiplier=0.2, max=1.0)

    @staticmethod
    def failure(state: RetryCallState) -> BaseException | None:
        return state.outcome.exception() if state.outcome is not None else None

    def stop(self, state: RetryCallState) -> bool:
        if busy_database(self.failure(state)):
            return (state.seconds_since_start or 0.0) >= self.busy_window
        return state.attempt_number >= ATTEMPTS

    def wait(self, state: RetryCallState) -> float:
        if busy_database(self.failure(state)):
            return float(self._busy(state))
        return float(self._other(state))


Json = Any
Message = dict[str, Any]
"""One ``{info, parts}`` item of ``GET /session/{id}/message`` (docs/opencode-server.md, 'Messages
and parts')."""


@contextlib.contextmanager
def _awaiting(clock: HttpClock | None) -> Iterator[None]:
    """The block is one request awaiting the server on ``clock`` (none: nothing counts)."""
    if clock is None:
        yield
        return
    clock.enter()
    try:
        yield
    finally:
        clock.leave()


class HttpTransport:
    """HTTP to one OpenCode server: the session, retries, timeouts, the bounded pool, the byte
    and request counters. :class:`OpenCodeClient` adds the server's routes.

    Args:
        base_url: e.g. ``"http://127.0.0.1:4096"`` (no trailing slash needed).
        username / password: HTTP Basic credentials (``OPENCODE_SERVER_PASSWORD``;
        docs/opencode-server.md, 'Authentication').
        timeout: seconds for one request (connect + read).
        max_concurrency: requests in flight at once.
        busy_window: seconds a write is retried while the server's database is busy
            (:func:`busy_database`); ``busy_wait``: first backoff between those retries (s).
    """

    def __init__(
        self,
        base_url: str,
        *,
        username: str = "opencode",
        password: str | None = None,
        timeout: float = 30.0,
        max_concurrency: int = 16,
        busy_window: float = BUSY_WINDOW_S,
        busy_wait: float = 0.5,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._policy = RetryPolicy(busy_window, busy_wait)
        self.busy_retries = 0
        """Requests sent again because the server's database was busy."""
        # aiohttp 3.14 deprecates BasicAuth/``auth=``: send the header ourselves.
        self._headers = (
            {"Authorization": aiohttp.encode_basic_auth(username, password)} if password else {}
        )
        self.timeout = timeout
        self._sem = asyncio.Semaphore(max_concurrency)
        self._session: aiohttp.ClientSession | None = None
        self._max_concurrency = max_concurrency
        self.bytes_read = 0
        self.requests = 0

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers={**self._headers, "Accept-Encoding": "identity"},  # see module doc
                connector=aiohttp.TCPConnector(limit=self._max_concurrency * 2),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                json_serialize=lambda o: orjson.dumps(o).decode(),
            )
        return self._session

    async def close(self) -> None:
        """Close the underlying HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Json = None,
        retry: bool = True,
        timeout: float | None = None,
    ) -> tuple[Json, Mapping[str, str]]:
        if not retry:
            return await self._once(method, path, params=params, body=body, timeout=timeout)
        async for attempt in self._retrying(retryable):
            with attempt:
                return await self._once(method, path, params=params, body=body, timeout=timeout)
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, method: str, path: str, status: int, raw: bytes | bytearray) -> TransportError:
        """The exception for an error answer (``status`` ≥ 400, body ``raw``); each major's
        client reads its own error bodies."""
        return _status_error(method, path, status, raw)

    def _retrying(self, which: Any) -> AsyncRetrying:
        return AsyncRetrying(
            stop=self._policy.stop,
            wait=self._policy.wait,
            retry=retry_if_exception(which),
            before_sleep=self._note_retry,
            reraise=True,
        )

    def _note_retry(self, state: RetryCallState) -> None:
        if busy_database(self._policy.failure(state)):
            self.busy_retries += 1

    async def _once(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None,
        body: Json,
        timeout: float | None,
    ) -> tuple[Json, Mapping[str, str]]:
        clock = HTTP_CLOCK.get()
        with _awaiting(clock):
            url = self.base_url + path
            data = orjson.dumps(body) if body is not None else None
            headers = {"content-type": "application/json"} if data is not None else None
            kwargs: dict[str, Any] = {}
            if timeout is not None:
                kwargs["timeout"] = aiohttp.ClientTimeout(total=timeout)
            asked = time.perf_counter()
            async with self._sem:
                self.requests += 1
                if clock is not None:
                    clock.queued += time.perf_counter() - asked
                try:
                    async with self._http().request(
                        method, url, params=params, data=data, headers=headers, **kwargs
                    ) as resp:
                        raw = await _read_body(resp)
                        self.bytes_read += len(raw)
                        if resp.status >= 400:
                            raise self._error(method, path, resp.status, raw)
                        if not raw:
                            return None, resp.headers
                        try:
                            return orjson.loads(raw), resp.headers
                        except orjson.JSONDecodeError as exc:
                            raise TransportError(
                                f"{method} {path}: response is not JSON",
                                status=resp.status,
                                retryable=False,
                            ) from exc
                except TransportError:
                    raise
                except TimeoutError as exc:
                    raise TransportError(f"{method} {path}: timed out", retryable=True) from exc
                except aiohttp.ClientError as exc:
                    raise TransportError(
                        f"{method} {path}: {type(exc).__name__}: {exc}", retryable=True
                    ) from exc


class OpenCodeClient(HttpTransport):
    """Async client of one OpenCode server: one method per route the daemon uses (arguments as
    :class:`HttpTransport`)."""

    # -- server ---------------------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        """``GET /global/health`` → ``{"healthy": true, "version": "1.18.33"}``."""
        data, _ = await self._request("GET", "/global/health", timeout=5.0)
        return dict(data)

    async def path(self) -> Any:
        """``GET /path``: the server's own directories (``{"directory": …, …}``)."""
        data, _ = await self._request("GET", "/path")
        return data

    async def agents(self, directory: str | None = None) -> list[dict[str, Any]]:
        """``GET /agent`` for ``directory`` (docs/opencode-server.md, 'Agents'): every agent, hidden
        ones included."""
        data, _ = await self._request("GET", "/agent", params=_dir(directory))
        return list(data)

    async def config(self, directory: str | None = None) -> dict[str, Any]:
        """``GET /config`` for ``directory``: the merged configuration (``model``, ``agent`` …)."""
        data, _ = await self._request("GET", "/config", params=_dir(directory))
        return dict(data)

    async def providers(self, directory: str | None = None) -> dict[str, Any]:
        """``GET /config/providers`` for ``directory``: the providers a prompt can use
        (``{"providers": [{"id", "models": {modelID: …}}], "default": …}``; see
        :func:`roundtabled.opencode.v1_wire.provider_models`)."""
        data, _ = await self._request("GET", "/config/providers", params=_dir(directory))
        return dict(data)

    async def tool_ids(self, directory: str | None = None) -> list[str]:
        """``GET /experimental/tool/ids`` for ``directory``: the names of the tools the server
        loaded there (built-ins and custom ``.opencode/tool/NAME.ts`` files)."""
        data, _ = await self._request("GET", "/experimental/tool/ids", params=_dir(directory))
        return [str(t) for t in data]

    # -- sessions -------------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        directory: str | None,
        parent_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``POST /session`` (not retried: a retry could create a second session)."""
        body: dict[str, Any] = {}
        if parent_id:
            body["parentID"] = parent_id
        if title:
            body["title"] = title
        if metadata is not None:
            body["metadata"] = metadata
        data, _ = await self._request(
            "POST", "/session", params=_dir(directory), body=body, retry=False
        )
        return dict(data)

    async def get_session(self, session_id: str) -> dict[str, Any]:
        """``GET /session/{id}``. Raises :class:`NotFound` when deleted."""
        data, _ = await self._request("GET", f"/session/{_seg(session_id)}")
        return dict(data)

    async def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``PATCH /session/{id}``; ``metadata`` replaces the whole object (docs/opencode-server.md,
        'Sessions')."""
        body: dict[str, Any] = {}
        if title is not None:
            body["title"] = title
        if metadata is not None:
            body["metadata"] = metadata
        data, _ = await self._request("PATCH", f"/session/{_seg(session_id)}", body=body)
        return dict(data)

    async def delete_session(self, session_id: str) -> None:
        """``DELETE /session/{id}`` (also deletes descendants)."""
        await self._request("DELETE", f"/session/{_seg(session_id)}")

    async def list_sessions(
        self, directory: str | None = None, *, limit: int = 1_000_000
    ) -> list[dict[str, Any]]:
        """``GET /session`` of ``directory``, newest update first, at most ``limit`` sessions.

        The server returns only the newest 100 without ``limit`` (``limit=0`` returns none), so
        the start-up scan must pass one (a roundtable older than the 100 last updated sessions
        would be missed).
        """
        params = {**(_dir(directory) or {}), "limit": str(limit)}
        data, _ = await self._request("GET", "/session", params=params)
        return list(data)

    async def children(self, session_id: str) -> list[dict[str, Any]]:
        """``GET /session/{id}/children``: direct children."""
        data, _ = await self._request("GET", f"/session/{_seg(session_id)}/children")
        return list(data)

    async def statuses(self, directory: str | None = None) -> dict[str, dict[str, Any]]:
        """``GET /session/status``: only non-idle sessions of ``directory``
        (docs/opencode-server.md, 'Sessions')."""
        data, _ = await self._request("GET", "/session/status", params=_dir(directory))
        return dict(data or {})

    async def abort(self, session_id: str) -> None:
        """``POST /session/{id}/abort`` (always ``true``; idempotent)."""
        await self._request("POST", f"/session/{_seg(session_id)}/abort")

    # -- messages -------------------------------------------------------------------------------

    async def messages(
        self, session_id: str, *, limit: int | None = None, before: str | None = None
    ) -> tuple[list[Message], str | None]:
        """``GET /session/{id}/message``: oldest first.

        ``limit``: newest N only; ``before``: cursor of an older page. Returns the messages and the
        cursor of the next older page (``None`` at the oldest page) (docs/opencode-server.md,
        'Messages and parts').
        """
        params: dict[str, str] = {}
        if limit is not None:
            params["limit"] = str(limit)
        if before is not None:
            params["before"] = before
        data, headers = await self._request(
            "GET", f"/session/{_seg(session_id)}/message", params=params or None
        )
        return list(data), headers.get("x-next-cursor")

    async def message(self, session_id: str, message_id: str) -> Message:
        """``GET /session/{id}/message/{msgID}``. Raises :class:`NotFound`."""
        data, _ = await self._request(
            "GET", f"/session/{_seg(session_id)}/message/{_seg(message_id)}"
        )
        return dict(data)

    async def prompt_async(self, session_id: str, body: dict[str, Any]) -> None:
        """``POST /session/{id}/prompt_async`` → 204; the turn runs in the background.

        Never retried (see module docstring). ``body``: ``{parts, agent, model, messageID, …}``.
        """
        await self._request(
            "POST", f"/session/{_seg(session_id)}/prompt_async", body=body, retry=False
        )

    async def prompt(
        self, session_id: str, body: dict[str, Any], *, timeout: float = 600.0
    ) -> dict[str, Any]:
        """``POST /session/{id}/message``: a prompt answered in the same request (the assistant
        message, ``{"info", "parts"}``; see :func:`roundtabled.opencode.v1_wire.prompt_reply`).
        Never retried (a retry would prompt twice)."""
        data, _ = await self._request(
            "POST", f"/session/{_seg(session_id)}/message", body=body, retry=False, timeout=timeout
        )
        return dict(data)

    async def post_no_reply(
        self,
        session_id: str,
        parts: list[dict[str, Any]],
        *,
        message_id: str,
        agent: str | None = None,
    ) -> Message:
        """Store a ``noReply`` user message (no model turn; into idle sessions only:
        docs/opencode-server.md, 'Messages and parts').

        Retried only while the server's database is busy (:func:`busy_database`), and each time
        only after ``GET`` of ``message_id`` found no such message with parts (a resend with the
        same id would append the parts a second time). Other failures are not retried; the caller
        looks for ``message_id`` before sending again.
        """
        body: dict[str, Any] = {"noReply": True, "messageID": message_id, "parts": parts}
        if agent:
            body["agent"] = agent
        path = f"/session/{_seg(session_id)}/message"
        async for attempt in self._retrying(busy_database):
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    stored = await self._stored(session_id, message_id)
                    if stored is not None:
                        return stored
                data, _ = await self._request("POST", path, body=body, retry=False)
                return dict(data)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _stored(self, session_id: str, message_id: str) -> Message | None:
        """``message_id`` of ``session_id`` if it exists with at least one part, else ``None``."""
        try:
            msg = await self.message(session_id, message_id)
        except NotFound:
            return None
        return msg if msg.get("parts") else None

    async def update_part(
        self, session_id: str, message_id: str, part: dict[str, Any]
    ) -> dict[str, Any]:
        """``PATCH /session/{id}/message/{msgID}/part/{partID}`` with the whole new part."""
        data, _ = await self._request(
            "PATCH",
            f"/session/{_seg(session_id)}/message/{_seg(message_id)}/part/{_seg(part['id'])}",
            body=part,
        )
        return dict(data)

    # -- the seats' permission and question requests (engine.requests answers them) -------------

    async def permissions(self, directory: str | None = None) -> list[dict[str, Any]]:
        """``GET /permission``: pending permission requests of ``directory``."""
        data, _ = await self._request("GET", "/permission", params=_dir(directory))
        return list(data or [])

    async def reply_permission(
        self,
        request_id: str,
        reply: str,
        message: str | None = None,
        directory: str | None = None,
    ) -> None:
        """``POST /permission/{id}/reply`` with ``reply`` = once | always | reject."""
        body: dict[str, Any] = {"reply": reply}
        if message:
            body["message"] = message
        await self._request(
            "POST", f"/permission/{_seg(request_id)}/reply", params=_dir(directory), body=body
        )

    async def questions(self, directory: str | None = None) -> list[dict[str, Any]]:
        """``GET /question``: pending ``question`` tool requests of ``directory``."""
        data, _ = await self._request("GET", "/question", params=_dir(directory))
        return list(data or [])

    async def answer_question(
        self, request_id: str, answers: list[list[str]], directory: str | None = None
    ) -> None:
        """``POST /question/{id}/reply`` with one list of answer labels per question."""
        await self._request(
            "POST",
            f"/question/{_seg(request_id)}/reply",
            params=_dir(directory),
            body={"answers": answers},
        )

    async def reject_question(self, request_id: str, directory: str | None = None) -> None:
        """``POST /question/{id}/reject``."""
        await self._request("POST", f"/question/{_seg(request_id)}/reject", params=_dir(directory))

    # -- TUI ------------------------------------------------------------------------------------

    async def toast(
        self,
        message: str,
        *,
        title: str | None = None,
        variant: str = "info",
        duration_ms: int | None = None,
        directory: str | None = None,
    ) -> None:
        """``POST /tui/show-toast`` (``variant``: info | success | warning | error)."""
        body: dict[str, Any] = {"message": message, "variant": variant}
        if title:
            body["title"] = title
        if duration_ms:
            body["duration"] = duration_ms
        await self._request("POST", "/tui/show-toast", params=_dir(directory), body=body)


READ_SLICE = 256 * 1024
"""Bytes of a response body (after decompression) read per event-loop step."""


async def _read_body(resp: aiohttp.ClientResponse) -> bytearray:
    """The whole body, yielding to the event loop after every :data:`READ_SLICE` bytes.

    ``resp.read()`` handles a body that has already arrived in one loop step; for a compressed
    one (a proxy may compress even though identity is asked for) that step inflates all of it:
    the ~8 MB message list of a long reply took 35–66 ms of gzip on the loop, stalling every other
    roundtable (regression "huge events under load"). Read in slices, a step costs about a
    millisecond; a body of up to ``READ_SLICE`` bytes takes no extra step.
    """
    body = bytearray()
    since = 0
    async for chunk in resp.content.iter_chunked(READ_SLICE):
        body += chunk
        since += len(chunk)
        if since >= READ_SLICE:
            since = 0
            await asyncio.sleep(0)
    return body


def _dir(directory: str | None) -> dict[str, str] | None:
    return {"directory": directory} if directory else None


def _seg(value: str) -> str:
    return quote(value, safe="")


def _status_error(method: str, path: str, status: int, raw: bytes | bytearray) -> TransportError:
    detail = raw[:300].decode("utf-8", "replace").strip()
    if status == 404:
        return NotFound(f"{method} {path}: not found ({detail})")
    if status == 401:
        return AuthFailed(
            "OpenCode rejected the credentials (401): set OPENCODE_SERVER_PASSWORD (or "
            "server_password in roundtabled's config) to the server's password"
        )
    return TransportError(
        f"{method} {path}: HTTP {status}: {detail}", status=status, retryable=status >= 500
    )
