"""The roundtables a person can list (``GET /v1/roundtables``, ``roundtabled list``).

Read from the OpenCode server, not from the daemon's memory, so a list after a daemon restart
shows the roundtables that ran before it: every session whose metadata holds the daemon's index
(``metadata.roundtabled``, written with each phase change of a state block) in the directories
the daemon knows, read through the engine's public ``status``/``stored_status`` (a block
without the daemon's valid signature is no roundtable of ours and is left out). Read only:
nothing is written. Contract: docs/control-api.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from roundtabled.core.server_records import IndexedSession
from roundtabled.engine import v2_features
from roundtabled.engine.recovery import known_directories
from roundtabled.engine.registry import Engine
from roundtabled.engine.table import Table, status_of
from roundtabled.engine.v2run import V2Runner
from roundtabled.errors import NotFound, TransportError, ValidationFailed

log = logging.getLogger("roundtabled.listing")

DEFAULT_LIMIT = 20
"""Roundtables listed without ``all`` (the most recently updated; active ones always)."""
MAX_LIMIT = 1000
READ_CONCURRENCY = 8
"""State blocks read at once (one or two GETs each) while listing."""

_TRUE = {"1", "true", "yes"}
_FALSE = {"0", "false", "no", ""}


def parse_query(query: Mapping[str, str]) -> tuple[bool, int]:
    """``(all, limit)`` from the query of ``GET /v1/roundtables``.

    ``all``: ``true``/``false`` (also ``1``/``0``), default false; ``limit``: 1 to 1000, default
    20, ignored with ``all``.

    Raises:
        ValidationFailed: an unknown parameter or a bad value (field ``all``/``limit``).
    """
    unknown = sorted(set(query) - {"all", "limit"})
    if unknown:
        raise ValidationFailed(
            unknown[0], f"unknown query parameter {unknown[0]!r}; allowed: all, limit"
        )
    raw_all = query.get("all", "false").strip().lower()
    if raw_all not in _TRUE | _FALSE:
        raise ValidationFailed("all", f"all must be true or false, got {query.get('all')!r}")
    raw_limit = query.get("limit", str(DEFAULT_LIMIT))
    try:
        limit = int(raw_limit)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationFailed(
            "limit", f"limit must be a whole number from 1 to {MAX_LIMIT}, got {raw_limit!r}"
        )
    return raw_all in _TRUE, limit


def directories_to_list(engine: Engine) -> list[str | None]:
    """Where to look: the server's own directory (``None``), the configured directories, those
    of the roundtables in memory and those the daemon recorded on earlier starts
    (:func:`roundtabled.engine.recovery.known_directories`)."""
    found: set[str] = set(engine.settings.directories)
    for table in [*engine.tables.values(), *engine.recent.values()]:
        if table.state.directory:
            found.add(table.state.directory)
    found |= known_directories(engine.settings.state_dir)
    return [None, *sorted(found)]


async def _indexed_sessions(engine: Engine) -> list[IndexedSession]:
    """Every session holding the daemon's index, each once, newest update first (read through
    the 1.x port, :meth:`~roundtabled.opencode.port.V1Session.indexed_sessions`)."""
    seen: dict[str, IndexedSession] = {}
    for directory in directories_to_list(engine):
        try:
            sessions = await engine.shell.port.indexed_sessions(directory)
        except TransportError as exc:
            log.warning("list: cannot list the sessions of %s: %s", directory or "the server", exc)
            continue
        for s in sessions:
            seen.setdefault(s.session.id, s)
    return sorted(seen.values(), key=lambda s: s.updated, reverse=True)


def _is_active(session: IndexedSession) -> bool:
    return session.phase in ("active", "observing")


async def list_roundtables(engine: Engine, query: Mapping[str, str]) -> dict[str, Any]:
    """The answer of ``GET /v1/roundtables``.

    Returns ``{"roundtables": [status + "updated" (epoch ms)], "more": n}``: active roundtables
    first, then the others newest first; without ``all`` at most ``limit`` in all (active ones
    are never left out), ``more`` counting those left out. Roundtables held in memory whose
    session the server does not list (yet) are included too.

    Raises:
        ValidationFailed: a bad query (see :func:`parse_query`).
    """
    include_all, limit = parse_query(query)
    sessions = await _indexed_sessions(engine)
    listed_ids = {s.session.id for s in sessions}
    active = [s for s in sessions if _is_active(s)]
    others = [s for s in sessions if not _is_active(s)]
    chosen = active + others
    if not include_all:
        chosen = active + others[: max(0, limit - len(active))]
    more = len(sessions) - len(chosen)
    sem = asyncio.Semaphore(READ_CONCURRENCY)

    async def row(session: IndexedSession) -> dict[str, Any] | None:
        sid = session.session.id
        async with sem:
            try:
                st = engine.status(sid) or await engine.stored_status(sid)
            except TransportError as exc:
                log.warning("list: cannot read roundtable %s: %s", sid, exc)
                return None
        if st is None:
            return None
        return {**st, "updated": session.updated}

    rows = [r for r in await asyncio.gather(*(row(s) for s in chosen)) if r is not None]
    # In memory but not (yet) listed by the server, e.g. S2 of another directory.
    for sid, table in [*engine.tables.items(), *engine.recent.items()]:
        if sid not in listed_ids:
            st = engine.status(sid)
            if st is not None:
                rows.append({**st, "updated": table.state.updated_at})
    rows.sort(key=lambda r: (r.get("phase") not in ("active", "observing"), -int(r["updated"])))
    return {"roundtables": rows, "more": more}


# ── OpenCode 2.x ────────────────────────────────────────────────────────────────────────────────


async def stored_status_v2(
    runner: V2Runner, s2: str, *, result: bool = False
) -> dict[str, Any] | None:
    """The status of a 2.x roundtable this process does not hold (concluded before a restart),
    read from the signed state in S2's metadata; ``None``: S2 is gone or holds no state of this
    daemon. ``result``: as :func:`roundtabled.engine.table.status_of`.

    Raises:
        TransportError: the server could not be reached.
    """
    try:
        ref = await runner.port.session(s2)
        state = await v2_features.stored_state(runner.port, runner.signer, ref, full=result)
    except NotFound:
        return None
    if state is None:
        return None
    return status_of(Table(state=state), runner.clock(), result=result)


async def list_roundtables_v2(runner: V2Runner, query: Mapping[str, str]) -> dict[str, Any]:
    """The answer of ``GET /v1/roundtables`` on OpenCode 2.x, as :func:`list_roundtables`
    gives it on 1.x: every session of the configured, remembered and running roundtables'
    directories whose metadata holds a state block signed by this daemon (a 2.x server lists
    sessions per directory: there is no "the server's own" listing), the running ones from
    memory.

    Raises:
        ValidationFailed: a bad query (see :func:`parse_query`).
    """
    include_all, limit = parse_query(query)
    found: set[str] = set(runner.settings.directories)
    found |= {r.state.directory for r in runner.tables.values() if r.state.directory}
    found |= known_directories(runner.settings.state_dir)
    try:
        sessions = await v2_features.indexed_sessions(runner.port, sorted(found))
    except TransportError as exc:
        log.warning("list: cannot list the sessions: %s", exc)
        sessions = []
    listed_ids = {ref.id for ref, _, _ in sessions}
    active = [s for s in sessions if s[1] in ("active", "observing")]
    others = [s for s in sessions if s[1] not in ("active", "observing")]
    chosen = active + others
    if not include_all:
        chosen = active + others[: max(0, limit - len(active))]
    more = len(sessions) - len(chosen)
    sem = asyncio.Semaphore(READ_CONCURRENCY)

    async def row(ref: Any, updated: int) -> dict[str, Any] | None:
        async with sem:
            try:
                st = runner.status(ref.id) or await stored_status_v2(runner, ref.id)
            except TransportError as exc:
                log.warning("list: cannot read roundtable %s: %s", ref.id, exc)
                return None
        if st is None:
            return None
        st.pop("result", None)  # the list carries no result contract (as on 1.x)
        return {**st, "updated": updated}

    rows = [r for r in await asyncio.gather(*(row(s[0], s[2]) for s in chosen)) if r is not None]
    for sid, run in runner.tables.items():
        if sid not in listed_ids:
            st = runner.status(sid)
            if st is not None:
                st.pop("result", None)
                rows.append({**st, "updated": run.state.updated_at})
    rows.sort(key=lambda r: (r.get("phase") not in ("active", "observing"), -int(r["updated"])))
    return {"roundtables": rows, "more": more}
