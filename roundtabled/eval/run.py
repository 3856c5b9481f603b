"""The run: reach the daemon and the server, set up (or resume) the run directory, drive the
questions under the spend caps, and write the reports at the end, also after Ctrl-C or a failure
(docs/eval.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from roundtabled import __version__
from roundtabled.cli.client import CliError, ControlClient
from roundtabled.core.scoring import Question
from roundtabled.eval import code
from roundtabled.eval.ledger import JOURNAL_FILE, Journal, RoundtableGone, only_run, read_records
from roundtabled.eval.options import (
    EvalOptions,
    Target,
    load_questions,
    local_seats,
    project_config,
    runs_of,
)
from roundtabled.eval.question import run_question
from roundtabled.eval.report import build_report, write_reports
from roundtabled.eval.server import EvalServer, open_server
from roundtabled.eval.spending import estimate, total_cost, total_tokens, without_cost
from roundtabled.service import install, provider


class Progress:
    """A one-line progress bar with an ETA on standard error (``\\r``-updated on a terminal, one
    line per question otherwise)."""

    def __init__(self, total: int, done: int) -> None:
        self.total, self.done, self.start_done = total, done, done
        self.t0 = time.monotonic()
        self.tty = sys.stderr.isatty()

    def tick(self, note: str = "") -> None:
        self.done += 1
        ran = self.done - self.start_done
        rate = (time.monotonic() - self.t0) / ran if ran else 0.0
        eta = rate * (self.total - self.done)
        width = 24
        fill = int(width * self.done / self.total) if self.total else width
        line = (
            f"[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} questions, "
            f"ETA {_duration(eta)} {note}"
        )
        print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", file=sys.stderr)
        sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            print(file=sys.stderr)


def _duration(s: float) -> str:
    s = int(s)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


async def run_eval(
    opts: EvalOptions, target: Target, on_record: Callable[[dict[str, Any]], None] | None = None
) -> int:
    """Run (or resume) the evaluation and write its reports; returns the exit code (0, or 130
    after Ctrl-C with a partial report).

    ``on_record`` is called with each question's record once it is appended.

    Raises:
        CliError: bad options (exit 2); the daemon or the server unreachable at the start
            (exit 1; nothing is written or printed before, so the error is the only line); a
            failure during the run (its code; the message's second line names the partial
            report when questions are recorded).
    """
    questions = load_questions(opts)
    run: dict[str, Any] = {}
    run_file = opts.out / "run.json"
    if run_file.exists():
        run = json.loads(run_file.read_text())
        if run.get("options") != opts.identity():
            raise CliError(
                f"Error: --out {opts.out} holds a run with other options "
                f"({json.dumps(run.get('options'))}); give another --out to start a new run",
                2,
            )
    # The server's major decides the client (1.x or 2.x): eval runs on both (docs/eval.md).
    oc = await open_server(
        target.server_url,
        username=target.server_username,
        password=target.server_password,
        timeout=120,
    )
    try:
        async with ControlClient(target.control_url, target.token_file) as cc:
            version = await _reach(cc, oc, target)
            await _probe_models(opts, target)
            opts.out.mkdir(parents=True, exist_ok=True)
            with only_run(opts.out):
                return await _run(opts, target, questions, run, cc, oc, version, on_record)
    finally:
        await oc.close()


async def _reach(cc: ControlClient, oc: EvalServer, target: Target) -> str | None:
    """The server's version (``None``: it did not say), once the daemon and the server both
    answered: before anything is written or printed, so that a run that cannot start says only
    why.

    Raises:
        CliError: (exit 1) the daemon's own error for an unreachable daemon (as every command
            says it), or the server's.
    """
    await cc.call("GET", "/v1/health")
    try:
        return await oc.version()
    except Exception as exc:
        raise CliError(
            f"Error: cannot reach the OpenCode server at {target.server_url}: {exc}"
        ) from None


async def _probe_models(opts: EvalOptions, target: Target) -> None:
    """Ask every model server of ``--base-url`` for its models (:func:`provider.probe`) before
    anything is written, so a mistyped URL or a model server not started is one line, not every
    seat turn of a long run failing. A server that answers but does not list its model is said
    on stderr and the run goes on (llama.cpp's answers any name).

    Raises:
        CliError: (exit 1) nothing answers at a URL while the OpenCode server is on this machine
            (a loopback URL: it reaches the model servers as this process does). With the
            OpenCode server elsewhere the URL may be one only it reaches: said, not refused.
    """
    seen: set[tuple[str, str]] = set()
    for m in provider.local_models(opts.base_urls, opts.models) if opts.models else ():
        if (m.base_url, m.name) in seen:
            continue
        seen.add((m.base_url, m.name))
        try:
            note = await provider.probe(m.base_url, m.name)
        except provider.BadModelOption as exc:
            if provider.is_loopback_url(target.server_url):
                raise CliError(f"Error: {exc}") from None
            note = f"{exc} (from here; the OpenCode server at {target.server_url} may reach it)"
        if note:
            print(f"eval: {note}", file=sys.stderr)


async def _run(
    opts: EvalOptions,
    target: Target,
    questions: Sequence[Question],
    run: dict[str, Any],
    cc: ControlClient,
    oc: EvalServer,
    version: str | None,
    on_record: Callable[[dict[str, Any]], None] | None,
) -> int:
    """The run of :func:`run_eval` once the daemon and the server answered (``run``: the
    ``run.json`` of the run it resumes, or empty)."""
    run_file = opts.out / "run.json"
    results = opts.out / "results.jsonl"
    directory = opts.directory
    if opts.models:
        project = opts.out / "project"
        project.mkdir(exist_ok=True)
        config = project_config(opts)
        written = local_seats(opts)
        (project / "opencode.json").write_text(json.dumps(config, indent=2) + "\n")
        # The built-in observer is an agent file of the project (README, "Install"); the tools
        # come with it and stay unused (the written seats may use no tool).
        try:
            install.install_tools(
                project / ".opencode",
                control_url=target.control_url,
                token_file=target.token_file,
                major=oc.major,
            )
        except install.InstallError as exc:
            raise CliError(f"Error: --base-url: cannot write the run's project ({exc})") from None
        directory = str(project.resolve())
        print(
            f"eval: wrote the provider configuration {project / 'opencode.json'} (seats "
            f"{provider.seats_line({a: written[a] for a in opts.agents})})",
            file=sys.stderr,
        )
    if opts.tasks == "code":
        # The generated set, with the answers its one run recorded: the same questions for a
        # `--tasks FILE` run elsewhere.
        code.write_questions(opts.out / code.QUESTIONS_FILE, questions)
    done = {r["id"]: r for r in read_records(results)}
    todo = [q for q in questions if q.id not in done]
    journal = Journal(opts.out / JOURNAL_FILE)
    started = time.time()
    interrupted = False
    stopped: str | None = None
    failed: CliError | None = None
    try:
        try:
            try:
                # A seat without a model of its own runs on the server's default, as the daemon
                # seats it: the report names the same models.
                seats = await oc.seat_models(opts.agents, directory)
            except Exception as exc:
                raise CliError(
                    f"Error: cannot reach the OpenCode server at {target.server_url}: {exc}"
                ) from None
            seat_models = seats.labels
            recorded = run.get("parentSessionID")
            earlier = [str(p) for p in run.get("earlierParentSessionIDs") or ()]
            parent = recorded
            if parent and todo:
                try:
                    await oc.session_exists(parent)
                except Exception:
                    parent = None
            if not parent:
                # The recorded parent is gone (another server, or deleted): the questions still
                # to run go under a new one, and the report keeps naming the old one for its
                # records.
                if recorded:
                    earlier.append(str(recorded))
                parent = await oc.create_parent(directory, f"roundtabled eval {opts.out.name}")
            run = {
                "options": opts.identity(),
                "parentSessionID": parent,
                "earlierParentSessionIDs": earlier,
                "directory": directory,
                "opencodeVersion": version,
                "roundtabledVersion": __version__,
                "started": run.get("started") or started,
                "label": opts.label,
            }
            prices = seats.prices
            # The server records a cost of 0 for a model without a price (2.x lists no price at
            # all): unknown, not free.
            run["costListed"] = bool(seat_models) and all(m in prices for m in seat_models)
            run_file.write_text(json.dumps(run, indent=2) + "\n")
            est = estimate(opts, todo, prices, seat_models)
            usd = (
                f"about ${est['usd']:.4f}"
                if est["usd"] is not None
                else "cost unknown (the server lists no price for the seats' models)"
            )
            print(
                f"eval: {len(todo)} of {len(questions)} questions to run ({len(done)} done), "
                f"seats {', '.join(opts.agents)} ({', '.join(seat_models) or 'models unknown'}); "
                f"per question {est['roundtablesPerQuestion']} roundtables "
                f"({', '.join(runs_of(opts))}), one after another; estimate: up to "
                f"{est['seatCallsPerQuestion']} seat calls + {est['observerCallsPerQuestion']} "
                f"observer calls per question, about {est['tokens']:,} tokens, {usd}",
                file=sys.stderr,
            )
            print(f"eval: parent session {parent}; results append to {results}", file=sys.stderr)
            stopped = await _run_all(
                cc,
                opts,
                todo,
                parent,
                directory,
                results,
                done,
                len(questions),
                on_record,
                oc,
                cost_listed=run["costListed"],
                journal=journal,
            )
        except CliError as exc:
            failed = exc
    except (KeyboardInterrupt, asyncio.CancelledError):
        interrupted = True
    finally:
        records = [done[q.id] for q in questions if q.id in done] + [
            r for r in read_records(results) if r["id"] not in done
        ]
        records = _dedupe(records, questions)
        if records or failed is None:
            report = build_report(
                opts,
                run,
                records,
                len(questions),
                interrupted=interrupted,
                stopped=stopped,
                abandoned=journal.abandoned(),
                unrecorded=journal.unrecorded(records),
            )
            write_reports(opts.out, report)
        # After an interrupt or a failure the run's sessions stay: a resume attaches to them.
        if opts.cleanup and run.get("parentSessionID") and not interrupted and failed is None:
            with contextlib.suppress(Exception):
                await oc.delete_session(run["parentSessionID"])
                print(
                    f"eval: deleted the run's sessions (parent {run['parentSessionID']})",
                    file=sys.stderr,
                )
    if failed is not None:
        # The error comes first; the report, when any question is recorded, after it.
        if records:
            raise CliError(
                f"{failed}\neval: the report of the {len(records)} questions recorded is "
                f"partial: {opts.out / 'report.md'}. Run the same command again to resume.",
                failed.code,
            )
        raise failed
    print(f"eval: report {opts.out / 'report.md'}", file=sys.stderr)
    if interrupted:
        running = [str(line["sessionID"]) for line in journal.unrecorded(records)]
        still = (
            f" Roundtables of questions not recorded yet: {', '.join(running)}; one still "
            "running keeps running in the daemon (the same command attaches to it, "
            "`roundtabled cancel SESSION` stops it)."
            if running
            else ""
        )
        print(
            "eval: interrupted; the report is partial. Run the same command again to resume."
            + still,
            file=sys.stderr,
        )
        return 130
    return 0


def _dedupe(
    records: Sequence[dict[str, Any]], questions: Sequence[Question]
) -> list[dict[str, Any]]:
    by_id = {r["id"]: r for r in records}
    return [by_id[q.id] for q in questions if q.id in by_id]


async def _run_all(
    cc: ControlClient,
    opts: EvalOptions,
    todo: Sequence[Question],
    parent: str,
    directory: str | None,
    results: Path,
    done: dict[str, dict[str, Any]],
    total: int,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    oc: EvalServer | None = None,
    *,
    cost_listed: bool = True,
    journal: Journal | None = None,
) -> str | None:
    """Run ``todo`` with at most ``opts.concurrency`` questions at once; returns why a spend cap
    stopped the run (``None`` when every question ran). ``cost_listed`` False: a seat's model
    lists no price, so every record's cost is unknown (:func:`without_cost`). ``journal``: the
    run's roundtables (:func:`run_question`); a question whose roundtable is gone is said, the
    roundtable given up in it, and the question started once more.

    Raises:
        CliError: a question's roundtable was gone a second time in this run.
    """
    progress = Progress(total, len(done))
    sem = asyncio.Semaphore(max(1, opts.concurrency))
    spent = {
        "tokens": sum(total_tokens(r) for r in done.values()),
        "usd": sum(total_cost(r) or 0.0 for r in done.values()),
    }
    ran = list(done.values())
    stop: list[str] = []
    lock = asyncio.Lock()

    def cap_reached() -> str | None:
        per_q_tokens = spent["tokens"] / len(ran) if ran else 0.0
        per_q_usd = spent["usd"] / len(ran) if ran else 0.0
        if opts.max_tokens is not None and spent["tokens"] + per_q_tokens > opts.max_tokens:
            return (
                f"--max-tokens {opts.max_tokens}: {spent['tokens']:,} tokens spent, the next "
                "question would pass it"
            )
        if opts.max_usd is not None:
            if ran and any(total_cost(r) is None for r in ran):
                return (
                    "--max-usd: the provider reports no cost, so the cap cannot be kept; stopped "
                    "after the first question"
                )
            if spent["usd"] + per_q_usd > opts.max_usd:
                return (
                    f"--max-usd {opts.max_usd}: ${spent['usd']:.4f} spent, the next question "
                    "would pass it"
                )
        return None

    async def one(q: Question) -> None:
        async with sem:
            async with lock:
                if stop:
                    return
                why = cap_reached()
                if why:
                    stop.append(why)
                    return
            try:
                rec = await run_question(cc, opts, q, parent, directory, oc, journal)
            except RoundtableGone as gone:
                key = gone.key or q.id
                if journal is None:
                    raise CliError(f"Error: {key}: {gone}") from None
                journal.add(key, gone.ses, gone.parent, abandoned=gone.reason)
                print(
                    f"eval: {key}: its roundtable {gone.ses} {gone.reason}; starting it again "
                    "(the report counts both)",
                    file=sys.stderr,
                )
                try:
                    rec = await run_question(cc, opts, q, parent, directory, oc, journal)
                except RoundtableGone as again:
                    key = again.key or q.id
                    journal.add(key, again.ses, again.parent, abandoned=again.reason)
                    raise CliError(
                        f"Error: {key}: its roundtable {again.ses} {again.reason}, the second "
                        "in this run; stopped (is something deleting the run's sessions?)"
                    ) from None
            if not cost_listed:
                rec = without_cost(rec)
            async with lock:
                with results.open("a") as f:
                    f.write(json.dumps(rec) + "\n")
                ran.append(rec)
                spent["tokens"] += total_tokens(rec)
                spent["usd"] += total_cost(rec) or 0.0
                progress.tick(f"(last: {q.id})")
            if on_record is not None:
                on_record(rec)

    try:
        await asyncio.gather(*(one(q) for q in todo))
    finally:
        progress.close()
    if stop:
        print(f"eval: stopped: {stop[0]}", file=sys.stderr)
    return stop[0] if stop else None
