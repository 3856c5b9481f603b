"""One daemon, both majors: the server behind ``server_url`` is replaced in place by the other
OpenCode major (stopped, the other one started on the same URL with the same password). The
daemon finds the new major while its event stream is down (or after it reconnects), logs one
line naming the change and switches driver (1.x engine ↔ 2.x shell); the roundtable that was
running on the old server cannot go on (the other major keeps its sessions in another
database: checked on the new server) and its result says so; a roundtable then runs on the new
server. Real servers (the pinned 1.x and 2.x), only the model scripted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import SecretStr

from bench.env import control_call
from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.errors import NotFound
from roundtabled.offline.opencode_server import OpenCodeServer, free_port
from roundtabled.offline.scripted_actions import Hang, Text
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.opencode.v2 import V2Client
from roundtabled.service import config as cfg
from roundtabled.service import install
from roundtabled.service.daemon import Daemon
from tests.e2e.conftest import roundtable_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PASSWORD = "same-password"


def server_for(root: Path, llm: ScriptedLLM, major: int, port: int) -> OpenCodeServer:
    """An OpenCode ``major`` server on ``port`` with its own XDG directories under ``root``
    (its own database), the roundtabled files of its major in the project."""
    server = OpenCodeServer(root, roundtable_config(llm), password=PASSWORD, major=major)  # type: ignore[arg-type]
    server._port = port
    install.install_tools(
        root / server.directory_name / ".opencode",
        control_url="http://127.0.0.1:9",
        token_file=root / "token",
        major=major,
    )
    return server


async def call(
    http: aiohttp.ClientSession, daemon: Daemon, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    assert daemon.control_address is not None
    return await control_call(
        http, daemon.control_address, daemon.token, method, path, body, timeout=60
    )


async def until(what: str, check: Any, timeout: float = 90) -> Any:
    """Poll the awaitable factory ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = await check()
        if got:
            return got
        await asyncio.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}")


async def ready(daemon: Daemon, major: int) -> None:
    async def switched() -> bool:
        return daemon.major == major and daemon.engine.ready.is_set()

    await until(f"the daemon drives OpenCode {major}.x", switched)


async def parent_on(server: OpenCodeServer) -> str:
    """A root session S1 in the server's project."""
    directory = str(server.project_dir)
    if server.major == 1:
        client = OpenCodeClient(server.url, password=PASSWORD)
        try:
            return str((await client.create_session(directory=directory, title="S1"))["id"])
        finally:
            await client.close()
    v2 = V2Client(server.url, password=PASSWORD)
    try:
        return (await v2.create_session(directory=directory, title="S1")).id
    finally:
        await v2.close()


async def run_one(
    http: aiohttp.ClientSession, daemon: Daemon, llm: ScriptedLLM, server: OpenCodeServer
) -> dict[str, Any]:
    """A one-round roundtable of pm and dev on ``server`` through the daemon; its result."""
    for seat in ("pm", "dev"):
        llm.script(Text(text=f"{seat}: ship it behind a flag."), agent=seat)
    llm.script(Text(text="SUMMARY: both seats agree."), agent=OBSERVER_AGENT)
    status, created = await call(
        http,
        daemon,
        "POST",
        "/v1/roundtables",
        {
            "agents": ["pm", "dev"],
            "rounds": 1,
            "prompt": "Ship the flag?",
            "parentSessionID": await parent_on(server),
            "directory": str(server.project_dir),
        },
    )
    assert status == 200, created
    s2 = created["sessionID"]

    async def result() -> Any:
        code, res = await call(http, daemon, "GET", f"/v1/roundtables/{s2}/result?wait=20")
        return res if code == 200 and res.get("done") else None

    return dict(await until(f"the result of {s2}", result))


async def a_running_turn(
    http: aiohttp.ClientSession, daemon: Daemon, llm: ScriptedLLM, server: OpenCodeServer
) -> str:
    """A roundtable on ``server`` whose second seat's model request hangs; S2's id once the
    first seat has answered."""
    asked = sum(r.agent == "dev" for r in llm.requests)
    llm.script(Text(text="pm: ship it."), agent="pm")
    llm.script(Hang(max_seconds=120), agent="dev")
    status, created = await call(
        http,
        daemon,
        "POST",
        "/v1/roundtables",
        {
            "agents": ["pm", "dev"],
            "rounds": 2,
            "prompt": "Ship now?",
            "parentSessionID": await parent_on(server),
            "directory": str(server.project_dir),
        },
    )
    assert status == 200, created
    s2 = str(created["sessionID"])

    async def dev_asked() -> bool:
        return sum(r.agent == "dev" for r in llm.requests) > asked

    await until("dev's model request", dev_asked)
    return s2


