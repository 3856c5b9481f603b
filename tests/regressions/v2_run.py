"""A real OpenCode 2.1.2 server (agents ``pm``, ``dev``, ``rv``), its scripted model and the 2.x
shell (engine/v2run.py) fed by the server's event stream, for the regressions that run a whole
roundtable on 2.x in-process. Only the model is scripted; the roundtabled plugin is not loaded
(a start says so in its notes and runs)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roundtabled.core.state import RoundtableState, Signer
from roundtabled.core.validation import parse_request
from roundtabled.engine.settings import Settings
from roundtabled.engine.v2run import V2Runner
from roundtabled.offline.opencode_server import OpenCodeServer, agent_prompts_of, offline_config
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.opencode.events import Event
from roundtabled.opencode.port import V2Port, port_for
from roundtabled.opencode.v2 import v2_event_stream


@dataclass
class V2Run:
    server: OpenCodeServer
    llm: ScriptedLLM
    port: V2Port
    runner: V2Runner

    async def start(self, **request: Any) -> RoundtableState:
        """Start a roundtable of ``request`` (the control API's fields, ``parentSessionID``
        filled in with a fresh S1)."""
        info = await self.port.client.create_session(
            directory=str(self.server.project_dir), title="S1"
        )
        return await self.runner.start(parse_request({**request, "parentSessionID": info.id}))


@asynccontextmanager
async def v2_run(root: Path) -> AsyncIterator[V2Run]:
    """The server under ``root``, its scripted model, its port and a 2.x shell that follows the
    server's event stream; everything stopped on exit."""
    llm = ScriptedLLM()
    await llm.start(port=0)
    config = offline_config(llm.base_url)
    llm.agent_prompts.update(agent_prompts_of(config))
    server = OpenCodeServer(root / "v2", config, major=2)
    try:
        await server.start()
        port = await port_for(server.url, password=server.password)
        assert isinstance(port, V2Port)
        runner = V2Runner(port, Signer(secrets.token_bytes(32)), Settings(resync_period=2.0))
        connected = asyncio.Event()

        def on_event(ev: Event) -> None:
            if ev.type == "server.connected":
                connected.set()
            runner.on_event(ev)

        stream = v2_event_stream(server.url, on_event, password=server.password)
        task = asyncio.create_task(stream.run())
        try:
            await asyncio.wait_for(connected.wait(), 15)
            yield V2Run(server, llm, port, runner)
        finally:
            await runner.close()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await port.close()
    finally:
        await server.stop()
        await llm.stop()
