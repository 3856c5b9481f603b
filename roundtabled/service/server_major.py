"""Refusing an OpenCode server the daemon cannot drive, in one line (docs/opencode-server.md,
"2.x").

The engine drives OpenCode 1.x; the 2.x shell (:mod:`roundtabled.engine.v2run`) drives 2.x.
OpenCode 2.x removed every 1.x route (its ``/global/health`` answers the web app), so
``roundtabled serve`` and ``roundtabled doctor`` ask first which major answers
(:func:`~roundtabled.opencode.detect.detect_server`) and, for a server that is no OpenCode 1.x or
2.x, or a 2.x that refuses the password, print one line saying what they found and what to do,
exit 2 and start nothing. An unreachable server is not refused: the daemon waits for it as
before.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from roundtabled import __version__
from roundtabled.opencode.binary import OPENCODE_VERSION
from roundtabled.opencode.detect import ServerFound, detect_server
from roundtabled.service import config as cfg

__all__ = ["EXIT_REFUSED", "detect_at", "refusal", "refusal_for"]

EXIT_REFUSED = 2
"""Exit code of ``serve``/``doctor`` refusing the server (a configuration to change)."""


def _port(url: str) -> int:
    try:
        return urlsplit(url).port or 4096
    except ValueError:
        return 4096


def refusal(found: ServerFound, url: str) -> str | None:
    """The one line refusing the server ``found`` at ``url``, or ``None`` when the daemon can
    drive it (1.x; 2.x with the password accepted: the 2.x shell) or nothing answered (the
    daemon waits for the server)."""
    if not found.reachable or found.major == 1:
        return None
    if found.major is None:
        return (
            f"{url} answers, but not as OpenCode 1.x or 2.x ({found.detail}): point server_url "
            f"(ROUNDTABLED_SERVER_URL) at `opencode serve` of opencode-ai {OPENCODE_VERSION}"
        )
    if found.auth == "missing":
        return (
            f"OpenCode {found.major}.x at {url} asks for a password and none is given: set "
            "server_password (OPENCODE_SERVER_PASSWORD)"
        )
    if found.auth == "rejected":
        return (
            f"OpenCode {found.major}.x at {url} rejected the password given: check "
            "server_password (OPENCODE_SERVER_PASSWORD)"
        )
    if found.major == 2:
        return None  # the 2.x shell drives it (docs/opencode-server.md, "2.x")
    return (
        f"OpenCode {found.version} at {url}: roundtabled {__version__} drives OpenCode 1.x and "
        f"2.x: run `opencode serve --port {_port(url)}` of opencode-ai {OPENCODE_VERSION} and "
        "point server_url (ROUNDTABLED_SERVER_URL) at it"
    )


async def detect_at(settings: cfg.Settings, *, timeout: float = 5.0) -> ServerFound:
    """What answers at the server of ``settings`` (asked with its credentials)."""
    password = settings.server_password.get_secret_value() if settings.server_password else None
    return await detect_server(
        settings.server_url,
        password=password,
        username=settings.server_username,
        timeout=timeout,
    )


async def refusal_for(settings: cfg.Settings, *, timeout: float = 5.0) -> str | None:
    """:func:`refusal` for the server of ``settings`` (asked with its credentials)."""
    return refusal(await detect_at(settings, timeout=timeout), settings.server_url)
