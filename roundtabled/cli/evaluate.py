"""``roundtabled eval``: its flags, checked here so that a bad one is one ``Error:`` line naming
it (exit 2); the run is the :mod:`roundtabled.eval` package's (docs/eval.md)."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from roundtabled.cli.client import EXIT_USAGE, CliError, control_url
from roundtabled.cli.debate import turn_timeout_flag
from roundtabled.core import code_reading
from roundtabled.core.scoring import ARITHMETIC_LEVELS
from roundtabled.eval.options import (
    DEFAULT_LOCAL_SEATS,
    DEFAULT_PROTOCOLS,
    GENERATED_TASKS,
    PROTOCOLS,
    SELF_CONSISTENCY,
    EvalOptions,
    Target,
)
from roundtabled.eval.run import run_eval
from roundtabled.service import config as cfg
from roundtabled.service import provider


def add_eval(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "eval",
        help="measure a panel's decisions on questions with known answers (single seat, the "
        "product's protocols, self-consistency) through the daemon",
    )
    s.add_argument(
        "--tasks",
        default="arithmetic",
        help="'arithmetic' (generated, seeded), 'code' (generated Python programs: what does "
        'this print?) or a JSONL file of {"id", "question", "answer", "choices"?, "compare"?} '
        "(default arithmetic)",
    )
    s.add_argument(
        "--level",
        default="medium",
        help=f"arithmetic level: {', '.join(ARITHMETIC_LEVELS)} (default medium: a*b+c*d, 2-20; "
        "du: a+b*c+d-e*f, 0-30; easy: a+b*c, 2-12); code level: "
        f"{', '.join(code_reading.LEVELS)} (default medium; easy: one operation on literals)",
    )
    s.add_argument("--count", default="40", help="questions generated (default 40)")
    s.add_argument("--seed", default="0", help="seed of the generated questions (default 0)")
    s.add_argument("--limit", help="run only the first N questions")
    s.add_argument("--agents", help="comma-separated seats (required unless --model)")
    s.add_argument(
        "--protocols",
        help=f"comma-separated, of {', '.join(PROTOCOLS)} (default all; each is one roundtable "
        "the daemon runs with that protocol; single: each seat alone, read from vote's "
        "independent answers; self-consistency: the --sc-seat sampled once per seat, needs "
        "--model)",
    )
    s.add_argument("--sc-seat", help="the seat self-consistency samples (default: the first seat)")
    s.add_argument("--concurrency", default="1", help="questions at once (1-16, default 1)")
    s.add_argument("--max-usd", help="stop before the next question would pass X US dollars")
    s.add_argument("--max-tokens", help="stop before the next question would pass N tokens")
    s.add_argument(
        "--answer-line",
        default="position",
        help="how seats state the answer: 'position' (the Position label is the answer, "
        "default) or 'answer' (step by step, then an 'Answer:' last line)",
    )
    s.add_argument(
        "--out", help="run directory (results.jsonl, report.md/json; default ./eval-<task>-<seed>)"
    )
    s.add_argument("--directory", help="project directory of the seats (default: the server's)")
    s.add_argument(
        "--base-url",
        help="a local OpenAI-compatible server (e.g. http://127.0.0.1:8080/v1), or one per "
        "--model name, comma-separated (model i at URL i); with --model the run writes its "
        "provider configuration (env ROUNDTABLED_EVAL_BASE_URL)",
    )
    s.add_argument(
        "--model",
        help="the model name that server serves, or comma-separated names for a mixed panel: "
        "seat 1 on the first, seat 2 on the second, ..., round-robin; the observer on the "
        "first (env ROUNDTABLED_EVAL_MODEL)",
    )
    s.add_argument(
        "--output-limit",
        help="with --model: tokens a reply may take, OpenCode's limit.output "
        f"({provider.OUTPUT_LIMITS[0]}-{provider.OUTPUT_LIMITS[1]}, "
        f"default {provider.DEFAULT_OUTPUT})",
    )
    s.add_argument(
        "--context-limit",
        help="with --model: tokens of the model's context, OpenCode's limit.context "
        f"({provider.CONTEXT_LIMITS[0]}-{provider.CONTEXT_LIMITS[1]}, "
        f"default {provider.DEFAULT_CONTEXT}; "
        "the model server's own context must hold it)",
    )
    s.add_argument("--turn-timeout", help="seconds per turn for the roundtables")
    s.add_argument("--note", help="a note recorded in the report (e.g. the daemon's prompt form)")
    s.add_argument(
        "--cleanup", action="store_true", help="delete the run's sessions after the report"
    )
    s.set_defaults(handler=cmd_eval)


def _usage(message: str) -> CliError:
    return CliError(f"Error: {message}", EXIT_USAGE)


def _int(value: str | None, flag: str, low: int, high: int) -> int | None:
    try:
        return provider.whole(value, flag, low, high)
    except provider.BadModelOption as exc:
        raise _usage(str(exc)) from None


def _positive(value: str | None, flag: str) -> float | None:
    if value is None:
        return None
    try:
        x = float(value)
    except ValueError:
        x = math.nan
    if not math.isfinite(x) or x <= 0:
        raise _usage(f"{flag} must be a positive number, got {value!r}")
    return x


def options_from(args: argparse.Namespace) -> EvalOptions:
    """The run's options from the flags (and ``ROUNDTABLED_EVAL_BASE_URL`` /
    ``ROUNDTABLED_EVAL_MODEL``).

    Raises:
        CliError: (exit 2) one line naming the bad flag and its allowed values.
    """
    generated = args.tasks in GENERATED_TASKS
    if not generated and not Path(args.tasks).expanduser().is_file():
        raise _usage(
            f"--tasks must be {', '.join(map(repr, GENERATED_TASKS))} or a JSONL file, "
            f"got {args.tasks!r}"
        )
    levels = code_reading.LEVELS if args.tasks == "code" else ARITHMETIC_LEVELS
    if args.level not in levels:
        raise _usage(
            f"--level must be one of {', '.join(levels)}"
            + (" for --tasks code" if args.tasks == "code" else "")
            + f", got {args.level!r}"
        )
    given = args.protocols is not None
    protocols = [p.strip() for p in (args.protocols or "").split(",") if p.strip()]
    bad = [p for p in protocols if p not in PROTOCOLS]
    if given and (bad or not protocols):
        raise _usage(
            f"--protocols: {'unknown ' + ', '.join(map(repr, bad)) if bad else 'none given'}; "
            f"allowed {', '.join(PROTOCOLS)}"
        )
    if args.answer_line not in ("position", "answer"):
        raise _usage(f"--answer-line must be 'position' or 'answer', got {args.answer_line!r}")
    base_url = args.base_url or os.environ.get("ROUNDTABLED_EVAL_BASE_URL") or None
    model = args.model or os.environ.get("ROUNDTABLED_EVAL_MODEL") or None
    if bool(base_url) != bool(model):
        raise _usage("--base-url and --model go together (the server's URL and its model name)")
    base_urls: list[str] = []
    models: list[str] = []
    if base_url and model:
        try:
            # The error names where the bad value came from: the flag or its variable.
            base_urls, models = provider.check_local_models(
                base_url,
                model,
                url_flag="--base-url" if args.base_url else "ROUNDTABLED_EVAL_BASE_URL",
                model_flag="--model" if args.model else "ROUNDTABLED_EVAL_MODEL",
            )
        except provider.BadModelOption as exc:
            raise _usage(str(exc)) from None
    if args.agents:
        agents = [a.strip() for a in args.agents.split(",")]
        if any(not a for a in agents) or len(set(agents)) != len(agents) or len(agents) < 2:
            raise _usage(f"--agents must name 2 or more different seats, got {args.agents!r}")
    elif model:
        agents = list(DEFAULT_LOCAL_SEATS)
    else:
        raise _usage("--agents is required (comma-separated seats) unless --model is given")
    if not given:
        # Self-consistency samples copies of a seat that the run writes into its own project,
        # which it does for --model only; the other protocols are the default then.
        protocols = [p for p in DEFAULT_PROTOCOLS if model or p != SELF_CONSISTENCY]
    elif SELF_CONSISTENCY in protocols and not model:
        raise _usage(
            f"--protocols {SELF_CONSISTENCY} needs --base-url and --model (the run writes the "
            "sampled seat's copies into its own project); leave it out with --agents"
        )
    if args.sc_seat is not None and args.sc_seat not in agents:
        raise _usage(
            f"--sc-seat must be one of the seats ({', '.join(agents)}), got {args.sc_seat!r}"
        )
    count = _int(args.count, "--count", 1, 100000)
    seed = _int(args.seed, "--seed", 0, 2**31)
    limit = _int(args.limit, "--limit", 1, 100000)
    concurrency = _int(args.concurrency, "--concurrency", 1, 16)
    max_tokens = _int(args.max_tokens, "--max-tokens", 1, 10**12)
    if (args.output_limit is not None or args.context_limit is not None) and not model:
        raise _usage("--output-limit and --context-limit go with --base-url and --model")
    try:
        output, context = provider.check_limits(args.output_limit, args.context_limit)
    except provider.BadModelOption as exc:
        raise _usage(str(exc)) from None
    task_name = (
        f"{args.tasks}-{args.level}"
        if args.tasks in ("arithmetic", "code")
        else args.tasks
        if generated
        else Path(args.tasks).stem
    )
    out = Path(args.out or f"eval-{task_name}-{seed}").expanduser()
    return EvalOptions(
        agents=agents,
        out=out,
        tasks=args.tasks if generated else str(Path(args.tasks).resolve()),
        level=args.level,
        count=count or 40,
        seed=seed or 0,
        limit=limit,
        protocols=protocols,
        concurrency=concurrency or 1,
        max_usd=_positive(args.max_usd, "--max-usd"),
        max_tokens=max_tokens,
        answer_line=args.answer_line,
        directory=str(Path(args.directory).resolve()) if args.directory else None,
        base_urls=base_urls,
        models=models,
        output_limit=output,
        context_limit=context,
        cleanup=args.cleanup,
        turn_timeout=turn_timeout_flag(args.turn_timeout),
        label=args.note,
        sc_seat=args.sc_seat,
    )


async def cmd_eval(args: argparse.Namespace, settings: cfg.Settings) -> int:
    opts = options_from(args)
    password = settings.server_password
    target = Target(
        control_url=control_url(settings),
        token_file=settings.token_file,
        server_url=settings.server_url,
        server_username=settings.server_username,
        server_password=password.get_secret_value() if password is not None else None,
    )
    return await run_eval(opts, target)
