"""The run directory's ledger: ``results.jsonl`` (a record per question), ``roundtables.jsonl``
(the roundtables the run started and gave up) and the lock that keeps one run per directory
(docs/eval.md, "Resuming")."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from roundtabled.cli.client import CliError

JOURNAL_FILE = "roundtables.jsonl"
"""``OUT/roundtables.jsonl``: a line per roundtable the run started (``{"id", "sessionID",
"parentSessionID", "started"}``; ``id`` is ``"<question id>/<protocol>"``, one roundtable per
protocol), written before the run waits on it, and one per roundtable it gave up (the same, with
``"abandoned": reason``)."""
GONE_END_REASONS = ("session-deleted", "parent-deleted")
"""End reasons of a roundtable whose debate can no longer be read (its session is gone)."""
GONE = (
    "is gone (roundtabled knows no roundtable by that id: its session was deleted, or the run "
    "moved to another server)"
)
"""Why a roundtable the daemon does not know is given up (follows "its roundtable SES")."""


class RoundtableGone(Exception):
    """The roundtable ``ses`` of a question is gone, or ended without a debate that can be read;
    ``reason`` says which (a phrase that follows "its roundtable SES"); ``key`` is its journal
    key (``"<question id>/<protocol>"``, :data:`JOURNAL_FILE`), empty when not known."""

    def __init__(self, ses: str, parent: str, reason: str, key: str = "") -> None:
        super().__init__(f"roundtable {ses} {reason}")
        self.ses, self.parent, self.reason, self.key = ses, parent, reason, key


class Journal:
    """The roundtables of a run (:data:`JOURNAL_FILE`), read at the start and appended to as
    they are started and given up; a last line cut by an interrupt is ignored."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[dict[str, Any]] = [
            line for line in read_records(path) if line.get("sessionID")
        ]

    def started(self, qid: str) -> dict[str, Any] | None:
        """The last roundtable started for question ``qid`` and not given up, or ``None``."""
        given_up = {line["sessionID"] for line in self.lines if line.get("abandoned")}
        for line in reversed(self.lines):
            if line["id"] == qid and line["sessionID"] not in given_up:
                return dict(line)
        return None

    def sessions(self) -> set[str]:
        return {str(line["sessionID"]) for line in self.lines}

    def abandoned(self) -> list[dict[str, Any]]:
        """``[{"id", "sessionID", "parentSessionID", "abandoned": reason}]`` in order."""
        return [line for line in self.lines if line.get("abandoned")]

    def unrecorded(self, records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The roundtables started and not given up that no record of ``records`` holds (a
        question stopped before it was recorded): ``[{"id", "sessionID", "parentSessionID"}]``."""
        given_up = {line["sessionID"] for line in self.lines if line.get("abandoned")}
        held = {str(s) for r in records for s in r.get("sessions") or ()}
        return [
            dict(line)
            for line in self.lines
            if not line.get("abandoned")
            and line["sessionID"] not in given_up
            and str(line["sessionID"]) not in held
        ]

    def add(self, qid: str, ses: str, parent: str, abandoned: str | None = None) -> None:
        line: dict[str, Any] = {"id": qid, "sessionID": ses, "parentSessionID": parent}
        if abandoned is None:
            line["started"] = time.time()
        else:
            line["abandoned"] = abandoned
        self.lines.append(line)
        with self.path.open("a") as f:
            f.write(json.dumps(line) + "\n")


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of ``results.jsonl``; a last line cut by an interrupt is ignored."""
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            obj = json.loads(line)
            if isinstance(obj, dict) and "id" in obj:
                out.append(obj)
    return out


@contextlib.contextmanager
def only_run(out: Path) -> Iterator[None]:
    """Hold ``OUT/.lock`` while the run drives its questions: one run decides what happens to
    a run directory's roundtables (which to attach to, extend, or give up), so a second
    ``roundtabled eval`` on the same ``--out`` at once is refused rather than driving them too.
    The lock goes with the process (``flock``), so a killed run leaves none behind.

    Raises:
        CliError: (exit 1) another run holds it, naming ``--out`` and that run's process.
    """
    f = (out / ".lock").open("a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise CliError(
            f"Error: --out {out} is in use by another roundtabled eval ({holder}); wait for it "
            "to end, or give another --out"
        ) from None
    try:
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}\n")
        f.flush()
        yield
    finally:
        f.close()
