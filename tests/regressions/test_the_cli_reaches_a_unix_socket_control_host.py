"""Reported by a newcomer's trial: with ``ROUNDTABLED_CONTROL_HOST=unix:/tmp/rt3.sock`` the daemon
listened on the socket but ``roundtabled list`` said ``roundtabled is not running at
http://unix:/tmp/rt3.sock:4747``. The command line now speaks to a ``unix:/path`` control host over
the socket."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import web

from roundtabled.cli.client import ControlClient, control_url
from roundtabled.service import config as cfg


async def test_a_unix_socket_control_host_is_reached_over_the_socket(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = home / "rt.sock"
    token = home / "token"
    token.write_text("t0k\n")
    monkeypatch.setenv("ROUNDTABLED_CONTROL_HOST", f"unix:{sock}")
    monkeypatch.setenv("ROUNDTABLED_TOKEN_FILE", str(token))
    seen: list[str] = []

    async def ping(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/v1/ping", ping)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, str(sock)).start()
    try:
        settings = cfg.load_settings(None)
        url = control_url(settings)
        assert url == f"unix:{sock}"
        async with ControlClient(url, settings.token_file) as cc:
            assert await cc.call("GET", "/v1/ping") == {"ok": True}
    finally:
        await runner.cleanup()
    assert seen == ["Bearer t0k"]
    monkeypatch.setenv("ROUNDTABLED_URL", f"unix:{sock}")
    assert control_url(settings) == f"unix:{sock}"
