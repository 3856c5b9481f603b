"""Regression: a password-protected OpenCode server.

Field failures: with ``OPENCODE_SERVER_PASSWORD`` set, the REST calls authenticated but the event
stream did not (debates crawled along on resyncs); with a wrong password the daemon looped on 401
without saying why; the password showed up in a log line. Proves: (a) with the right password the
event stream authenticates — a debate driven only by events (resync 60 s) finishes promptly;
(b) with a wrong one, ``roundtabled serve`` (the real entry point) says OpenCode rejected the
credentials (401) and names the setting, ``GET /v1/health`` reports it, and the daemon's attempts
back off (at most 8 in 6 s, no tight loop); (c) the password never appears in the logs or in
``roundtabled config``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp

from roundtabled.offline.opencode_server import OpenCodeServer, free_port
from roundtabled.offline.scripted_actions import Text
from tests.e2e.cli_helpers import RT_BIN, cli, cli_env
from tests.e2e.conftest import RT

from .conftest import LogCapture

PASSWORD = "s3cret-Regression-9"
WRONG = "not-the-Password-9"


async def test_right_password_event_stream_authenticates(rt_factory: Any) -> None:
    """Failing input: server and daemon with ``OPENCODE_SERVER_PASSWORD=s3cret-Regression-9``,
    daemon ``resync_period=60``; ``agents=["pm","dev"]``, 1 round."""
    with LogCapture() as logs:
        rt: RT = await rt_factory(password=PASSWORD, daemon={"resync_period": 60.0})
        assert rt.daemon.stream.connected
        rt.llm.script(Text(text="PM: locked down."), agent="pm")
        rt.llm.script(Text(text="DEV: agreed."), agent="dev")
        t0 = time.monotonic()
        s2 = await rt.start(agents=["pm", "dev"], prompt="Auth everywhere?")
        await rt.result(s2, timeout=60)
        # three turns handed off by events, not by the 60 s resync
        assert time.monotonic() - t0 < 30
        assert rt.daemon.stream.connects == 1 and rt.daemon.stream.connected
        status, health = await rt.api("GET", "/v1/health")
        assert status == 200 and health["ok"] and health["server"]["connected"], health
    text = "\n".join(logs.lines())
    assert PASSWORD not in text
    assert "401 unauthorized" not in text and "rejected the credentials" not in text


async def test_wrong_password_is_named_reported_backed_off_and_never_logged(
    rt: RT, tmp_path: Path
) -> None:
    """Failing input: an OpenCode server started with ``OPENCODE_SERVER_PASSWORD=
    s3cret-Regression-9``; ``roundtabled serve`` (subprocess, real entry point) with
    ``OPENCODE_SERVER_PASSWORD=not-the-Password-9``."""
    # A password-protected twin of the rt server (same config, own directories).
    locked = OpenCodeServer(tmp_path / "locked", rt.server.config, password=PASSWORD)
    await locked.start()
    proc: asyncio.subprocess.Process | None = None
    try:
        port = free_port()
        root = tmp_path / "daemon"
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ROUNDTABLED_", "OPENCODE_", "XDG_"))
        }
        env.update(
            HOME=str(root / "home"),
            XDG_CONFIG_HOME=str(root / "config"),
            XDG_STATE_HOME=str(root / "state"),
            ROUNDTABLED_SERVER_URL=locked.url,
            ROUNDTABLED_CONTROL_PORT=str(port),
            OPENCODE_SERVER_PASSWORD=WRONG,
            PYTHONUNBUFFERED="1",
        )
        log_path = root / "daemon.log"
        root.mkdir(parents=True)
        with log_path.open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                str(RT_BIN),
                "serve",
                env=env,
                stdout=log,
                stderr=log,
                stdin=asyncio.subprocess.DEVNULL,
            )
        token_file = root / "config" / "roundtabled" / "token"
        health: dict[str, Any] = {}
        deadline = time.monotonic() + 30
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                try:
                    async with http.get(
                        f"http://127.0.0.1:{port}/v1/health",
                        headers={"Authorization": f"Bearer {token_file.read_text().strip()}"},
                    ) as resp:
                        health = await resp.json()
                        if "401" in str(health["server"].get("lastError")):
                            break
                except (aiohttp.ClientError, OSError):
                    pass
                await asyncio.sleep(0.2)
        assert health and not health["ok"], health
        assert "401" in str(health["server"]["lastError"]), health
        # back-off: count the daemon's attempts over 6 s
        start_lines = log_path.read_text().count("rejected the credentials")
        await asyncio.sleep(6)
        output = log_path.read_text()
        attempts = output.count("rejected the credentials") - start_lines
        print(f"daemon attempts in 6 s: {attempts}")
        assert 1 <= attempts <= 8, (attempts, output[-2000:])
        assert "OpenCode rejected the credentials (401)" in output
        assert "OPENCODE_SERVER_PASSWORD" in output or "server_password" in output
        assert WRONG not in output and PASSWORD not in output
        assert "Traceback" not in output
    finally:
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        await locked.stop()
    # (c) `roundtabled config` masks it
    run = await cli(rt, "config", env=cli_env(rt, OPENCODE_SERVER_PASSWORD=WRONG))
    assert run.code == 0, run
    assert WRONG not in run.out + run.err
