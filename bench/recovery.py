"""Figure 6: start-up recovery with 1,000 sessions of which 50 are roundtables.

Set-up through the server API and the daemon's own functions (with the daemon's key file, so the
state blocks are trusted): plain sessions via ``POST /session``; roundtable sessions get a signed
state block (``StateStore.create``) and the session index metadata
(``StateStore.persist(index=True)``), in five phases of equal share:

- ``active-next``: active, no pending turn (the next seat is planned and prompted);
- ``active-intent``: active, an intent persisted whose prompt never reached S2 (re-prompted);
- ``observing``: the seats are done, the observer turn is next;
- ``done-unfinalized``: concluded but finalization (delimiter, title, toast) not done;
- ``parent-gone``: active, but its S1 was deleted (aborted at start-up).

Then an in-process daemon starts; reported: seconds from construction to ``ready`` (every
roundtable found and resumed or aborted), the recovery counters, the requests made to the server
during start-up and the most in flight at once (bounded by ``max_concurrency`` and
``recovery_concurrency``).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Literal

from roundtabled import ids
from roundtabled.core.state import (
    EndReason,
    HistoryEntry,
    ModelRef,
    PendingTurn,
    Phase,
    RoundtableState,
    Signer,
)
from roundtabled.engine.registry import Engine
from roundtabled.engine.settings import Settings
from roundtabled.engine.shell import now_ms
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.service.config import load_settings
from roundtabled.service.daemon import Daemon, load_signer

from .env import TOPIC, Env
from .stats import rnd


class _CountingSemaphore(asyncio.Semaphore):
    """The client's request semaphore, remembering the most permits held at once."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.held = 0
        self.max_held = 0

    async def acquire(self) -> Literal[True]:
        await super().acquire()
        self.held += 1
        self.max_held = max(self.max_held, self.held)
        return True

    def release(self) -> None:
        self.held -= 1
        super().release()


PHASES = ("active-next", "active-intent", "observing", "done-unfinalized", "parent-gone")


def phase_state(s2: str, directory: str, kind: str, gone_parent: str) -> RoundtableState:
    """A roundtable's state in S2 ``s2`` in the phase ``kind`` (one of :data:`PHASES`;
    ``gone_parent``: the deleted S1 that ``parent-gone`` names)."""
    t = now_ms()
    agents = ["pm", "dev", "rv"]
    history = [
        HistoryEntry(agent=a, round=1, response=f"{a} says something about the topic {i}.", seat=i)
        for i, a in enumerate(agents)
    ]
    st = RoundtableState(
        sessionID=s2,
        directory=directory,
        title=f"(Roundtable) - recovery {kind}",
        agents=agents,
        models={a: ModelRef(providerID="scripted", modelID="debater-1") for a in agents},
        total_rounds=2,
        prompt=TOPIC,
        history=history,
        current_round=1,
        stateMessageID=ids.message_id(),
        statePartID=ids.part_id(),
        created_at=t,
        updated_at=t,
    )
    if kind == "active-intent":
        pend = PendingTurn(
            kind="turn", round=1, seat=0, agent="pm", messageID=ids.message_id(), prompted_at=t
        )
        st = st.model_copy(update={"pending": pend})
    elif kind == "observing":
        st = st.model_copy(update={"phase": Phase.OBSERVING, "current_round": 2})
    elif kind == "done-unfinalized":
        st = st.model_copy(
            update={
                "phase": Phase.DONE,
                "current_round": 2,
                "end_reason": EndReason.COMPLETED,
                "summary": "The debate concluded.",
            }
        )
    elif kind == "parent-gone":
        st = st.model_copy(update={"parent_session_id": gone_parent})
    return st


async def populate(env: Env, signer: Signer, *, sessions: int, roundtables: int) -> float:
    """Create the sessions; returns seconds taken."""
    t0 = time.perf_counter()
    client = OpenCodeClient(env.srv.url, max_concurrency=16)
    engine = Engine(client, signer, Settings())
    sem = asyncio.Semaphore(16)
    d = env.directory
    gone = await client.create_session(directory=d, title="S1 to be deleted")
    gone_id = str(gone["id"])

    async def plain(i: int) -> None:
        async with sem:
            await client.create_session(directory=d, title=f"plain session {i}")

    async def table(i: int) -> None:
        async with sem:
            s = await client.create_session(directory=d, title=f"roundtable {i}")
            st = phase_state(str(s["id"]), d, PHASES[i % len(PHASES)], gone_id)
            await engine.store.create(st)
            await engine.store.persist(st, index=True)

    try:
        # Roundtables first: they are then older than the newest 100 sessions (the server's
        # default page), as on a long-used server.
        await asyncio.gather(*(table(i) for i in range(roundtables)))
        await asyncio.gather(*(plain(i) for i in range(sessions - roundtables)))
        await client.delete_session(gone_id)
    finally:
        await client.close()
    return time.perf_counter() - t0


async def run(root: Path, *, sessions: int, roundtables: int) -> dict[str, Any]:
    env = Env(root)
    try:
        await env.start()
        settings = load_settings(env.settings_cli(), env=env.env)
        signer = load_signer(settings.key_file)
        populate_s = await populate(env, signer, sessions=sessions, roundtables=roundtables)
        listed = await env.oc(
            "GET", "/session", params={"directory": env.directory, "limit": "100000"}
        )

        t0 = time.perf_counter()
        daemon = Daemon(settings)
        env.daemon = daemon
        client = daemon.client
        sem = _CountingSemaphore(settings.max_concurrency)
        client._sem = sem
        counters: dict[str, int] = {}
        orig_recover = daemon.engine.recover

        async def recover() -> dict[str, int]:
            counters.update(await orig_recover())
            return counters

        daemon.engine.recover = recover  # type: ignore[method-assign]
        env.task = asyncio.create_task(daemon.run())
        await asyncio.wait_for(daemon.engine.ready.wait(), 120)
        ready_s = time.perf_counter() - t0
        requests_at_ready = client.requests
        max_at_ready = sem.max_held
        recovered = len(daemon.engine.tables) + len(daemon.engine.recent)
        return {
            "sessions": len(listed),
            "roundtables": roundtables,
            "phases": list(PHASES),
            "populate_s": rnd(populate_s, 1),
            "ready_s": rnd(ready_s, 3),
            "counters": counters,
            "tables_after_ready": recovered,
            "requests_until_ready": requests_at_ready,
            "max_requests_in_flight": max_at_ready,
            "max_concurrency_setting": settings.max_concurrency,
            "recovery_concurrency_setting": daemon.engine.settings.recovery_concurrency,
            "target_s": 3,
            "met": ready_s <= 3
            and counters.get("resumed", 0) + counters.get("aborted", 0) == roundtables
            and max_at_ready <= settings.max_concurrency,
        }
    finally:
        await env.close()
