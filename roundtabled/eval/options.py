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
    base_urls: list[str] = field(default_factory=list)
    """``--base-url``: the local server's URL, or one per model of :attr:`models` (checked by
    :func:`~roundtabled.service.provider.check_local_models`); empty without ``--model``."""
    models: list[str] = field(default_factory=list)
    """``--model``: the names of the local models the run writes its seats on, dealt to the
    seats in turn (:func:`local_seats`); empty: the seats as the server defines them."""
    output_limit: int = provider.DEFAULT_OUTPUT
    """With ``models``: OpenCode's ``limit.output`` (tokens a reply may take)."""
    context_limit: int = provider.DEFAULT_CONTEXT
    """With ``models``: OpenCode's ``limit.context`` (tokens)."""
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
            "model": _one_or_list(self.models),
            "baseURL": _one_or_list(self.base_urls),
            "outputLimit": self.output_limit if self.models else None,
            "contextLimit": self.context_limit if self.models else None,
            "scSeat": self.sc_seat,
        }


def _one_or_list(values: list[str]) -> str | list[str] | None:
    """A list option as ``run.json`` records it: ``None`` when empty, the one value as a string
    (what a run recorded before ``--model``/``--base-url`` took lists, so such a run directory
    still resumes), else the list."""
    if not values:
        return None
    return values[0] if len(values) == 1 else list(values)


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


def local_seats(opts: EvalOptions) -> dict[str, provider.LocalModel]:
    """The model of every agent the run writes (``{}`` without ``--model``): the seats in
    order, dealt the models round-robin (seat 1 on model 1, seat 2 on model 2, …, then model 1
    again), and with ``self-consistency`` its :func:`sample_agents`, each on the model of the
    seat it copies."""
    if not opts.models:
        return {}
    seats = provider.deal(provider.local_models(opts.base_urls, opts.models), opts.agents)
    if SELF_CONSISTENCY in opts.protocols:
        sampled = seats[opts.sc_seat or opts.agents[0]]
        seats.update(dict.fromkeys(sample_agents(opts), sampled))
    return seats


def project_config(opts: EvalOptions) -> dict[str, Any]:
    """The ``opencode.json`` the run writes into its own project for ``--model`` (docs/eval.md,
    "Running it"): a provider per distinct URL, the first model as the default (the built-in
    observer's), every agent of :func:`local_seats` on its model, with the run's limits.

    Raises:
        ValueError: no ``--model`` in ``opts``.
    """
    if not opts.models:
        raise ValueError("the run writes no project without --model")
    return provider.with_local_models(
        {"$schema": "https://opencode.ai/config.json"},
        provider.local_models(opts.base_urls, opts.models),
        local_seats(opts),
        context=opts.context_limit,
        output=opts.output_limit,
    )
