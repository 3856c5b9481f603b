"""Reported by a newcomer's trial: with ``ROUNDTABLED_CONTROL_HOST=unix:/no/such/dir/rt.sock`` the
daemon said ``cannot listen on unix:/no/such/dir/rt.sock:4747 … Set control_port /
ROUNDTABLED_CONTROL_PORT to another port``: a port that plays no part in a unix socket. It now
names the socket's path and the setting that moves it.

Exact input: ``control_host = "unix:<home>/missing/rt.sock"`` (the directory does not exist).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from roundtabled.service import config as cfg
from roundtabled.service.daemon import Daemon


async def test_the_socket_path_and_its_setting_are_named(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sock = home / "missing" / "rt.sock"
    settings = cfg.Settings(control_host=f"unix:{sock}")
    daemon = Daemon(settings)
    with caplog.at_level(logging.ERROR, logger="roundtabled"):
        code = await daemon.run()
    assert code == 1
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert f"cannot listen on the unix socket {sock}" in line, line
    assert "ROUNDTABLED_CONTROL_HOST" in line, line
    assert "port" not in line.lower(), line
