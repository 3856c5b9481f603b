"""The control API while the daemon starts and while it stops (docs/control-api.md, "Starting
and restarting"): until the start-up recovery has loaded every roundtable, each request about one
roundtable is answered "starting" (HTTP 503, the count, a retry hint), never "unknown", and the
command line waits through it; a stopping daemon ends its open long-polls at once with
"restarting", never a silent close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from roundtabled.cli.client import ControlClient
from roundtabled.service.control import ControlAPI
from tests.unit.test_fuzz_control import KNOWN, TOKEN, StubEngine

HEADERS = {"Authorization": f"Bearer {TOKEN}"}
UNKNOWN = "ses_notLoadedYet000001"


class StartingEngine(StubEngine):
    """The stub engine, its recovery still loading ``left`` roundtables (``None``: done); its
    long-poll waits the whole ``wait``."""

    def __init__(self) -> None:
        super().__init__()
        self.left: int | None = 2

    def starting(self) -> str | None:
        if self.left is None:
            return None
        return f"roundtabled is starting: recovering {self.left} roundtable(s)"

    async def wait_result(self, s2: str, timeout: float) -> dict[str, Any] | None:
        await super().wait_result(s2, timeout)
        await asyncio.sleep(timeout)
        return None


@pytest.fixture
async def api() -> AsyncIterator[tuple[ControlAPI, StartingEngine, TestClient[Any, Any]]]:
    engine = StartingEngine()
    control = ControlAPI(engine, TOKEN)  # type: ignore[arg-type]
    client: TestClient[Any, Any] = TestClient(TestServer(control.app))
    await client.start_server()
    try:
        yield control, engine, client
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", f"/v1/roundtables/{UNKNOWN}/result?wait=0", None),
        ("GET", f"/v1/roundtables/{UNKNOWN}", None),
        ("GET", f"/v1/roundtables/{UNKNOWN}/events", None),
        ("GET", f"/v1/roundtables/{UNKNOWN}/export", None),
        ("POST", f"/v1/roundtables/{UNKNOWN}/cancel", {}),
        ("POST", "/v1/roundtables", {"sessionID": UNKNOWN, "prompt": "one more round"}),
    ],
)
async def test_while_recovery_runs_a_roundtable_is_starting_never_unknown(
    api: tuple[ControlAPI, StartingEngine, TestClient[Any, Any]],
    method: str,
    path: str,
    body: Any,
) -> None:
    _, engine, client = api
    resp = await client.request(method, path, json=body, headers=HEADERS)
    data = await resp.json()
    assert resp.status == 503, data
    assert data["starting"] is True and data["retryAfterS"] == 1
    assert resp.headers["Retry-After"] == "1"
    assert data["error"] == (
        "Error: roundtabled is starting: recovering 2 roundtable(s); retry in 1 s"
    )
    if path.endswith(("/export", "/v1/roundtables")):
        return  # the stub engine cannot export or extend
    # Once recovery has finished, an id it did not load is unknown: the real answer.
    engine.left = None
    resp = await client.request(method, path, json=body, headers=HEADERS)
    assert resp.status in (400, 404), await resp.text()


async def test_a_stopping_daemon_ends_an_open_long_poll_at_once_with_restarting(
    api: tuple[ControlAPI, StartingEngine, TestClient[Any, Any]],
) -> None:
    control, engine, client = api
    engine.left = None
    poll = asyncio.ensure_future(
        client.get(f"/v1/roundtables/{KNOWN}/result", params={"wait": "30"}, headers=HEADERS)
    )
    for _ in range(200):  # the long-poll is open once the engine waits
        await asyncio.sleep(0.01)
    assert not poll.done()
    control.stop_accepting()
    resp = await asyncio.wait_for(poll, 2)
    data = await resp.json()
    assert resp.status == 503, data
    assert data["restarting"] is True and data["error"].startswith(
        "Error: roundtabled is restarting"
    )
    # And a new poll of a stopping daemon is answered so at once.
    resp = await client.get(
        f"/v1/roundtables/{KNOWN}/result", params={"wait": "30"}, headers=HEADERS
    )
    assert resp.status == 503 and (await resp.json())["restarting"] is True


async def test_the_cli_waits_through_starting_and_gets_the_real_answer(
    api: tuple[ControlAPI, StartingEngine, TestClient[Any, Any]], tmp_path: Path
) -> None:
    _, engine, client = api
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    asked = 0
    real_starting = engine.starting

    def starting() -> str | None:
        nonlocal asked
        asked += 1
        if asked == 3:  # recovery finishes after the third request
            engine.left = None
        return real_starting()

    engine.starting = starting  # type: ignore[method-assign]
    async with ControlClient(str(client.make_url("")).rstrip("/"), token_file) as cc:
        status = await cc.call("GET", f"/v1/roundtables/{KNOWN}")
    assert status == {"phase": "active"}
    assert asked == 3
