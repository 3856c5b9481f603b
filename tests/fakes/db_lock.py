"""Hold the write lock of a real ``opencode serve``'s SQLite database from outside.

What another OpenCode process on the same database does (public reports on 1.18.29/1.18.30): a
``BEGIN IMMEDIATE`` transaction takes SQLite's write lock; every write of the server then waits
its own lock timeout (5 s on 1.18.33) and fails with HTTP 500 ``UnknownError`` (server log:
``Failed to execute statement … SQLiteError: database is locked``), or, in a turn it runs in the
background, with a ``session.error`` of that name. Reads go on (WAL mode). Used by the regression
"transient database lock during a turn and the state write".

The database of a test server is ``$XDG_DATA_HOME/opencode/opencode.db`` under its root
(:func:`database_of`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

from roundtabled.offline.opencode_server import OpenCodeServer


def database_of(server: OpenCodeServer) -> Path:
    """Path of ``server``'s SQLite database; raises :class:`FileNotFoundError` before the server
    created it."""
    path = server.xdg_dir / "data" / "opencode" / "opencode.db"
    if not path.is_file():
        raise FileNotFoundError(f"no database at {path} (has the server started?)")
    return path


class WriteLock:
    """``await lock.hold(seconds)`` returns once the write lock is taken and releases it
    ``seconds`` s later in a thread of its own; ``await lock.released()`` waits for that.
    ``held`` lists ``(monotonic start, monotonic end)`` of every hold, for failure messages."""

    def __init__(self, server: OpenCodeServer) -> None:
        self.path = database_of(server)
        self.held: list[tuple[float, float]] = []
        self._threads: list[threading.Thread] = []

    async def hold(self, seconds: float) -> None:
        """Take the lock (waiting up to 30 s for the server's own writes), keep it ``seconds`` s."""
        loop = asyncio.get_running_loop()
        taken: asyncio.Future[None] = loop.create_future()

        def run() -> None:
            con = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            try:
                con.execute("BEGIN IMMEDIATE")
                start = time.monotonic()
                loop.call_soon_threadsafe(taken.set_result, None)
                time.sleep(seconds)
                con.execute("ROLLBACK")
                self.held.append((start, time.monotonic()))
            except BaseException as exc:  # reported to the awaiting test
                if not taken.done():
                    loop.call_soon_threadsafe(taken.set_exception, exc)
                raise
            finally:
                con.close()

        thread = threading.Thread(target=run, name="db-write-lock", daemon=True)
        self._threads.append(thread)
        thread.start()
        await taken

    async def released(self) -> None:
        """Wait until every hold has ended."""
        for thread in self._threads:
            await asyncio.to_thread(thread.join)
