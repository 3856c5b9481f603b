"""After `opencode serve` restarted under the daemon, `doctor` said "✗ daemon running but its event
stream is down: connection refused" with the fix "see the daemon's log", for as long as the
daemon took to reconnect. The stream now records when it went down (health:
`server.reconnectingSince`, `retryMaxS`); doctor reports a reconnecting stream as a warning."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import web

from roundtabled.offline.opencode_server import free_port
from roundtabled.opencode.stream import EventStream
from roundtabled.service import config as cfg
from roundtabled.service import doctor
from roundtabled.service.control import iso_utc
from tests.e2e.cli_helpers import cli
from tests.e2e.conftest import RT
from tests.e2e.edge_helpers import wait_for


async def test_doctor_says_the_event_stream_is_reconnecting_not_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a stream whose server is gone (connection refused): it is down and retrying
    stream = EventStream(
        f"http://127.0.0.1:{free_port()}/global/event", lambda ev: None, backoff_initial=0.05
    )
    task = asyncio.create_task(stream.run())
    try:
        for _ in range(200):
            if stream.last_error is not None:
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert stream.last_error is not None and stream.down_since is not None

    settings = cfg.Settings()
    token_file = tmp_path / "token"
    token_file.write_text("t0k3n")
    settings = settings.model_copy(update={"token_file": token_file})
    health = {
        "ok": True,
        "version": "x",
        "ready": True,
        "server": {
            "url": settings.server_url,
            "connected": stream.connected,
            "lastError": stream.last_error,
            "reconnectingSince": iso_utc(stream.down_since),
            "retryMaxS": stream.backoff.ceiling(),
        },
        "active": 0,
    }

    async def ping(_: web.Request) -> web.Response:
        return web.json_response({"ok": True, "service": "roundtabled", "version": "x"})

    async def health_route(_: web.Request) -> web.Response:
        return web.json_response(health)

    app = web.Application()
    app.router.add_get("/v1/ping", ping)
    app.router.add_get("/v1/health", health_route)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        import aiohttp

        async with aiohttp.ClientSession() as http:
            check = await doctor.daemon_check(http, settings, f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()
    assert check.ok is True and check.warn
    assert "event stream reconnecting since" in check.detail
    assert f"last error: {stream.last_error}" in check.detail and "retrying every" in check.detail
    doctor.print_check(check)
    assert capsys.readouterr().out.startswith("! daemon")
    # once it is back, the stream forgets when it went down
    stream._mark_connected("server.connected")
    assert stream.down_since is None and stream.last_error is None


async def test_health_and_doctor_while_the_real_server_is_down_then_back(rt: RT) -> None:
    """Exact failing input: `opencode serve` stopped under a running daemon, then `doctor`."""
    stream = rt.daemon.stream
    await rt.server.stop()
    await wait_for(lambda: stream.last_error is not None, 30, "the stream to notice")
    status, health = await rt.api("GET", "/v1/health")
    assert status == 200 and health["server"]["connected"] is False, health
    assert health["server"]["reconnectingSince"], health
    assert isinstance(health["server"]["retryMaxS"], int | float), health
    run = await cli(rt, "doctor")
    daemon = [line for line in run.out.splitlines() if line.split()[1:2] == ["daemon"]]
    assert daemon and daemon[0].startswith("! daemon"), run.out
    assert "event stream reconnecting since" in daemon[0], run.out
    connects = stream.connects
    await rt.server.restart()
    await wait_for(lambda: stream.connects > connects, 60, "the stream to reconnect")
    status, health = await rt.api("GET", "/v1/health")
    assert health["server"]["reconnectingSince"] is None, health
