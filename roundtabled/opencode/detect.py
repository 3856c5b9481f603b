"""Which OpenCode major answers at a URL (docs/opencode-server.md, "2.x: telling the majors apart").

OpenCode 2.x removed every 1.x route: ``GET /global/health`` answers its web app (``200
text/html``), and the API lives under ``/api/*`` behind HTTP Basic. So:

- ``GET /api/info`` answering JSON ``{"version": "2.…"}`` is 2.x; a 401 whose JSON body has
  ``"_tag": "UnauthorizedError"`` is 2.x as well, with a missing or wrong password (2.x always
  asks for one).
- For its first tens of milliseconds a 2.x server answers ``GET /api/info`` with ``503`` and that
  JSON (its web app already answers ``/global/health``): it is starting, so the ask is repeated
  until ``200`` or the timeout; a 2.x still starting then is unreachable (the daemon waits for it),
  never "not OpenCode".
- Else ``GET /global/health`` answering JSON ``{"healthy": true, "version": "1.…"}`` is 1.x; a 401
  there is 1.x with a missing or wrong password.
- Anything else (HTML, another JSON, no answer) is neither.

:func:`detect_server` is what the daemon and ``roundtabled doctor`` call on connect (and may call on
each reconnect: a server can be replaced by another major behind the same URL). It never raises for
what the server answers; a connection failure is :attr:`ServerFound.reachable` ``False``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
import orjson
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_result,
    stop_after_delay,
    wait_fixed,
)

__all__ = ["ServerFound", "detect_server"]

Auth = Literal["ok", "missing", "rejected"]

_STARTING_POLL_S = 0.05
"""Seconds between asks while a 2.x server answers ``/api/info`` with 503 (starting)."""


@dataclass(frozen=True)
class ServerFound:
    """What answers at a URL.

    Attributes:
        reachable: a TCP connection and an HTTP answer came back (``False`` as well for a 2.x
            still starting at the timeout: not yet drivable).
        major: 1 or 2, or ``None`` (not an OpenCode server of a known major, or unreachable).
        version: the release (``"2.1.2"``), or ``None`` when the server did not say (401).
        auth: ``"ok"`` (answered), ``"missing"`` (401 and no password was given), ``"rejected"``
            (401 with the password given).
        detail: what was seen, in words, for a message (never the password).
    """

    reachable: bool
    major: int | None
    version: str | None
    auth: Auth
    detail: str


def _json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _starting(answer: tuple[int, Any]) -> bool:
    """Whether an answer of ``GET /api/info`` (``(HTTP status, parsed JSON)``) is a 2.x server
    still starting: 503 with its info JSON (module docstring)."""
    status, body = answer
    return status == 503 and isinstance(body, dict) and isinstance(body.get("version"), str)


def _last_answer(state: RetryCallState) -> tuple[int, Any]:
    """The last answer when the timeout ends the asking (tenacity's ``retry_error_callback``:
    called after an attempt, so ``state.outcome`` is set)."""
    if state.outcome is None:
        raise RuntimeError("tenacity gave up before asking")
    answer: tuple[int, Any] = state.outcome.result()
    return answer


def major_of(version: str) -> int | None:
    """The major of an OpenCode release (``"1.18.33"``, ``"v2.1.2"`` → 1, 2), ``None`` when
    ``version`` does not begin with one."""
    head = version.lstrip("v").split(".", 1)[0]
    return int(head) if head.isdigit() else None


async def detect_server(
    url: str, *, password: str | None = None, username: str = "opencode", timeout: float = 5.0
) -> ServerFound:
    """Ask ``url`` (``http://host:port``) which OpenCode major it runs (module docstring).

    ``password`` (and ``username``) are sent as HTTP Basic when given. ``timeout``: seconds per
    request, and the most spent waiting for a 2.x server that answers it is starting. Never raises
    for the server's answers or a refused connection."""
    base = url.rstrip("/")
    headers = {"Accept-Encoding": "identity"}
    if password:
        headers["Authorization"] = aiohttp.encode_basic_auth(username, password)
    no_auth: Auth = "rejected" if password else "missing"
    try:
        async with aiohttp.ClientSession(
            headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as http:

            async def ask_info() -> tuple[int, Any]:
                async with http.get(base + "/api/info") as resp:
                    return resp.status, _json(await resp.read())

            # A starting 2.x is asked again until it answers otherwise or the timeout runs out;
            # the last answer is kept either way (retry_error_callback).
            answer: tuple[int, Any] = await AsyncRetrying(
                retry=retry_if_result(_starting),
                wait=wait_fixed(_STARTING_POLL_S),
                stop=stop_after_delay(timeout),
                retry_error_callback=_last_answer,
            )(ask_info)
            status, body = answer
            version = body.get("version") if isinstance(body, dict) else None
            if _starting(answer):
                return ServerFound(
                    False,
                    major_of(str(version)),
                    str(version),
                    "ok",
                    f"OpenCode {version} still starting (GET /api/info: 503 for {timeout:g} s)",
                )
            if isinstance(body, dict):
                if status == 200 and isinstance(version, str):
                    return ServerFound(True, major_of(version), version, "ok", "GET /api/info")
                if status == 401 and body.get("_tag") == "UnauthorizedError":
                    return ServerFound(True, 2, None, no_auth, "GET /api/info: 401")
            async with http.get(base + "/global/health") as resp:
                raw = await resp.read()
                status = resp.status
            body = _json(raw)
            if status == 401:
                return ServerFound(True, 1, None, no_auth, "GET /global/health: 401")
            if status == 200 and isinstance(body, dict) and isinstance(body.get("version"), str):
                version = str(body["version"])
                return ServerFound(True, major_of(version), version, "ok", "GET /global/health")
            kind = "HTML" if raw.lstrip()[:1] == b"<" else ("JSON" if body is not None else "text")
            return ServerFound(
                True,
                None,
                None,
                "ok",
                f"neither GET /api/info nor GET /global/health named a version "
                f"(GET /global/health: HTTP {status}, {kind})",
            )
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return ServerFound(False, None, None, "ok", f"no answer ({type(exc).__name__})")
