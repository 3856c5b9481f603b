"""The start-up scan: find every roundtable left running (or not finalized) and resume it.

The scan lists the sessions of every directory the daemon knows (configured, remembered in
``directories.json`` under the state directory, and the server's own) and reads the index each
roundtable keeps in its session metadata; a candidate's signed state block is then loaded, its
history rebuilt from S2's messages, and its worker started. A roundtable whose parent session is
gone is aborted instead (``docs/design.md``, "recovery").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson

from roundtabled.core import history, lifecycle
from roundtabled.core.commands import Abort, PersistState
from roundtabled.core.server_records import SessionRef
from roundtabled.core.state import Phase, RoundtableState
from roundtabled.engine.plugins import HEARTBEAT_S
from roundtabled.engine.shell import Shell
from roundtabled.engine.table import Table
from roundtabled.errors import NotFound, StateError, TransportError

log = logging.getLogger("roundtabled.engine")


def warn_pasted_meta(s2: str, pasted: Sequence[str]) -> None:
    """Log each user message of S2 (ids ``pasted``: other than the state block's) holding a
    [ROUNDTABLE META] block: pasted by a person, it is text, never state."""
    for mid in pasted:
        log.warning(
            "roundtable %s: ignoring an untrusted [ROUNDTABLE META] block pasted into "
            "message %s (text, never state)",
            s2,
            mid,
            extra={"session_id": s2},
        )


def directories_file(state_dir: Path | None) -> Path | None:
    """Where the directories of earlier roundtables are remembered (``None``: nowhere)."""
    return state_dir / "directories.json" if state_dir else None


def known_directories(state_dir: Path | None) -> set[str]:
    """The directories remembered under ``state_dir`` (none when unreadable)."""
    path = directories_file(state_dir)
    if path is None:
        return set()
    try:
        data = json.loads(path.read_text())
        return {str(d) for d in data if isinstance(d, str)}
    except (OSError, ValueError):
        return set()


def remember_directory(state_dir: Path | None, directory: str | None) -> None:
    """Add ``directory`` to the remembered ones (atomically; a failure is only logged)."""
    path = directories_file(state_dir)
    if path is None or not directory:
        return
    known = known_directories(state_dir)
    if directory in known:
        return
    known.add(directory)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(sorted(known)))
        tmp.replace(path)
    except OSError as exc:
        log.warning("cannot record directory %s: %s", directory, exc)


class Recovery:
    """The start-up scan of one daemon.

    Args:
        shell: the shared effects.
        live: whether the engine already drives a roundtable (by S2's id).
        resume: adopt a loaded state and start its worker (the engine's registry); returns its
            table.
    """

    def __init__(
        self,
        shell: Shell,
        live: Callable[[str], bool],
        resume: Callable[[RoundtableState], Table],
    ) -> None:
        self.shell = shell
        self.live = live
        self.resume = resume
        self.left: int | None = None
        """Roundtables found by the scan running now and not loaded yet (``None``: no scan has
        listed its candidates yet); what the control API's "starting" answer names."""
        self._loaded: dict[str, asyncio.Task[bool]] = {}
        """Directory → whether its instance lists the plugin: asked once per directory (the
        roundtables of one directory are resumed concurrently)."""

    async def recover(self) -> dict[str, int]:
        """Find every roundtable left active (or not finalized) and resume it; abort those whose
        parent is gone. Returns counters ``{"resumed", "aborted", "skipped", "scanned"}``.
        Bounded concurrency against the server (``recovery_concurrency``)."""
        shell = self.shell
        counters = {"resumed": 0, "aborted": 0, "skipped": 0, "scanned": 0}
        self._loaded = {}  # asked again at each scan: the instance may have been reloaded
        directories = set(shell.settings.directories) | known_directories(shell.settings.state_dir)
        with contextlib.suppress(TransportError):
            server_dir = await shell.port.server_directory()
            if server_dir is not None:
                directories.add(server_dir)
        candidates: list[str] = []
        for d in sorted(directories):
            try:
                scanned, found = await shell.port.sessions_to_recover(d)
            except TransportError as exc:
                log.warning("recovery: cannot list sessions of %s: %s", d, exc)
                continue
            counters["scanned"] += scanned
            candidates += found
        sem = asyncio.Semaphore(shell.settings.recovery_concurrency)
        self.left = len(candidates)

        async def one(session: str) -> None:
            async with sem:
                try:
                    outcome = await self.recover_one(session)
                finally:
                    self.left = max(0, (self.left or 1) - 1)
                counters[outcome] += 1

        await asyncio.gather(*(one(s) for s in candidates))
        resumed = counters["resumed"]
        if resumed:
            log.info(
                "recovery: resumed %d roundtable(s), aborted %d, skipped %d",
                resumed,
                counters["aborted"],
                counters["skipped"],
            )
        return counters

    async def _plugin_loaded(self, directory: str | None) -> bool:
        """Whether the server's instance of ``directory`` lists the roundtable plugin (a server
        that cannot say: no)."""
        if directory is None:
            return False
        task = self._loaded.get(directory)
        if task is None:
            task = self._loaded[directory] = asyncio.ensure_future(self._ask_loaded(directory))
        return await asyncio.shield(task)

    async def _ask_loaded(self, directory: str) -> bool:
        try:
            return await self.shell.plugin_loaded(directory)
        except TransportError:
            return False

    async def recover_one(self, s2: str) -> str:
        """Resume, abort or skip the candidate S2 (a session id); returns which (a key of the
        counters)."""
        shell = self.shell
        if self.live(s2):
            return "skipped"
        try:
            state = await shell.store.load(s2)
        except (StateError, TransportError) as exc:
            log.error("recovery: roundtable %s skipped: %s", s2, exc, extra={"session_id": s2})
            return "skipped"
        if not state.active and state.finalization.toast_done:
            return "skipped"
        if state.parent_session_id:
            try:
                await shell.port.session(state.parent_session_id)
            except NotFound:
                orphan = lifecycle.orphaned(state)
                for cmd in orphan.commands:
                    try:
                        if isinstance(cmd, Abort):
                            await shell.port.abort(SessionRef(s2, state.directory))
                        elif isinstance(cmd, PersistState):
                            await shell.store.persist(orphan.state, index=cmd.index)
                    except TransportError as exc:
                        log.warning(
                            "recovery: roundtable %s: %s failed: %s",
                            s2,
                            "the abort" if isinstance(cmd, Abort) else "the state write",
                            exc,
                            extra={"session_id": s2},
                        )
                log.info(
                    "recovery: roundtable %s aborted (its parent session is gone)",
                    s2,
                    extra={"session_id": s2},
                )
                return "aborted"
        read = await shell.store.read_all(s2, state.state_message_id)
        warn_pasted_meta(s2, read.pasted_meta)
        views = read.views
        state = state.model_copy(update={"history": history.rebuild_history(state, views)})
        state = history.with_modes_ran(state, views)
        if state.active and await self._plugin_loaded(state.directory):
            # The directory's instance has the plugin loaded, and its report comes within a
            # heartbeat: a daemon that resumed before hearing it would run the next turns in the
            # PATCH mode for nothing (a write per answered prompt) and switch back at the report.
            await shell.plugins.wait_for(state.directory, HEARTBEAT_S + 1.0)
        table = self.resume(state)
        if state.active:
            table.log.info(
                "recovery: resuming at round %d, %s",
                state.current_round + 1,
                state.agents[state.current_agent_index]
                if state.phase == Phase.ACTIVE
                else "observer",
            )
            shell.toast(state, f"Roundtable resumed after a restart: {state.title}", "info")
        return "resumed"
