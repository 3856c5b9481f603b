"""A real OpenCode 2.1.2 server and the 2.x shell (engine/v2run.py), for the regressions of what a
2.x start checks and says as the 1.x start does (engine/launch.py; docs/design.md, "The 2.x
shell"). Only the model is scripted; the roundtabled plugin is not loaded (a start says so in its
notes and runs). A test that starts a roundtable leaves it to :meth:`V2Runner.close`."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roundtabled.core.state import Signer
from roundtabled.engine.settings import Settings
from roundtabled.engine.v2run import V2Runner
from roundtabled.offline.opencode_server import OpenCodeServer, offline_config
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.opencode.port import V2Port, port_for


@dataclass
class V2Start:
    server: OpenCodeServer
    port: V2Port
    runner: V2Runner

    @property
    def directory(self) -> str:
        """The project directory the server serves (S1's)."""
        return str(self.server.project_dir)

    async def parent(self) -> str:
        """A fresh S1 in the project directory: its id."""
        info = await self.port.client.create_session(directory=self.directory, title="S1")
        return info.id

    async def children(self, session_id: str) -> list[Any]:
        """The child sessions of ``session_id``."""
        return list(await self.port.client.children(session_id))


@asynccontextmanager
async def v2_start(
    root: Path, extra_agents: dict[str, dict[str, Any]] | None = None
) -> AsyncIterator[V2Start]:
    """The server (agents ``pm``, ``dev``, ``rv`` and ``extra_agents``) under ``root``, its port
    and a 2.x shell on it; everything stopped on exit."""
    llm = ScriptedLLM()
    await llm.start(port=0)
    server = OpenCodeServer(
        root / "v2", offline_config(llm.base_url, extra_agents=extra_agents), major=2
    )
    try:
        await server.start()
        port = await port_for(server.url, password=server.password)
        assert isinstance(port, V2Port)
        runner = V2Runner(port, Signer(secrets.token_bytes(32)), Settings())
        try:
            yield V2Start(server, port, runner)
        finally:
            await runner.close()
            await port.close()
    finally:
        await server.stop()
        await llm.stop()
