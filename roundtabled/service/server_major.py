"""Refusing an OpenCode server the daemon cannot drive yet, in one line (docs/opencode-server.md,
"2.x").

The engine drives OpenCode 1.x only. OpenCode 2.x removed every 1.x route (its ``/global/health``
answers the web app), so against it the daemon would wait forever for a server that "does not
answer". ``roundtabled serve`` and ``roundtabled doctor`` therefore ask first which major answers
(:func:`~roundtabled.opencode.detect.detect_server`) and, for anything but 1.x, print one line
saying what they found and what to do, exit 2 and start nothing. An unreachable server is not
refused: the daemon waits for it as before.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from roundtabled import __version__
from roundtabled.opencode.binary import OPENCODE_VERSION
from roundtabled.opencode.detect import ServerFound, detect_server
from roundtabled.service import config as cfg

__all__ = ["EXIT_REFUSED", "refusal", "refusal_for"]

EXIT_REFUSED = 2
"""Exit code of ``serve``/``doctor`` refusing the server (a configuration to change)."""


def _port(url: str) -> int:
    try:
        return urlsplit(url).port or 4096
    except ValueError:
        return 4096


def refusal(found: ServerFound, url: str) -> str | None:
    """The one line refusing the server ``found`` at ``url``, or ``None`` when the daemon can
    drive it (1.x) or nothing answered (the daemon waits for the server)."""
    if not found.reachable or found.major == 1:
        return None
    todo = (
        f"roundtabled {__version__} drives OpenCode 1.x only (2.x support is not finished): "
        f"run `opencode serve --port {_port(url)}` of opencode-ai {OPENCODE_VERSION} "
        "(`npm install -g opencode-ai@" + OPENCODE_VERSION + "`) and point server_url "
        "(ROUNDTABLED_SERVER_URL) at it"
    )
    if found.major is None:
        return (
            f"{url} answers, but not as OpenCode 1.x or 2.x ({found.detail}): point server_url "
            f"(ROUNDTABLED_SERVER_URL) at `opencode serve` of opencode-ai {OPENCODE_VERSION}"
        )
    if found.auth == "missing":
        what = f"OpenCode {found.major}.x at {url} (it asks for a password and none is given)"
    elif found.auth == "rejected":
        what = f"OpenCode {found.major}.x at {url} (it rejected the password given)"
    else:
        what = f"OpenCode {found.version} at {url}"
    return f"{what}: {todo}"


async def refusal_for(settings: cfg.Settings, *, timeout: float = 5.0) -> str | None:
    """:func:`refusal` for the server of ``settings`` (asked with its credentials)."""
    password = settings.server_password.get_secret_value() if settings.server_password else None
    found = await detect_server(
        settings.server_url,
        password=password,
        username=settings.server_username,
        timeout=timeout,
    )
    return refusal(found, settings.server_url)
