"""The code-reading questions (``--tasks code``, docs/eval.md "Code reading"): each generated
program (:func:`roundtabled.core.code_reading.program`) is run once, here, when the set is made,
and what it printed is the gold answer.

The run is bounded: a child ``python -I -S`` (isolated: no user site, no environment variables
of Python, no ``site``) with an empty environment, in a fresh empty directory, under
:data:`CPU_S` seconds of CPU, :data:`MEMORY_BYTES` of address space, no file it may write
(``RLIMIT_FSIZE`` 0) and :data:`WALL_S` seconds of wall clock. The programs import nothing, so
they reach no network; nothing the run does uses one.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from roundtabled.core import code_reading
from roundtabled.core.scoring import Question

WALL_S = 5.0
"""Wall-clock seconds a program may run."""
CPU_S = 2
"""CPU seconds a program may use (``RLIMIT_CPU``)."""
MEMORY_BYTES = 256 * 1024 * 1024
"""Address space a program may map (``RLIMIT_AS``)."""
ATTEMPTS = 50
"""Seeds tried for one question before the set is refused (a generator fault, never a chance)."""
QUESTIONS_FILE = "questions.jsonl"
"""``OUT/questions.jsonl``: the generated set, in the ``--tasks FILE`` format."""


class ProgramFailed(Exception):
    """A program did not print one line within the bounds (the message says what it did)."""


def _limits() -> None:  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, CPU_S))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_program(source: str) -> str:
    """What ``source`` prints, run once under the bounds of this module's docstring.

    Raises:
        ProgramFailed: it exited non-zero, ran past :data:`WALL_S`, or printed nothing or more
            than one line.
    """
    with tempfile.TemporaryDirectory(prefix="roundtabled-code-") as cwd:
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-S", "-c", source],
                cwd=cwd,
                env={},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=WALL_S,
                preexec_fn=_limits,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ProgramFailed(f"ran past {WALL_S:g} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ProgramFailed(f"exited {done.returncode}: {last}")
    if not code_reading.one_line(done.stdout):
        raise ProgramFailed(f"printed {done.stdout!r}, not one line")
    return done.stdout


def code_questions(count: int, seed: int, level: str = "medium") -> list[Question]:
    """``count`` code-reading questions of ``seed`` at ``level`` (a key of
    :data:`roundtabled.core.code_reading.LEVELS`): question ``i`` takes the program of seed
    ``"{seed}:{i}:{attempt}"`` for the first attempt (0, 1, …) whose run prints one line, and
    its output as the gold answer. The same seed and level give the same questions, and a
    longer set starts with the shorter one; ids are ``code-{seed}-{i}`` at ``medium``,
    ``code-{level}-{seed}-{i}`` otherwise.

    Raises:
        ProgramFailed: no program of :data:`ATTEMPTS` seeds ran for one question.
    """
    out: list[Question] = []
    for i in range(count):
        why = ""
        for attempt in range(ATTEMPTS):
            source = code_reading.program(f"{seed}:{i}:{attempt}", level)
            try:
                printed = run_program(source)
            except ProgramFailed as exc:
                why = str(exc)
                continue
            out.append(
                Question(
                    id=f"code-{seed}-{i}" if level == "medium" else f"code-{level}-{seed}-{i}",
                    question=code_reading.question_text(source),
                    answer=code_reading.output_form(printed) or printed,
                    compare="output",
                )
            )
            break
        else:
            raise ProgramFailed(
                f"code-{level}-{seed}-{i}: no program of {ATTEMPTS} seeds ran ({why})"
            )
    return out


def write_questions(path: Path, questions: Sequence[Question]) -> None:
    """Write ``questions`` as a ``--tasks FILE`` set (``{"id", "question", "answer",
    "compare"}`` a line), through a temporary file so that a reader never sees half of it."""
    tmp = path.with_name(path.name + ".tmp")
    lines = [
        json.dumps({"id": q.id, "question": q.question, "answer": q.answer, "compare": q.compare})
        for q in questions
    ]
    tmp.write_text("".join(line + "\n" for line in lines))
    os.replace(tmp, path)
