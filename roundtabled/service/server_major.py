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
from roundtabled.core import failures
from roundtabled.core.state import RoundtableState
from roundtabled.opencode.binary import OPENCODE_VERSION
from roundtabled.opencode.detect import ServerFound, detect_server
from roundtabled.service import config as cfg

__all__ = [
    "EXIT_REFUSED",
    "detect_at",
    "ended_by_replacement",
    "refusal",
    "refusal_for",
    "replaced_reason",
    "switch_line",
]

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


def switch_line(url: str, was: str, now: str, driver: str, ended: int) -> str:
    """The one line the daemon logs when the server at ``url`` answers as another OpenCode
    major (or, on 2.x, another release) after a reconnect: ``was``/``now`` name the releases
    (``"OpenCode 1.18.33"``), ``driver`` what drives the new one, ``ended`` how many roundtables
    of the old server ended with :func:`replaced_reason`."""
    line = f"OpenCode server {url} was {was} and is now {now}: driving it with {driver}"
    if ended:
        line += (
            f"; {ended} roundtable(s) of the old server ended (their sessions are not on the "
            "new one)"
        )
    return line


def replaced_reason(url: str, was: str, now: str) -> str:
    """Why a roundtable of a server replaced in place by another major ended: the result's
    error and summary (``failures.ended``). Another major keeps its sessions in another
    database (seen with 1.18.33 and 2.1.2: neither lists the other's sessions), so the
    roundtable's S2 is not on the new server and nothing of it can go on there."""
    return (
        f"the server it ran on ({was} at {url}) was replaced by {now}, which does not hold its "
        f"sessions; its state stays in its session on the {was} server, and a roundtabled "
        "driving that server again resumes it"
    )


def ended_by_replacement(state: RoundtableState, reason: str, now: int) -> RoundtableState:
    """``state`` of a roundtable whose server was replaced by another major (``reason``:
    :func:`replaced_reason`): an active one ends as failed (``failures.ended``: the reason in
    its errors and summary); one already over (its end not yet delivered to S1) keeps its
    outcome and gets the reason in its errors. ``now``: epoch ms."""
    if state.active:
        return failures.ended(state, reason, now)
    return state.model_copy(update={"errors": [*state.errors, reason], "updated_at": now})
