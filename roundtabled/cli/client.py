"""The control API client of the command line, its error type and exit codes.

Exit codes: 0 success; 1 error (daemon unreachable, server error); 2 bad input or configuration
(the message names the field); 3 the roundtable ended without a normal conclusion (every agent
failed, aborted, cancelled); 130 interrupted.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yarl

from roundtabled.core.validation import SESSION_ID_RE
from roundtabled.service import config as cfg

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_UNCONCLUDED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class CliError(Exception):
    """A failure to report to the user (``code`` is the exit code). ``away``: the daemon is away
    for now (a call got no answer in time, or it answered 503 while stopping), so the same call
    may succeed once it is back; :class:`ConnectionLost` is always away. ``status``: the HTTP
    status of the daemon's refusal, where one came (501: a route the daemon does not serve for
    its server's major, docs/control-api.md)."""

    def __init__(
        self,
        message: str,
        code: int = EXIT_ERROR,
        *,
        away: bool = False,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.away = away
        self.status = status


FLAG_FOR_FIELD: dict[str, str] = {
    "agents": "--agents",
    "rounds": "--rounds",
    "observer": "--observer",
    "title": "--title",
    "parentSessionID": "--parent",
    "directory": "--directory",
    "turnTimeout": "--turn-timeout",
    "extendMode": "--mode",
    "prompt": "PROMPT",
    "sessionID": "SES",
    "all": "--all",
    "limit": "--limit",
    "until": "--until",
    "opening": "--opening",
    "protocol": "--protocol",
    "adaptiveThreshold": "--adaptive-threshold",
    "context": "--context",
    "preset": "--preset",
    "sides": "--side",
    "dryRun": "--dry-run",
    "budget.tokens": "--budget-tokens",
    "budget.usd": "--budget-usd",
    "budget.seconds": "--budget-seconds",
}
"""The command-line spelling of each control API field (docs/control-api.md), so that an error
names what the user typed: ``--turn-timeout``, not ``turnTimeout``. A command adding a flag for a
new field adds it here."""


STARTING_WAIT_S = 120.0
"""How long a command waits through a daemon's "starting" answers (s)."""


class _Starting(Exception):
    """The daemon answered "starting" (its message, and the retry hint in seconds)."""

    def __init__(self, message: str, retry_s: float) -> None:
        super().__init__(message)
        self.retry_s = retry_s


def name_the_flag(message: str, field: str | None) -> str:
    """``message`` (an API error about ``field``) with the field named as its CLI flag: a
    message that starts with the field gets the flag instead; any other gets ``FLAG: `` in
    front. Unchanged when the field has no flag. A daemon message that names a field and its
    flag both (``budget.usd (--budget-usd)``, for the tool's caller and the CLI's) names the
    flag alone."""
    for name, spelled in FLAG_FOR_FIELD.items():
        message = message.replace(f"{name} ({spelled})", spelled)
    flag = FLAG_FOR_FIELD.get(field or "")
    if flag is None:
        return message
    body = message.removeprefix("Error:").lstrip()
    if body.startswith(flag):
        return f"Error: {body}"
    if re.match(rf"{re.escape(str(field))}\b", body):
        body = flag + body[len(str(field)) :]
    else:
        body = f"{flag}: {body}"
    return f"Error: {body}"


class ConnectionLost(CliError):
    """The daemon did not answer or the connection to it broke (it stopped or restarts)."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message, code, away=True)


class ControlClient:
    """Async client of the daemon's control API.

    Args:
        base_url: e.g. ``http://127.0.0.1:4747``, or ``unix:/absolute/path`` for a daemon whose
            ``control_host`` is a unix socket (README, "Configuration").
        token_file: the daemon's token file (read per client).
    """

    def __init__(self, base_url: str, token_file: Path) -> None:
        self.base_url = base_url.rstrip("/")
        self.token_file = token_file
        self._socket = base_url[len("unix:") :] if base_url.startswith("unix:") else None
        # Over a unix socket the host of the URL is only a placeholder for aiohttp.
        self._request_base = "http://localhost" if self._socket else self.base_url
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ControlClient:
        try:
            token = self.token_file.read_text().strip()
        except FileNotFoundError:
            # The daemon writes its token file when it first starts: none means no daemon has
            # run with this configuration, which a person reads as "it is not running".
            raise CliError(
                f"Error: roundtabled is not running (no daemon has started with this "
                f"configuration: its token file {self.token_file} does not exist). Start it "
                "with: roundtabled serve  (or: systemctl --user start roundtabled)"
            ) from None
        except OSError as exc:
            raise CliError(
                f"cannot read the token file {self.token_file}: {exc.strerror}. "
                "Is `roundtabled serve` running with the same configuration?"
            ) from None
        connector = aiohttp.UnixConnector(path=self._socket) if self._socket else None
        self._http = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {token}"}, connector=connector
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.close()

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> Any:
        """One request; returns decoded JSON or text. While the daemon answers "starting" (503:
        its start-up recovery has not loaded every roundtable yet, docs/control-api.md) the same
        request is sent again after its retry hint, for up to :data:`STARTING_WAIT_S` seconds.

        Raises:
            CliError: the daemon refused the request, could not be reached or kept starting.
        """
        waited = 0.0
        while True:
            try:
                return await self._call_once(method, path, body, params, timeout)
            except _Starting as exc:
                if waited >= STARTING_WAIT_S:
                    raise CliError(str(exc), EXIT_ERROR, away=True) from None
                await asyncio.sleep(exc.retry_s)
                waited += exc.retry_s

    async def _call_once(
        self,
        method: str,
        path: str,
        body: Any,
        params: dict[str, str] | None,
        timeout: float,
    ) -> Any:
        assert self._http is not None
        try:
            async with self._http.request(
                method,
                self._request_base + path,
                params=params,
                data=orjson.dumps(body) if body is not None else None,
                headers={"content-type": "application/json"} if body is not None else None,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as resp:
                raw = await resp.read()
                ctype = resp.headers.get("content-type", "")
                data: Any = orjson.loads(raw) if "json" in ctype and raw else raw.decode()
                if resp.status == 503 and isinstance(data, dict) and data.get("starting"):
                    hint = data.get("retryAfterS")
                    retry_s = float(hint) if isinstance(hint, int | float) and hint > 0 else 1.0
                    raise _Starting(str(data.get("error")), min(retry_s, 5.0))
                if resp.status >= 400:
                    msg = str(data.get("error") if isinstance(data, dict) else data)
                    field = data.get("field") if isinstance(data, dict) else None
                    raise CliError(
                        name_the_flag(msg, field if isinstance(field, str) else None),
                        EXIT_USAGE if resp.status in (400, 404) else EXIT_ERROR,
                        away=resp.status == 503,
                    )
                return data
        except aiohttp.ClientConnectionError:
            raise ConnectionLost(
                f"Error: roundtabled is not running at {self.base_url}. Start it "
                "with: roundtabled serve  (or: systemctl --user start roundtabled)"
            ) from None
        except TimeoutError:
            raise CliError(
                f"Error: roundtabled at {self.base_url} did not answer within {timeout:g} s",
                away=True,
            ) from None

    async def stream(self, path: str, opened: asyncio.Event | None = None) -> Any:
        """Iterate over the ``data:`` items of an SSE route; ``opened`` is set once the route
        answered (the daemon subscribes before it answers)."""
        assert self._http is not None
        try:
            async with self._http.get(
                self._request_base + path,
                timeout=aiohttp.ClientTimeout(total=None, sock_read=60),
            ) as resp:
                if resp.status >= 400:
                    data = orjson.loads(await resp.read())
                    field = data.get("field") if isinstance(data, dict) else None
                    # The same words as every other route's refusal (``SES: no roundtable …``).
                    raise CliError(
                        name_the_flag(
                            str(data.get("error")), field if isinstance(field, str) else None
                        ),
                        EXIT_USAGE,
                        status=resp.status,
                    )
                if opened is not None:
                    opened.set()
                async for line in resp.content:
                    if line.startswith(b"data: "):
                        yield orjson.loads(line[6:])
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError):
            ses = path.split("/")[3] if path.count("/") >= 4 else "SES"
            raise ConnectionLost(
                f"Error: lost the connection to roundtabled at {self.base_url} (it stopped or "
                f"restarted); {RESUMES_IF_RESTARTED.format(ses=ses)}"
            ) from None


RESUMES_IF_RESTARTED = (
    "if roundtabled starts again with the same state (its service restarts it, or you do), it "
    "resumes the roundtable: roundtabled watch {ses}"
)
"""What a follower that lost the daemon can say of the roundtable: nothing is known of it
while the daemon is away, and it goes on only if a daemon with the same state comes back (a
daemon that is gone for good, such as a stopped demo's, never resumes it)."""


def check_control_url(value: str, name: str = "ROUNDTABLED_URL") -> str:
    """``value`` if it is ``http(s)://host:port`` (path-less) or ``unix:/absolute/path``.

    Raises:
        CliError: (exit 2) naming ``name`` and the expected form, for anything else (aiohttp
            would fail on it later with a traceback).
    """
    problem = f"Error: {name} = {value!r}; expected http://host:port or unix:/absolute/path"
    if value.startswith("unix:"):
        if not Path(value[len("unix:") :]).is_absolute():
            raise CliError(problem, EXIT_USAGE)
        return value
    try:
        url = yarl.URL(value)
        port = url.port
    except ValueError:
        raise CliError(problem, EXIT_USAGE) from None
    if url.scheme not in ("http", "https") or not url.host or port is None:
        raise CliError(problem, EXIT_USAGE)
    if url.path not in ("", "/") or url.query_string or url.fragment:
        raise CliError(problem, EXIT_USAGE)
    return value.rstrip("/")


def control_url(settings: cfg.Settings) -> str:
    """The daemon's control URL from the settings (``ROUNDTABLED_URL`` overrides):
    ``http://host:port`` or ``unix:/path`` when ``control_host`` is a unix socket.

    Raises:
        CliError: (exit 2) ``ROUNDTABLED_URL`` is not such a URL.
    """
    override = os.environ.get("ROUNDTABLED_URL")
    if override:
        return check_control_url(override)
    if settings.control_host.startswith("unix:"):
        return settings.control_host
    host = settings.control_host
    if ":" in host:  # an IPv6 literal such as ::1
        host = f"[{host}]"
    return f"http://{host}:{settings.control_port}"


def session_arg(value: str) -> str:
    """``value`` if it is a session id; the one check of ``SES`` for status, watch, extend,
    cancel and export.

    Raises:
        CliError: (exit 2) naming ``SES`` and the form.
    """
    if not SESSION_ID_RE.match(value):
        raise CliError(
            "Error: SES must be a session id: 'ses_' then 6 to 64 letters or digits "
            f"(as printed by start and list), got {value!r}",
            EXIT_USAGE,
        )
    return value
