"""The options of an evaluation run, its questions and what the seats are asked (docs/eval.md,
"Flags" and "Protocols")."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roundtabled.cli.client import CliError
from roundtabled.core import scoring
from roundtabled.core.scoring import Question
from roundtabled.eval import code
from roundtabled.service import provider

PANEL_PROTOCOLS = ("vote", "debate", "adaptive", "council")
"""The product's protocols: each is one roundtable started with ``protocol: X`` (docs/eval.md,
"What runs per question")."""
SELF_CONSISTENCY = "self-consistency"
PROTOCOLS = ("single", *PANEL_PROTOCOLS, SELF_CONSISTENCY)
"""The values of ``--protocols``. ``single``: each seat alone, read from the independent answers
of the ``vote`` roundtable (of ``debate``'s opening when ``vote`` is not asked for)."""
DEFAULT_PROTOCOLS = PROTOCOLS
DEBATE_ROUNDS = 3
"""``debate`` and ``adaptive``: rounds, the independent opening included (Du et al. 2023: 3
agents, 2 rounds of debate after the first answers)."""

INSTRUCTIONS = {
    "position": "Make the label of your Position line the final answer only (for a number: "
    "just the number).",
    "answer": "Work it out step by step, then write the final answer only on your last line, "
    "as: Answer: <final answer>",
}
"""How the question tells the seats to state their answer (``--answer-line``)."""

GENERATED_TASKS = ("arithmetic", "code")
"""The generated task sets of ``--tasks`` (the flag's other value is a JSONL file)."""
DEFAULT_LOCAL_SEATS = ["seat-a", "seat-b", "seat-c"]
"""The seats written for ``--base-url``/``--model`` when ``--agents`` is not given."""


RECORD_FORMAT = 2
"""The layout of ``results.jsonl`` (one roundtable per protocol); a run directory written in
another layout is not resumed (``run.json`` ``options.format``)."""


@dataclass
class EvalOptions:
    """What one ``roundtabled eval`` run measures (the CLI flags, docs/eval.md)."""

    agents: list[str]
    out: Path
    tasks: str = "arithmetic"
    """One of :data:`GENERATED_TASKS` or the path of a JSONL task file."""
    level: str = "medium"
    count: int = 40
    seed: int = 0
    limit: int | None = None
    protocols: list[str] = field(default_factory=lambda: list(DEFAULT_PROTOCOLS))
    concurrency: int = 1
    max_usd: float | None = None
    max_tokens: int | None = None
    answer_line: str = "position"
    directory: str | None = None
    base_url: str | None = None
    model: str | None = None
    output_limit: int = provider.DEFAULT_OUTPUT
    """With ``model``: OpenCode's ``limit.output`` (tokens a reply may take)."""
    context_limit: int = provider.DEFAULT_CONTEXT
    """With ``model``: OpenCode's ``limit.context`` (tokens)."""
    cleanup: bool = False
    turn_timeout: float | None = None
    sc_seat: str | None = None
    """The seat ``self-consistency`` samples (default the first seat)."""
    label: str | None = None
    """A free note recorded with the run (e.g. which closing-line form the daemon uses)."""

    def identity(self) -> dict[str, Any]:
        """The options a resumed run must share with the run it continues."""
        return {
            "format": RECORD_FORMAT,
            "tasks": self.tasks,
            "level": self.level if self.tasks in GENERATED_TASKS else None,
            "seed": self.seed,
            "agents": self.agents,
            "protocols": self.protocols,
            "answerLine": self.answer_line,
            "model": self.model,
            "baseURL": self.base_url,
            "outputLimit": self.output_limit if self.model else None,
            "contextLimit": self.context_limit if self.model else None,
            "scSeat": self.sc_seat,
        }


@dataclass
class Target:
    """The daemon and the OpenCode server a run talks to."""

    control_url: str
    token_file: Path
    server_url: str
    server_username: str = "opencode"
    server_password: str | None = None


def load_questions(opts: EvalOptions) -> list[Question]:
    """The run's questions (``--limit`` applied).

    Raises:
        CliError: (exit 2) an unreadable or invalid task file, naming ``--tasks``; (exit 1) a
            code-reading program that would not run (:class:`~roundtabled.eval.code.ProgramFailed`).
    """
    if opts.tasks == "arithmetic":
        qs = scoring.arithmetic_questions(opts.level, opts.count, opts.seed)
    elif opts.tasks == "code":
        count = opts.count if opts.limit is None else min(opts.count, opts.limit)
        try:
            qs = code.code_questions(count, opts.seed, opts.level)
        except code.ProgramFailed as exc:
            raise CliError(f"Error: --tasks code: {exc}") from None
    else:
        path = Path(opts.tasks).expanduser()
        try:
            text = path.read_text()
        except OSError as exc:
            raise CliError(f"Error: --tasks {path}: {exc.strerror}", 2) from None
        try:
            qs = scoring.parse_task_lines(text.splitlines(), str(path))
        except scoring.TaskFileError as exc:
            raise CliError(f"Error: --tasks {exc}", 2) from None
    return qs[: opts.limit] if opts.limit is not None else qs


def topic_for(q: Question, answer_line: str) -> str:
    """The roundtable topic of a question: the question (with its choices) and the answer rule."""
    return f"{scoring.question_text(q)}\n\n{INSTRUCTIONS[answer_line]}"


def protocol_names(opts: EvalOptions) -> list[str]:
    """The report's protocols in order: ``single:<seat>`` for each seat, then the rest."""
    names = [f"single:{a}" for a in opts.agents] if "single" in opts.protocols else []
    return names + [p for p in PROTOCOLS if p != "single" and p in opts.protocols]


def runs_of(opts: EvalOptions) -> list[str]:
    """The roundtables a question runs, in order (one per protocol): the asked panel protocols,
    then ``self-consistency``; when only ``single`` needs independent answers (neither ``vote``
    nor ``debate`` is asked for), a one-round roundtable with an independent opening named
    ``single`` first."""
    runs = [p for p in PANEL_PROTOCOLS if p in opts.protocols]
    if "single" in opts.protocols and not {"vote", "debate"} & set(runs):
        runs.insert(0, "single")
    if SELF_CONSISTENCY in opts.protocols:
        runs.append(SELF_CONSISTENCY)
    return runs


def singles_from(opts: EvalOptions) -> str:
    """The roundtable whose independent answers are the ``single:<seat>`` answers: ``vote``'s,
    else ``debate``'s opening round (both independent), else the ``single`` round of
    :func:`runs_of`."""
    runs = runs_of(opts)
    return next(r for r in ("vote", "debate", "single") if r in runs or r == "single")


def sample_agents(opts: EvalOptions) -> list[str]:
    """The ``self-consistency`` seats: the sampled seat under as many names as the panel has
    seats (``seat-a-sample1``, ``seat-a-sample2``, …), written into the run's project as copies
    of that seat (a roundtable seats an agent once, so its samples need names of their own)."""
    seat = opts.sc_seat or opts.agents[0]
    return [f"{seat}-sample{i + 1}" for i in range(len(opts.agents))]
