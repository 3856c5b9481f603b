"""Figure 6 on OpenCode 2.x: start-up recovery with 1,000 sessions of which 50 are roundtables.

The 2.x counterpart of :mod:`bench.recovery`, on the pinned 2.x server (``opencode-v2/``): plain
sessions and roundtable sessions made through the 2.x API, each roundtable's signed state block
and index in its session metadata as the 2.x shell writes them (:meth:`~roundtabled.opencode.port.
V2Port.write_state`, with the daemon's key file, so the blocks are trusted), in the five phases of
:data:`bench.recovery.PHASES` (on 2.x a roundtable concluded but not finalized has the index
phase ``finalizing``; ``parent-gone`` names a deleted S1). The roundtables are made first, so
that they are older than the newest sessions, as on a long-used server.

Then an in-process daemon starts; reported: seconds from construction to ``ready`` (the 2.x
shell's ``recover`` over, every roundtable found and resumed), how many it resumed, and the
daemon's calls to the server until then by route.

Usage (from the repository root)::

    .venv/bin/python -m bench.run recovery --opencode 2

Times in seconds.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from roundtabled.core.server_records import SessionRef, SignedState
from roundtabled.core.state import Signer, encode_state
from roundtabled.engine.v2run import FINALIZING
from roundtabled.offline.opencode_server import OpenCodeServer
from roundtabled.opencode import v2
from roundtabled.opencode.port import V2Port
from roundtabled.service.config import load_settings
from roundtabled.service.daemon import Daemon, load_signer

from .env import RemoteLLM, bench_config
from .overhead_v2 import CallCount
from .recovery import PHASES, phase_state
from .stats import rnd


async def populate(
    port: V2Port, directory: str, signer: Signer, *, sessions: int, roundtables: int
) -> float:
    """Make the sessions through ``port``; returns seconds taken."""
    t0 = time.perf_counter()
    client = port.client
    sem = asyncio.Semaphore(16)
    parent = (await client.create_session(directory=directory, title="S1")).id
    gone = (await client.create_session(directory=directory, title="S1 to be deleted")).id

    async def plain(i: int) -> None:
        async with sem:
            await client.create_session(directory=directory, title=f"plain session {i}")

    async def table(i: int) -> None:
        kind = PHASES[i % len(PHASES)]
        async with sem:
            made = await client.create_session(directory=directory, title=f"roundtable {i}")
            st = phase_state(made.id, directory, kind, gone)
            if kind != "parent-gone":
                st = st.model_copy(update={"parent_session_id": parent})
            text, meta = encode_state(st, signer)
            phase = FINALIZING if kind == "done-unfinalized" else st.phase.value
            await port.write_state(
                SessionRef(made.id, directory), SignedState(text, meta), hidden=[], phase=phase
            )

    await asyncio.gather(*(table(i) for i in range(roundtables)))
    await asyncio.gather(*(plain(i) for i in range(sessions - roundtables)))
    await client.delete_session(gone)
    return time.perf_counter() - t0


async def run(root: Path, *, sessions: int, roundtables: int) -> dict[str, Any]:
    """Figure 6 on 2.x (``sessions`` sessions of which ``roundtables`` roundtables)."""
    llm = RemoteLLM()
    await llm.start()
    password = secrets.token_urlsafe(18)
    server = OpenCodeServer(root / "opencode", bench_config(llm), major=2, password=password)
    daemon: Daemon | None = None
    task: asyncio.Task[int] | None = None
    calls = CallCount()
    try:
        await server.start()
        directory = str(server.project_dir)
        settings = load_settings(
            {
                "server_url": server.url,
                "control_port": 0,
                "resync_period": 15.0,
                "directories": [directory],
                "log_level": "warning",
            },
            env={
                "HOME": str(root / "home"),
                "XDG_CONFIG_HOME": str(root / "rt-config"),
                "XDG_STATE_HOME": str(root / "rt-state"),
            },
        )
        settings = settings.model_copy(update={"server_password": SecretStr(password)})
        signer = load_signer(settings.key_file)
        port = V2Port(v2.V2Client(server.url, password=password, max_concurrency=16))
        calls.ignored.add(id(port.client))
        try:
            populate_s = await populate(
                port, directory, signer, sessions=sessions, roundtables=roundtables
            )
            listed = await port.client.sessions(directory, limit=100_000)
        finally:
            await port.close()
        t0 = time.perf_counter()
        calls.on = True
        daemon = Daemon(settings)
        task = asyncio.create_task(daemon.run())
        await asyncio.wait_for(daemon.engine.ready.wait(), 120)
        ready_s = time.perf_counter() - t0
        calls.on = False
        assert daemon.v2 is not None, "the daemon does not drive this server as 2.x"
        resumed = len(daemon.v2.tables)
        return {
            "opencode": server.version,
            "sessions": len(listed),
            "roundtables": roundtables,
            "phases": list(PHASES),
            "populate_s": rnd(populate_s, 1),
            "ready_s": rnd(ready_s, 3),
            "resumed": resumed,
            "requests_until_ready": dict(sorted(calls.calls.items())),
            "target_s": 3,
            "met": ready_s <= 3 and resumed == roundtables,
        }
    finally:
        calls.close()
        if daemon is not None and task is not None:
            daemon.request_stop()
            try:
                await asyncio.wait_for(task, 30)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()
        await server.stop()
        await llm.stop()
