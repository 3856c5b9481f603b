"""An OpenCode 2.x server asked in its first tens of milliseconds was refused for good: a daemon
waiting for its server logged "http://127.0.0.1:25506 answers, but not as OpenCode 1.x or 2.x
(neither GET /api/info nor GET /global/health named a version (GET /global/health: HTTP 200,
HTML))" and never drove it (CI: ``test_a_daemon_waiting_for_its_server_drives_it_when_it_comes_
up_as_opencode_2`` timed out). Asked by hand, a starting 2.1.2 answers ``GET /api/info`` with
``503`` and its info JSON for about 50 ms, while ``/global/health`` already answers the web app.
Now such a server is asked again until it answers 200 (or, still starting at the timeout, is
unreachable: waited for, never refused). The answers below are the real server's, byte for
byte in the parts that matter."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from roundtabled.opencode.detect import detect_server
from roundtabled.service.server_major import refusal

STARTING = b'{"version":"2.1.2","pid":3195,"urls":["http://127.0.0.1:32147"],"paths":{"tmp":"/tmp/opencode"}}'
READY = (
    b'{"version":"2.1.2","pid":3195,"urls":["http://127.0.0.1:32147"],'
    b'"paths":{"tmp":"/tmp/opencode"},"capabilities":{"persistentPty":true}}'
)
WEB_APP = b"<!doctype html><html><head><title>OpenCode</title></head><body></body></html>"


async def starting_server(starting_answers: int) -> TestServer:
    """A server answering ``/api/info`` as a starting 2.x: ``starting_answers`` times 503, then
    200 (``-1``: 503 for ever); ``/global/health`` is the web app from the first ask."""
    asked = 0

    async def info(_: web.Request) -> web.Response:
        nonlocal asked
        asked += 1
        if starting_answers < 0 or asked <= starting_answers:
            return web.Response(status=503, body=STARTING, content_type="application/json")
        return web.Response(status=200, body=READY, content_type="application/json")

    async def health(_: web.Request) -> web.Response:
        return web.Response(status=200, body=WEB_APP, content_type="text/html")

    app = web.Application()
    app.router.add_get("/api/info", info)
    app.router.add_get("/global/health", health)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


@pytest.fixture
async def briefly_starting() -> AsyncIterator[str]:
    server = await starting_server(3)
    yield str(server.make_url("")).rstrip("/")
    await server.close()


@pytest.fixture
async def never_ready() -> AsyncIterator[str]:
    server = await starting_server(-1)
    yield str(server.make_url("")).rstrip("/")
    await server.close()


async def test_a_2x_server_answering_503_while_starting_is_found_as_2x(
    briefly_starting: str,
) -> None:
    found = await detect_server(briefly_starting, password="pw")
    assert (found.reachable, found.major, found.version, found.auth) == (True, 2, "2.1.2", "ok")
    assert refusal(found, briefly_starting) is None


async def test_a_2x_server_still_starting_at_the_timeout_is_waited_for(never_ready: str) -> None:
    found = await detect_server(never_ready, password="pw", timeout=0.3)
    assert (found.reachable, found.major, found.version) == (False, 2, "2.1.2")
    assert "still starting" in found.detail and "503" in found.detail
    # unreachable: the daemon and `serve` wait for it, as for a server not yet listening
    assert refusal(found, never_ready) is None