async def ended_by_the_replacement(
    http: aiohttp.ClientSession, daemon: Daemon, s2: str, was: str, now: str
) -> None:
    """The roundtable ``s2`` of the replaced server ended, saying why, in its status and its
    result (words and data), and nothing about it was sent to the new server."""
    code, st = await call(http, daemon, "GET", f"/v1/roundtables/{s2}")
    assert code == 200, st
    assert st["phase"] == "done" and st["endReason"] == "failed"
    (error,) = [e for e in st["errors"] if "was replaced by" in e]
    assert f"the server it ran on ({was} at " in error
    assert f"was replaced by {now}, which does not hold its sessions" in error
    code, res = await call(http, daemon, "GET", f"/v1/roundtables/{s2}/result?wait=0")
    assert code == 200 and res["done"] is True
    assert res["endReason"] == "failed"
    # in the result contract's data and in its words; what the old driver read from the new
    # server before the switch (a 404, a 405, its web app) is no reason of its own
    assert f"was replaced by {now}" in json.dumps(res["result"])
    assert f"was replaced by {now}" in res["text"]
    assert "retrying cannot help" not in json.dumps(res)


async def test_a_server_replaced_by_the_other_major_is_driven_by_the_other_driver(
    tmp_path: Path,
    scripted_llm: ScriptedLLM,
    home: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="roundtabled")
    llm = scripted_llm
    port = free_port()
    v1 = server_for(tmp_path / "v1", llm, 1, port)
    v2 = server_for(tmp_path / "v2", llm, 2, port)
    v1_again = server_for(tmp_path / "v1-again", llm, 1, port)
    await v1.start()
    settings = cfg.Settings().model_copy(
        update={
            "server_url": v1.url,
            "server_password": SecretStr(PASSWORD),
            "control_port": 0,
            "resync_period": 2.0,
            "directories": [str(s.project_dir) for s in (v1, v2, v1_again)],
            "token_file": home / "state" / "token",
            "key_file": home / "state" / "key",
        }
    )
    daemon = Daemon(settings)
    run = asyncio.create_task(daemon.run())
    http = aiohttp.ClientSession()
    try:
        await ready(daemon, 1)
        # 1.x → 2.x, a roundtable's turn running on 1.x
        s2_v1 = await a_running_turn(http, daemon, llm, v1)
        await v1.stop()
        await v2.start()
        await ready(daemon, 2)
        assert daemon.v2 is not None
        await ended_by_the_replacement(
            http, daemon, s2_v1, f"OpenCode {v1.version}", "OpenCode 2.1.2"
        )
        # the 2.x server does not hold the 1.x roundtable's session: it could not go on there
        client = V2Client(v2.url, password=PASSWORD)
        try:
            with pytest.raises(NotFound):
                await client.get_session(s2_v1)
        finally:
            await client.close()
        result = await run_one(http, daemon, llm, v2)
        assert result["endReason"] == "completed", result
        assert result["sessionID"].startswith("ses_")

        # 2.x → 1.x (another 1.x server, its own database), a roundtable's turn running on 2.x
        s2_v2 = await a_running_turn(http, daemon, llm, v2)
        await v2.stop()
        await v1_again.start()
        await ready(daemon, 1)
        assert daemon.v2 is None
        await ended_by_the_replacement(
            http, daemon, s2_v2, "OpenCode 2.1.2", f"OpenCode {v1_again.version}"
        )
        result = await run_one(http, daemon, llm, v1_again)
        assert result["endReason"] == "completed", result

        # one line per change, naming both releases and the driver
        lines = [r.getMessage() for r in caplog.records if "and is now OpenCode" in r.getMessage()]
        assert lines == [
            f"OpenCode server {v1.url} was OpenCode {v1.version} and is now OpenCode 2.1.2: "
            "driving it with the 2.x shell; 1 roundtable(s) of the old server ended (their "
            "sessions are not on the new one)",
            f"OpenCode server {v1.url} was OpenCode 2.1.2 and is now OpenCode "
            f"{v1_again.version}: driving it with the 1.x engine; 1 roundtable(s) of the old "
            "server ended (their sessions are not on the new one)",
        ], lines
        daemon.request_stop()
        assert await asyncio.wait_for(run, 30) == 0
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        await daemon.client.close()
        await http.close()
        for server in (v1, v2, v1_again):
            await server.stop()
