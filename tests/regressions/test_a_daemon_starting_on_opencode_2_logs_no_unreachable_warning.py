"""Every daemon start on OpenCode 2.x logged ``WARNING … not reachable: GET /global/health:
response is not JSON`` a few milliseconds before "is up": the 1.x health probe failing on 2.x's web
app is how the majors are told apart, not a fault. The warning now comes only when no major
answers (the server is down), after the major detection."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from roundtabled.offline.opencode_server import OpenCodeServer, free_port, offline_config
from roundtabled.service import config as cfg
from roundtabled.service.daemon import Daemon

pytestmark = pytest.mark.e2e


@pytest.fixture
async def v2_server(tmp_path: Path) -> AsyncIterator[OpenCodeServer]:
    server = OpenCodeServer(tmp_path / "v2", offline_config("http://127.0.0.1:9/v1"), major=2)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def settings_for(home: Path, url: str, password: str | None) -> cfg.Settings:
    return cfg.Settings().model_copy(
        update={
            "server_url": url,
            "server_password": SecretStr(password) if password else None,
            "token_file": home / "state" / "token",
            "key_file": home / "state" / "key",
            "control_port": 0,
        }
    )


def unreachable_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and "not reachable" in r.getMessage()
    ]


async def test_a_daemon_starting_on_opencode_2_logs_no_unreachable_warning(
    v2_server: OpenCodeServer, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="roundtabled")
    daemon = Daemon(settings_for(home, v2_server.url, v2_server.password))
    run = asyncio.create_task(daemon.run())
    try:
        await asyncio.wait_for(daemon.engine.ready.wait(), 60)
        assert daemon.major == 2
        assert unreachable_warnings(caplog) == []
        assert any("driven by the 2.x shell" in r.getMessage() for r in caplog.records)
        daemon.request_stop()
        assert await asyncio.wait_for(run, 30) == 0
    finally:
        run.cancel()


async def test_a_daemon_whose_server_is_down_still_warns_it_is_not_reachable(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="roundtabled")
    daemon = Daemon(settings_for(home, f"http://127.0.0.1:{free_port()}", None))
    run = asyncio.create_task(daemon.run())
    try:
        while not unreachable_warnings(caplog):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        daemon.request_stop()
        assert await asyncio.wait_for(run, 30) == 0
    finally:
        run.cancel()
