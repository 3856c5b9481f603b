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

BASE_PROTOCOLS = ("single", "vote")
CONTINUED = ("debate", "adaptive")
PROTOCOLS = (*BASE_PROTOCOLS, *CONTINUED, "sc")
"""``sc``: self-consistency at the debate's seat calls (:func:`self_consistency`)."""
DEFAULT_PROTOCOLS = (*BASE_PROTOCOLS, *CONTINUED)
DEBATE_ROUNDS = 2
"""``debate``: rounds after the opening (Du et al. 2023: 3 agents, 2 rounds of debate)."""
ADAPTIVE_MAX = 3
"""``adaptive``: at most this many rounds after the opening, stopping once converged."""

INSTRUCTIONS = {
    "position": "Make the label of your Position line the final answer only (for a number: "
    "just the number).",
    "answer": "Work it out step by step, then write the final answer only on your last line, "
    "as: Answer: <final answer>",
}
"""How the question tells the seats to state their answer (``--answer-line``)."""

CONTINUE_PROMPT = (
    "Continue: read the other seats' answers, check the reasoning step by step, and give your "
    "final answer to the same question."
)
SC_CLOSING = (
    "End your reply with one line: Position: <your final answer> — <one sentence> (confidence N/10)"
)
"""The closing line of an ``sc`` sample: the daemon's form, so that it is read like a seat's."""
GENERATED_TASKS = ("arithmetic", "code")
"""The generated task sets of ``--tasks`` (the flag's other value is a JSONL file)."""
DEFAULT_LOCAL_SEATS = ["seat-a", "seat-b", "seat-c"]
"""The seats written for ``--base-url``/``--model`` when ``--agents`` is not given."""


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
    """The seat ``sc`` asks (default the first seat)."""
    label: str | None = None
    """A free note recorded with the run (e.g. which closing-line form the daemon uses)."""

    def identity(self) -> dict[str, Any]:
        """The options a resumed run must share with the run it continues."""
        return {
            "tasks": self.tasks,
            "level": self.level if self.tasks == "arithmetic" else None,
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
            qs = code.code_questions(count, opts.seed)
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
    return names + [p for p in opts.protocols if p != "single"]
