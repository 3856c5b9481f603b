"""A server replaced in place by the other major, read by the old driver before the daemon had
switched: the 2.x shell asked the new 1.x server for its roundtable's session, got a 404
(``GET /api/session/ID``: ``SessionNotFoundError``) and ended the roundtable as deleted
(``phase: "aborted"``, ``endReason: "session-deleted"``); the 1.x engine's next write got 405
from the new 2.x server (``PATCH /session/ID/message/…/part/…``) and a read got its web app
(``GET /session/status``: "response is not JSON"), and ended the roundtable as failed with
"retrying cannot help: check the server's log and that its version is one roundtabled
supports". Seen in CI as ``tests/e2e/test_server_replaced_in_place.py`` failing ``'aborted' ==
'done'`` one run in two. Now a 404 is a deletion and a refusal ends a roundtable only while the
server answers as the driver's own major; else the pass is retried (ServerReplaced) until the
daemon switches driver and ends the roundtable with the reason that is true. Real servers of
both majors; nothing scripted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from roundtabled.core import failures
from roundtabled.errors import NotFound, ServerReplaced, TransportError
from roundtabled.offline.opencode_server import OpenCodeServer, offline_config
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.opencode.port import (
    ServerPort,
    V1Port,
    V2Port,
    refusal_confirmed,
    sessions_gone,
)
from roundtabled.opencode.v2 import V2Client

pytestmark = pytest.mark.e2e

PASSWORD = "pw"
# the session id of the roundtable the 2.x shell ended as deleted in the failing run
S2 = "ses_dafb28b74ffev5Q7GQOJJQtVqR"


@pytest.fixture
async def ports(tmp_path: Path) -> AsyncIterator[dict[str, V1Port | V2Port]]:
    """A port of each major on a real server of each major: ``"1 on 2"`` is the 1.x engine's
    port on a 2.x server (what the old driver reads after a replacement), and so on."""
    one = OpenCodeServer(
        tmp_path / "v1", offline_config("http://127.0.0.1:9/v1"), password=PASSWORD, major=1
    )
    two = OpenCodeServer(
        tmp_path / "v2", offline_config("http://127.0.0.1:9/v1"), password=PASSWORD, major=2
    )
    await asyncio.gather(one.start(), two.start())
    made: dict[str, V1Port | V2Port] = {}
    try:
        for name, server in (("1", one), ("2", two)):
            made[f"1 on {name}"] = V1Port(OpenCodeClient(server.url, password=PASSWORD))
            made[f"2 on {name}"] = V2Port(V2Client(server.url, password=PASSWORD))
        yield made
    finally:
        for port in made.values():
            await port.close()
        await asyncio.gather(one.stop(), two.stop())


async def refusal_of(port: ServerPort) -> TransportError:
    """What the old driver's read of S2 raised on the new server."""
    try:
        await port.session(S2)
    except TransportError as exc:
        return exc
    raise AssertionError("the other major answered the session")


async def test_the_2x_shell_on_a_1x_server_does_not_take_its_404_for_a_deleted_session(
    ports: dict[str, V1Port | V2Port],
) -> None:
    port = ports["2 on 1"]
    assert isinstance(await refusal_of(port), NotFound)  # the 404 that read as "deleted"
    assert not await port.same_major()
    with pytest.raises(ServerReplaced, match=r"no longer answers as OpenCode 2\.x") as got:
        await sessions_gone(port, S2, None)
    assert failures.classify(got.value) is failures.FailureKind.RETRYABLE


async def test_the_1x_engine_on_a_2x_server_does_not_take_its_answers_for_a_refusal(
    ports: dict[str, V1Port | V2Port],
) -> None:
    port = ports["1 on 2"]
    refusal = await refusal_of(port)  # its web app for JSON
    assert failures.classify(refusal) is failures.FailureKind.PERMANENT
    confirmed = await refusal_confirmed(port, refusal)
    assert isinstance(confirmed, ServerReplaced), confirmed
    assert "no longer answers as OpenCode 1.x" in str(confirmed)
    assert failures.classify(confirmed) is failures.FailureKind.RETRYABLE


async def test_on_its_own_major_a_404_is_still_a_deletion_and_a_refusal_still_a_refusal(
    ports: dict[str, V1Port | V2Port],
) -> None:
    for port in (ports["1 on 1"], ports["2 on 2"]):
        assert await port.same_major()
        assert await sessions_gone(port, S2, None) == (True, False)
        assert await sessions_gone(port, S2, "ses_dafb28b74ffeparentGoneToo0") == (True, True)
        refusal = TransportError("PATCH /session/x: HTTP 405", status=405, retryable=False)
        assert await refusal_confirmed(port, refusal) is refusal
