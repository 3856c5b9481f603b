"""``roundtabled eval``: decision quality of a panel on the user's own models (docs/eval.md).

Every question becomes one roundtable through the daemon the user runs (its control API) and the
OpenCode server behind it, under one parent session per run:

1. an independent opening (``opening: "independent"``, one round): each seat's own first answer
   gives ``single:<seat>``, their majority gives ``vote``;
2. when ``debate`` or ``adaptive`` is asked for, an ``extend`` of that roundtable by two rounds,
   and for ``adaptive`` one more round while its panel has not converged: ``debate`` is read after
   the two rounds, ``adaptive`` at the round its convergence rule stops
   (:func:`roundtabled.core.scoring.converged_round`). Both continue from the same openings, so
   flips are measured from the same first answers and the opening is paid once.

Results are appended to ``results.jsonl`` per question (a re-run with the same ``--out`` resumes),
and ``report.md`` / ``report.json`` (and ``accuracy-vs-tokens.png`` with matplotlib) are written
at the end, also after Ctrl-C or a spend cap (then marked partial).

Each roundtable is one question's, driven by this run alone: its id is appended to
``roundtables.jsonl`` as soon as the daemon started it, before the run waits on it. A re-run
attaches to a started roundtable its question has no record of, and a running eval rides out a
daemon restart, so a question never runs twice at once; one that is gone is said, started again
once, and counted in the report (docs/eval.md, "Resuming").
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from roundtabled import __version__
from roundtabled.cli.client import EXIT_USAGE, CliError, ControlClient
from roundtabled.cli.follow import REATTACH_PAUSE_S, REATTACH_S
from roundtabled.core import scoring, wire
from roundtabled.core.scoring import Question
from roundtabled.core.state import CONCLUDED_SUFFIX, tokens_in_out
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.service import install, provider

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
CHARS_PER_TOKEN = 4
"""Used to estimate tokens from texts when the provider reports no usage (said in the report)."""
JOURNAL_FILE = "roundtables.jsonl"
"""``OUT/roundtables.jsonl``: a line per roundtable the run started (``{"id", "sessionID",
"parentSessionID", "started"}``), written before the run waits on it, and one per roundtable it
gave up (the same, with ``"abandoned": reason``)."""
GONE_END_REASONS = ("session-deleted", "parent-deleted")
"""End reasons of a roundtable whose debate can no longer be read (its session is gone)."""
GONE = (
    "is gone (roundtabled knows no roundtable by that id: its session was deleted, or the run "
    "moved to another server)"
)
"""Why a roundtable the daemon does not know is given up (follows "its roundtable SES")."""


@dataclass
class EvalOptions:
    """What one ``roundtabled eval`` run measures (the CLI flags, docs/eval.md)."""

    agents: list[str]
    out: Path
    tasks: str = "arithmetic"
    """``arithmetic`` or the path of a JSONL task file."""
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


class RunStopped(Exception):
    """A spend cap stopped the run before the next question (the message says which)."""


def load_questions(opts: EvalOptions) -> list[Question]:
    """The run's questions (``--limit`` applied).

    Raises:
        CliError: (exit 2) an unreadable or invalid task file, naming ``--tasks``.
    """
    if opts.tasks == "arithmetic":
        qs = scoring.arithmetic_questions(opts.level, opts.count, opts.seed)
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


# ── one question ──────────────────────────────────────────────────────────────────────────────


class RoundtableGone(Exception):
    """The roundtable ``ses`` of a question is gone, or ended without a debate that can be read;
    ``reason`` says which (a phrase that follows "its roundtable SES")."""

    def __init__(self, ses: str, parent: str, reason: str) -> None:
        super().__init__(f"roundtable {ses} {reason}")
        self.ses, self.parent, self.reason = ses, parent, reason


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

    def add(self, qid: str, ses: str, parent: str, abandoned: str | None = None) -> None:
        line: dict[str, Any] = {"id": qid, "sessionID": ses, "parentSessionID": parent}
        if abandoned is None:
            line["started"] = time.time()
        else:
            line["abandoned"] = abandoned
        self.lines.append(line)
        with self.path.open("a") as f:
            f.write(json.dumps(line) + "\n")


def _daemon_away(exc: CliError) -> bool:
    """``exc`` says the daemon is away for now (the connection broke, a call got no answer in
    time, or it is shutting down: :attr:`roundtabled.cli.client.CliError.away`): worth waiting
    for, unlike an answer that refuses."""
    return exc.away


async def _away(exc: CliError, qid: str, since: float | None) -> float:
    """Wait a moment for a daemon that is away (:func:`_daemon_away`) to come back; returns
    since when it is away. A restarted daemon resumes the roundtables from their sessions, so
    the question goes on with the same roundtable once it answers again.

    Raises:
        CliError: it was away longer than :data:`~roundtabled.cli.follow.REATTACH_S`.
    """
    now = time.monotonic()
    if since is None:
        print(
            f"eval: {qid}: lost roundtabled ({str(exc).removeprefix('Error: ')}); waiting up to "
            f"{REATTACH_S:g} s for it to come back",
            file=sys.stderr,
        )
        since = now
    elif now - since > REATTACH_S:
        raise CliError(
            f"Error: roundtabled did not come back within {REATTACH_S:g} s ({qid}); its "
            "roundtables go on when it is back, and the same command again attaches to them"
        ) from None
    await asyncio.sleep(REATTACH_PAUSE_S)
    return since


async def _call(
    cc: ControlClient,
    qid: str,
    path: str,
    *,
    params: dict[str, str] | None = None,
    timeout: float = 60,
) -> Any:
    """``GET path`` of the control API, again while the daemon is away (:func:`_away`): a read,
    so a repeat changes nothing."""
    since: float | None = None
    while True:
        try:
            return await cc.call("GET", path, params=params, timeout=timeout)
        except CliError as exc:
            if not _daemon_away(exc):
                raise
            since = await _away(exc, qid, since)


async def _status(cc: ControlClient, qid: str, ses: str) -> dict[str, Any] | None:
    """The status of roundtable ``ses`` (with its result once it is over), also of one the
    daemon holds in memory no more, or not yet (read from its session); ``None`` when the
    daemon knows no roundtable ``ses`` (its session is gone)."""
    try:
        return dict(await _call(cc, qid, f"/v1/roundtables/{ses}"))
    except CliError as exc:
        if exc.code == EXIT_USAGE:
            return None
        raise


async def wait_done(cc: ControlClient, ses: str, qid: str = "", parent: str = "") -> dict[str, Any]:
    """Long-poll the result of roundtable ``ses`` (of question ``qid`` under ``parent``) until
    it is done; returns the result answer. A daemon restart is ridden out: a restarted daemon
    answers for the roundtables it resumes once its start-up scan is done, and for one that
    concluded before from its session.

    Raises:
        RoundtableGone: ``ses`` is gone, or ended with its session deleted.
        CliError: the daemon stayed away, or does not resume ``ses`` in time.
    """
    unheld: float | None = None
    while True:
        try:
            res = await _call(
                cc, qid, f"/v1/roundtables/{ses}/result", params={"wait": "25"}, timeout=40
            )
        except CliError as exc:
            if exc.code != EXIT_USAGE:
                raise
            st = await _status(cc, qid, ses)
            if st is None:
                raise RoundtableGone(ses, parent, GONE) from None
            if st.get("phase") not in ("active", "observing"):
                res = {**st, "done": True}
            else:
                # Active in its session but not held: the daemon is (re)starting and resumes
                # it once its start-up scan is done.
                now = time.monotonic()
                unheld = unheld if unheld is not None else now
                if now - unheld > REATTACH_S:
                    raise CliError(
                        f"Error: roundtable {ses} ({qid}) is active in its session but "
                        f"roundtabled has not resumed it within {REATTACH_S:g} s; see "
                        f"`roundtabled status {ses}` and the daemon's log"
                    ) from None
                await asyncio.sleep(REATTACH_PAUSE_S)
                continue
        if res.get("done"):
            if res.get("endReason") in GONE_END_REASONS:
                raise RoundtableGone(ses, parent, f"ended without a result ({res['endReason']})")
            return dict(res)


async def _unrecorded(
    cc: ControlClient, oc: OpenCodeClient | None, parent: str, qid: str, known: set[str]
) -> str | None:
    """A roundtable of question ``qid`` under ``parent`` that is not in ``known`` (found by the
    title the run gives it), or ``None``: what a start whose answer was lost may have begun."""
    if oc is None:
        return None
    titles = {f"eval {qid}", f"eval {qid}{CONCLUDED_SUFFIX}"}
    try:
        children = await oc.children(parent)
    except Exception as exc:
        raise CliError(f"Error: cannot read the run's sessions under {parent}: {exc}") from None
    for child in children:
        ses = str(child.get("id"))
        if (
            child.get("title") in titles
            and ses not in known
            and await _status(cc, qid, ses) is not None
        ):
            return ses
    return None


async def _start(
    cc: ControlClient,
    oc: OpenCodeClient | None,
    qid: str,
    body: dict[str, Any],
    known: set[str],
) -> str:
    """Start the roundtable of question ``qid`` (``body``: the ``POST /v1/roundtables`` of a new
    one); returns its session id. Exactly once: when the answer is lost (the daemon went away
    mid-call) the roundtable may have begun, so once the daemon answers again the run's parent
    is searched for it (:func:`_unrecorded`, ``known``: the run's roundtables) before another
    start."""
    since: float | None = None
    while True:
        try:
            created = await cc.call("POST", "/v1/roundtables", body=body, timeout=120)
            return str(created["sessionID"])
        except CliError as exc:
            if not _daemon_away(exc):
                raise
            since = await _away(exc, qid, since)
            found = await _unrecorded(cc, oc, body["parentSessionID"], qid, known)
            if found is not None:
                return found


async def _extend(
    cc: ControlClient, qid: str, ses: str, parent: str, have: int, total: int
) -> None:
    """Extend roundtable ``ses`` from ``have`` to ``total`` rounds. Exactly once: when the
    answer is lost (the daemon went away mid-call) the roundtable's own ``totalRounds`` says
    whether the extension took, once the daemon answers again.

    Raises:
        RoundtableGone: ``ses`` is gone.
    """
    body = {
        "sessionID": ses,
        "prompt": CONTINUE_PROMPT,
        "rounds": total - have,
        "extendMode": "continuation",
    }
    since: float | None = None
    while True:
        try:
            await cc.call("POST", "/v1/roundtables", body=body, timeout=120)
            return
        except CliError as exc:
            if not _daemon_away(exc):
                raise
            since = await _away(exc, qid, since)
            st = await _status(cc, qid, ses)
            if st is None:
                raise RoundtableGone(ses, parent, GONE) from None
            if int(st.get("totalRounds") or 0) >= total:
                return


def seat_rounds(
    turns: Sequence[Mapping[str, Any]], agents: Sequence[str], q: Question
) -> tuple[list[scoring.SeatRounds], dict[str, list[dict[str, Any]]]]:
    """Each seat's canonical answer per round from the export's ``turns`` (seat turns only; in a
    round in which a seat has no turn, e.g. after the daemon stopped the debate early, its answer
    of the round before stands), and the raw reads for the record."""
    rounds = max((int(t["round"]) for t in turns if t.get("kind", "turn") == "turn"), default=0)
    out: list[scoring.SeatRounds] = []
    reads: dict[str, list[dict[str, Any]]] = {}
    for a in agents:
        answers: list[str | None] = []
        confs: list[float | None] = []
        reads[a] = []
        for r in range(1, rounds + 1):
            mine = [
                t
                for t in turns
                if t.get("kind", "turn") == "turn" and t.get("agent") == a and t["round"] == r
            ]
            text = str(mine[-1].get("response") or "") if mine else ""
            got = scoring.read_answer(text) if mine else scoring.ReadAnswer(None, "none")
            if mine or not answers:
                answers.append(scoring.answer_to(q, got.text))
                confs.append(got.confidence)
            else:  # no turn in this round (the debate stopped early): its last answer stands
                answers.append(answers[-1])
                confs.append(confs[-1])
            reads[a].append(
                {"round": r, "answer": got.text, "source": got.source, "turn": bool(mine)}
            )
        out.append(scoring.SeatRounds(a, tuple(answers), tuple(confs)))
    return out, reads


def _usage(turn: Mapping[str, Any]) -> tuple[int, float | None]:
    """Tokens (in + out, cached prompt tokens and reasoning included:
    :func:`roundtabled.core.state.tokens_in_out`) and cost of one exported turn; the cost ``None``
    when its model lists no price
    (the export's ``usage.cost`` ``null``, docs/result.md)."""
    u = turn.get("usage") or {}
    cost = u.get("cost", 0.0)
    return sum(tokens_in_out(u)), None if cost is None else float(cost)


def spend_upto(
    turns: Sequence[Mapping[str, Any]], last_round: int, agent: str | None, topic: str
) -> dict[str, Any]:
    """Calls, tokens and cost of the seat turns up to round ``last_round`` (1-based), of one
    ``agent`` or all; ``estimated``: the provider reported no usage on any of them, so the tokens
    are estimated from the texts (what each turn saw: the topic and every earlier reply; what it
    wrote) at :data:`CHARS_PER_TOKEN`, and the cost is unknown."""
    seat_turns = [t for t in turns if t.get("kind", "turn") == "turn"]
    mine = [
        t
        for t in seat_turns
        if int(t["round"]) <= last_round and (agent is None or t.get("agent") == agent)
    ]
    tokens = sum(_usage(t)[0] for t in mine)
    costs = [_usage(t)[1] for t in mine]
    cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
    if tokens > 0 or not mine:
        return {"calls": len(mine), "tokens": tokens, "cost": cost, "estimated": False}
    est = 0
    for t in mine:
        seen = sum(len(str(o.get("response") or "")) for o in seat_turns if o["round"] < t["round"])
        est += (len(topic) + seen + len(str(t.get("response") or ""))) // CHARS_PER_TOKEN
    return {"calls": len(mine), "tokens": est, "cost": None, "estimated": True}


def observer_spend(turns: Sequence[Mapping[str, Any]], topic: str) -> dict[str, Any]:
    """Calls and tokens of the observer turns in ``turns`` (the export's, ``round`` 1-based);
    ``estimated``: the provider reported no usage on any of them, so the tokens are estimated as
    :func:`spend_upto` does (what the observer saw: the topic and every seat reply up to its
    round; what it wrote) — a provider that reports nothing must not read as an observer that
    cost nothing."""
    mine = [t for t in turns if t.get("kind") == "observer"]
    tokens = sum(_usage(t)[0] for t in mine)
    if tokens > 0 or not mine:
        return {"calls": len(mine), "tokens": tokens, "estimated": False}
    seat_turns = [t for t in turns if t.get("kind", "turn") == "turn"]
    est = 0
    for t in mine:
        seen = sum(
            len(str(o.get("response") or "")) for o in seat_turns if o["round"] <= t["round"]
        )
        est += (len(topic) + seen + len(str(t.get("response") or ""))) // CHARS_PER_TOKEN
    return {"calls": len(mine), "tokens": est, "estimated": True}


async def self_consistency(
    oc: OpenCodeClient, opts: EvalOptions, q: Question, parent: str, directory: str | None
) -> dict[str, Any]:
    """The ``sc`` baseline: the seat :attr:`EvalOptions.sc_seat` asked the question alone as
    many times as ``debate`` makes seat calls (seats × 3), each in its own child session of the
    run's parent session, straight through the OpenCode server (one roundtable cannot seat an
    agent twice); the answer is their majority. Its temperature is the agent's own (set one above
    0 on it: at 0 the samples repeat)."""
    seat = opts.sc_seat or opts.agents[0]
    k = len(opts.agents) * (1 + DEBATE_ROUNDS)
    text = f"{topic_for(q, opts.answer_line)}\n\n{SC_CLOSING}"
    t0 = time.monotonic()

    async def sample(i: int) -> tuple[str, int, float, str | None]:
        s = await oc.create_session(
            directory=directory, parent_id=parent, title=f"eval {q.id} sc {i + 1}/{k}"
        )
        raw = await oc.prompt(
            str(s["id"]), {"agent": seat, "parts": [{"type": "text", "text": text}]}
        )
        return wire.prompt_reply(raw)

    replies = [await sample(i) for i in range(k)]
    answers = [scoring.read_answer(r[0]) for r in replies]
    vote = scoring.majority([(scoring.answer_to(q, a.text), a.confidence) for a in answers])
    gold = scoring.gold_canonical(q)
    tokens = sum(r[1] for r in replies)
    estimated = tokens == 0
    if estimated:
        tokens = sum((len(text) + len(r[0])) // CHARS_PER_TOKEN for r in replies)
    return {
        "answer": vote,
        "correct": vote is not None and vote == gold,
        "finalRound": None,
        "calls": k,
        "tokens": tokens,
        "cost": None if estimated else sum(r[2] for r in replies),
        "estimated": estimated,
        "seconds": time.monotonic() - t0,
        "seat": seat,
        "samples": [a.text for a in answers],
        "errors": [r[3] for r in replies if r[3]],
    }


async def run_question(
    cc: ControlClient,
    opts: EvalOptions,
    q: Question,
    parent: str,
    directory: str | None,
    oc: OpenCodeClient | None = None,
    journal: Journal | None = None,
) -> dict[str, Any]:
    """Run one question (the opening, then the extensions the protocols need) and return its
    record for ``results.jsonl``. With a ``journal``, a roundtable started for ``q`` before (and
    not given up) is attached to instead of starting one; a new one is recorded in it as soon as
    it is started.

    Raises:
        RoundtableGone: the question's roundtable is gone (the caller decides what follows).
    """
    topic = topic_for(q, opts.answer_line)
    t0 = time.monotonic()
    earlier = journal.started(q.id) if journal is not None else None
    if earlier is not None:
        ses = str(earlier["sessionID"])
        parent = str(earlier.get("parentSessionID") or parent)
        st = await _status(cc, q.id, ses)
        if st is None:
            raise RoundtableGone(ses, parent, GONE)
        if st.get("endReason") in GONE_END_REASONS:
            raise RoundtableGone(ses, parent, f"ended without a result ({st['endReason']})")
        print(
            f"eval: {q.id}: attaching to its roundtable {ses}, started before (phase "
            f"{st.get('phase')}, {st.get('totalRounds')} rounds)",
            file=sys.stderr,
        )
    else:
        body: dict[str, Any] = {
            "agents": opts.agents,
            "prompt": topic,
            "rounds": 1,
            "opening": "independent",
            "parentSessionID": parent,
            "title": f"eval {q.id}",
        }
        if directory:
            body["directory"] = directory
        if opts.turn_timeout:
            body["turnTimeout"] = opts.turn_timeout
        known = journal.sessions() if journal is not None else set()
        ses = await _start(cc, oc, q.id, body, known)
        # Recorded before the run waits on it: a re-run, or this run after a daemon restart,
        # goes on with this roundtable rather than starting the question again.
        if journal is not None:
            journal.add(q.id, ses, parent)
    phases: list[tuple[str, dict[str, Any], float]] = []
    wants_debate = "debate" in opts.protocols
    wants_adaptive = "adaptive" in opts.protocols

    async def phase(name: str, total: int, since: float | None = None) -> None:
        """Wait until the roundtable has run ``total`` rounds (extending it once if it has
        fewer): the rounds it holds are the truth of what was asked of it, also across a
        resume. A phase it ran past before this run attached is kept without an end reason."""
        t = time.monotonic() if since is None else since
        st = await _status(cc, q.id, ses)
        if st is None:
            raise RoundtableGone(ses, parent, GONE)
        have = int(st.get("totalRounds") or 0)
        if have > total:
            phases.append((name, {}, 0.0))
            return
        if have < total:
            await _extend(cc, q.id, ses, parent, have, total)
        phases.append((name, await wait_done(cc, ses, q.id, parent), time.monotonic() - t))

    async def export() -> dict[str, Any]:
        return dict(
            await _call(cc, q.id, f"/v1/roundtables/{ses}/export", params={"format": "json"})
        )

    await phase("opening", 1, t0)
    data = await export()
    if wants_debate or wants_adaptive:
        await phase("debate", 1 + DEBATE_ROUNDS)
        data = await export()
        if wants_adaptive:
            seats, _ = seat_rounds(data["turns"], opts.agents, q)
            stop = scoring.converged_round(seats, 2, DEBATE_ROUNDS)
            if stop == DEBATE_ROUNDS and not _converged_at(seats, DEBATE_ROUNDS):
                await phase("adaptive", 1 + ADAPTIVE_MAX)
                data = await export()
    turns = data["turns"]
    seats, reads = seat_rounds(turns, opts.agents, q)
    gold = scoring.gold_canonical(q)
    seconds = {name: s for name, _, s in phases}
    record: dict[str, Any] = {
        "id": q.id,
        "question": q.question,
        "gold": q.answer,
        "sessionID": ses,
        "parentSessionID": parent,
        "resumed": earlier is not None,
        "endReasons": [
            str((r.get("result") or {}).get("status", {}).get("endReason")) for _, r, _ in phases
        ],
        "seats": {
            s.agent: {
                "answers": list(s.answers),
                "correct": [a is not None and a == gold for a in s.answers],
                "reads": reads[s.agent],
            }
            for s in seats
        },
        "protocols": {},
        "models": data.get("models") or {},
    }
    protos: dict[str, Any] = record["protocols"]
    opening_s = seconds["opening"]
    if "single" in opts.protocols:
        for s in seats:
            spend = spend_upto(turns, 1, s.agent, topic)
            protos[f"single:{s.agent}"] = {
                "answer": s.answers[0],
                "correct": s.answers[0] is not None and s.answers[0] == gold,
                "finalRound": 0,
                **spend,
                "seconds": opening_s,
            }
    if "vote" in opts.protocols:
        v = scoring.vote_at(seats, 0)
        protos["vote"] = {
            "answer": v,
            "correct": v is not None and v == gold,
            "finalRound": 0,
            **spend_upto(turns, 1, None, topic),
            "seconds": opening_s,
        }
    if wants_debate:
        v = scoring.vote_at(seats, DEBATE_ROUNDS)
        protos["debate"] = {
            "answer": v,
            "correct": v is not None and v == gold,
            "finalRound": DEBATE_ROUNDS,
            **spend_upto(turns, 1 + DEBATE_ROUNDS, None, topic),
            "seconds": opening_s + seconds["debate"],
        }
    if wants_adaptive:
        last = ADAPTIVE_MAX if "adaptive" in seconds else DEBATE_ROUNDS
        stop = scoring.converged_round(seats, 2, last)
        v = scoring.vote_at(seats, stop)
        protos["adaptive"] = {
            "answer": v,
            "correct": v is not None and v == gold,
            "finalRound": stop,
            **spend_upto(turns, 1 + stop, None, topic),
            "seconds": opening_s
            + seconds["debate"]
            + (seconds.get("adaptive", 0.0) if stop > DEBATE_ROUNDS else 0.0),
        }
    if "sc" in opts.protocols and oc is not None:
        protos["sc"] = await self_consistency(oc, opts, q, parent, directory)
    observer = observer_spend(turns, topic)
    record["overhead"] = {
        "observerCalls": observer["calls"],
        "observerTokens": observer["tokens"],
        "observerTokensEstimated": observer["estimated"],
        "seconds": sum(seconds.values()),
    }
    return record


def _converged_at(seats: Sequence[scoring.SeatRounds], r: int) -> bool:
    return scoring.converged_round(seats, r, r + 1) == r


# ── the run ───────────────────────────────────────────────────────────────────────────────────


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


def estimate(
    opts: EvalOptions,
    questions: Sequence[Question],
    prices: dict[str, tuple[float, float]],
    models: Sequence[str],
) -> dict[str, Any]:
    """A rough pre-run estimate: seat calls, tokens (each call reads its prompt and every earlier
    reply, assumed 300 tokens each; about 600 tokens of prompt) and cost at the listed prices
    (``None`` when any seat's model lists no price)."""
    seats = len(opts.agents)
    rounds = 1 + (
        ADAPTIVE_MAX
        if "adaptive" in opts.protocols
        else DEBATE_ROUNDS
        if "debate" in opts.protocols
        else 0
    )
    per_q_tokens = 0
    for r in range(rounds):
        per_q_tokens += seats * (600 + 300 * seats * r + 300)
    observers = 1 + (1 if rounds > 1 else 0) + (1 if rounds > 1 + DEBATE_ROUNDS else 0)
    tokens = len(questions) * per_q_tokens
    known = [prices[m] for m in models if m in prices]
    cost = None
    if models and len(known) == len(models):
        mean_in = sum(p[0] for p in known) / len(known)
        mean_out = sum(p[1] for p in known) / len(known)
        cost = tokens * (0.8 * mean_in + 0.2 * mean_out) / 1e6
    return {
        "questions": len(questions),
        "seatCallsPerQuestion": seats * rounds,
        "observerCallsPerQuestion": observers,
        "tokens": tokens,
        "usd": cost,
    }


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
    oc = OpenCodeClient(
        target.server_url,
        username=target.server_username,
        password=target.server_password,
        timeout=120,
    )
    try:
        async with ControlClient(target.control_url, target.token_file) as cc:
            health = await _reach(cc, oc, target)
            opts.out.mkdir(parents=True, exist_ok=True)
            with _only_run(opts.out):
                return await _run(opts, target, questions, run, cc, oc, health, on_record)
    finally:
        await oc.close()


@contextlib.contextmanager
def _only_run(out: Path) -> Iterator[None]:
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


async def _reach(cc: ControlClient, oc: OpenCodeClient, target: Target) -> dict[str, Any]:
    """The server's health, once the daemon and the server both answered: before anything is
    written or printed, so that a run that cannot start says only why.

    Raises:
        CliError: (exit 1) the daemon's own error for an unreachable daemon (as every command
            says it), or the server's.
    """
    await cc.call("GET", "/v1/health")
    try:
        return dict(await oc.health())
    except Exception as exc:
        raise CliError(
            f"Error: cannot reach the OpenCode server at {target.server_url}: {exc}"
        ) from None


async def _run(
    opts: EvalOptions,
    target: Target,
    questions: Sequence[Question],
    run: dict[str, Any],
    cc: ControlClient,
    oc: OpenCodeClient,
    health: Mapping[str, Any],
    on_record: Callable[[dict[str, Any]], None] | None,
) -> int:
    """The run of :func:`run_eval` once the daemon and the server answered (``run``: the
    ``run.json`` of the run it resumes, or empty)."""
    run_file = opts.out / "run.json"
    results = opts.out / "results.jsonl"
    directory = opts.directory
    if opts.base_url and opts.model:
        project = opts.out / "project"
        project.mkdir(exist_ok=True)
        config = provider.with_local_model(
            {"$schema": "https://opencode.ai/config.json"},
            opts.base_url,
            opts.model,
            opts.agents,
            context=opts.context_limit,
            output=opts.output_limit,
        )
        (project / "opencode.json").write_text(json.dumps(config, indent=2) + "\n")
        # The built-in observer is an agent file of the project (README, "Install"); the tools
        # come with it and stay unused (the written seats may use no tool).
        try:
            install.install_tools(
                project / ".opencode", control_url=target.control_url, token_file=target.token_file
            )
        except install.InstallError as exc:
            raise CliError(f"Error: --base-url: cannot write the run's project ({exc})") from None
        directory = str(project.resolve())
        print(
            f"eval: wrote the provider configuration {project / 'opencode.json'} (seats "
            f"{', '.join(opts.agents)} on local/{opts.model} at {opts.base_url})",
            file=sys.stderr,
        )
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
                providers = await oc.providers(directory)
                agents = await oc.agents(directory)
                server_config = await oc.config(directory)
            except Exception as exc:
                raise CliError(
                    f"Error: cannot reach the OpenCode server at {target.server_url}: {exc}"
                ) from None
            # A seat without a model of its own runs on the server's default, as the daemon
            # seats it (engine.launch.seat_models): the report names the same models.
            models = wire.agent_models(agents)
            default_model = wire.model_ref(server_config.get("model"))
            seat_models = [
                m.label() for a in opts.agents if (m := models.get(a) or default_model) is not None
            ]
            recorded = run.get("parentSessionID")
            earlier = [str(p) for p in run.get("earlierParentSessionIDs") or ()]
            parent = recorded
            if parent and todo:
                try:
                    await oc.get_session(parent)
                except Exception:
                    parent = None
            if not parent:
                # The recorded parent is gone (another server, or deleted): the questions still
                # to run go under a new one, and the report keeps naming the old one for its
                # records.
                if recorded:
                    earlier.append(str(recorded))
                s1 = await oc.create_session(
                    directory=directory, title=f"roundtabled eval {opts.out.name}"
                )
                parent = str(s1["id"])
            run = {
                "options": opts.identity(),
                "parentSessionID": parent,
                "earlierParentSessionIDs": earlier,
                "directory": directory,
                "opencodeVersion": health.get("version"),
                "roundtabledVersion": __version__,
                "started": run.get("started") or started,
                "label": opts.label,
            }
            prices = wire.model_prices(providers)
            # The server records a cost of 0 for a model without a price: unknown, not free.
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
                f"estimate: {est['seatCallsPerQuestion']} seat calls + up to "
                f"{est['observerCallsPerQuestion']} observer calls per question, about "
                f"{est['tokens']:,} tokens, {usd}",
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
        print(
            "eval: interrupted; the report is partial. Run the same command again to resume.",
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
    oc: OpenCodeClient | None = None,
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
        "tokens": sum(_total_tokens(r) for r in done.values()),
        "usd": sum(_total_cost(r) or 0.0 for r in done.values()),
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
            if ran and any(_total_cost(r) is None for r in ran):
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
                if journal is None:
                    raise CliError(f"Error: {q.id}: {gone}") from None
                journal.add(q.id, gone.ses, gone.parent, abandoned=gone.reason)
                print(
                    f"eval: {q.id}: its roundtable {gone.ses} {gone.reason}; starting it again "
                    "(the report counts both)",
                    file=sys.stderr,
                )
                try:
                    rec = await run_question(cc, opts, q, parent, directory, oc, journal)
                except RoundtableGone as again:
                    journal.add(q.id, again.ses, again.parent, abandoned=again.reason)
                    raise CliError(
                        f"Error: {q.id}: its roundtable {again.ses} {again.reason}, the second "
                        "in this run; stopped (is something deleting the run's sessions?)"
                    ) from None
            if not cost_listed:
                rec = without_cost(rec)
            async with lock:
                with results.open("a") as f:
                    f.write(json.dumps(rec) + "\n")
                ran.append(rec)
                spent["tokens"] += _total_tokens(rec)
                spent["usd"] += _total_cost(rec) or 0.0
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


def _total_tokens(rec: Mapping[str, Any]) -> int:
    p = rec.get("protocols", {})
    biggest = max((int(v.get("tokens") or 0) for v in p.values()), default=0)
    return biggest + int((rec.get("overhead") or {}).get("observerTokens", 0))


def without_cost(rec: dict[str, Any]) -> dict[str, Any]:
    """``rec`` with every protocol's cost unknown (``None``): what a run whose seats' models list
    no price records (OpenCode writes a cost of 0 for such a model, which measures nothing)."""
    protocols = {k: {**v, "cost": None} for k, v in rec.get("protocols", {}).items()}
    return {**rec, "protocols": protocols}


def _total_cost(rec: Mapping[str, Any]) -> float | None:
    costs = [v.get("cost") for v in rec.get("protocols", {}).values()]
    if any(c is None for c in costs):
        return None
    return max((float(c) for c in costs if c is not None), default=0.0)


# ── the report ────────────────────────────────────────────────────────────────────────────────


def build_report(
    opts: EvalOptions,
    run: Mapping[str, Any],
    records: Sequence[dict[str, Any]],
    total: int,
    *,
    interrupted: bool = False,
    stopped: str | None = None,
    abandoned: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The JSON report (docs/eval.md): the run, the per-protocol summary and the questions.
    ``abandoned``: the roundtables the run gave up (:meth:`Journal.abandoned`), counted under
    their parents with the records' and listed."""
    names = protocol_names(opts)
    if run.get("costListed") is False:  # also the records of a run from before it was said
        records = [without_cost(r) for r in records]
    summary = scoring.summarise(records, names)
    estimated = any(v.get("estimated") for r in records for v in r["protocols"].values())
    models: dict[str, str] = {}
    for r in records:
        models.update(r.get("models") or {})
    return {
        "version": 1,
        "partial": interrupted or stopped is not None or len(records) < total,
        "interrupted": interrupted,
        "stopped": stopped,
        "questions": {"done": len(records), "planned": total},
        "task": {
            "tasks": opts.tasks,
            "level": opts.level if opts.tasks == "arithmetic" else None,
            "seed": opts.seed,
            "answerLine": opts.answer_line,
        },
        "seats": opts.agents,
        "models": models,
        "opencodeVersion": run.get("opencodeVersion"),
        "roundtabledVersion": run.get("roundtabledVersion", __version__),
        "parentSessionID": run.get("parentSessionID"),
        "parents": parent_counts(run, records, abandoned),
        "sessions": [r["sessionID"] for r in records],
        "abandoned": [
            {k: a.get(k) for k in ("id", "sessionID", "parentSessionID", "abandoned")}
            for a in abandoned
        ],
        "label": run.get("label"),
        "tokensEstimated": estimated,
        "answerReads": answer_reads(records),
        "bestSingle": summary["bestSingle"],
        "protocols": [_summary_json(s) for s in summary["protocols"]],
        "records": list(records),
    }


def parent_counts(
    run: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    abandoned: Sequence[Mapping[str, Any]] = (),
) -> dict[str, int]:
    """``{parent session id: roundtables of ``records`` and ``abandoned`` under it}``, the run's
    current parent first, then the earlier ones a resume could no longer reach (``run.json``
    ``earlierParentSessionIDs``). A record names its parent (``parentSessionID``); one written
    before records did is counted under the first parent of the run."""
    earlier = [str(p) for p in run.get("earlierParentSessionIDs") or ()]
    current = run.get("parentSessionID")
    order = [*earlier, *([str(current)] if current else [])]
    counts: dict[str, int] = {p: 0 for p in order}
    for r in [*records, *abandoned]:
        p = r.get("parentSessionID") or (order[0] if order else None)
        if p is not None:
            counts[str(p)] = counts.get(str(p), 0) + 1
    if current:
        counts = {str(current): counts.pop(str(current)), **counts}
    return counts


def answer_reads(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How the seats' turns were read, over every question: ``{source: turns}`` with the sources
    of :class:`roundtabled.core.scoring.ReadAnswer` (``placeholder``: the turn wrote the
    instruction's ``<…>`` back instead of an answer; also in records read before that source
    existed). Rounds in which a seat had no turn are not counted."""
    counts: dict[str, int] = {}
    for r in records:
        for seat in (r.get("seats") or {}).values():
            for read in seat.get("reads") or ():
                if read.get("turn"):
                    src = read["source"]
                    if scoring.is_placeholder(read.get("answer")):
                        src = "placeholder"
                    counts[src] = counts.get(src, 0) + 1
    return counts


_READ_WORDS = {
    "position": "a `Position:` label",
    "answer": "an `Answer:` line",
    "boxed": "a boxed answer",
    "placeholder": "the instruction's placeholder written back (no answer)",
    "none": "no answer line",
}


def _summary_json(s: scoring.ProtocolSummary) -> dict[str, Any]:
    d = asdict(s)
    d["wilson95"] = list(s.wilson95) if s.wilson95 else None
    return d


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def render_markdown(report: Mapping[str, Any]) -> str:
    """``report.md``: the set-up, the table, the paired tests and flips, what is estimated."""
    lines = ["# roundtabled eval", ""]
    if report["partial"]:
        why = (
            "interrupted (Ctrl-C)"
            if report["interrupted"]
            else report["stopped"] or "not every question ran"
        )
        lines += [
            f"**Partial report**: {report['questions']['done']} of "
            f"{report['questions']['planned']} questions ({why}). Run the same command again to "
            "resume.",
            "",
        ]
    t = report["task"]
    lines += [
        f"- task: {t['tasks']}"
        + (f" (level {t['level']})" if t["level"] else "")
        + f", seed {t['seed']}, answer line: {t['answerLine']}",
        f"- seats: {', '.join(report['seats'])}; models: "
        + (", ".join(f"{k}={v}" for k, v in report["models"].items()) or "unknown"),
        f"- OpenCode {report['opencodeVersion']}, roundtabled {report['roundtabledVersion']}",
        f"- questions: {report['questions']['done']} of {report['questions']['planned']}",
    ]
    parents = report.get("parents") or {}
    if not parents and report.get("parentSessionID"):
        parents = {report["parentSessionID"]: len(report["sessions"])}
    for i, (p, n) in enumerate(parents.items()):
        lines.append(
            f"- parent session: {p} ({n} roundtables under it; `--cleanup` deletes them)"
            if i == 0
            else f"- earlier parent session: {p} ({n} roundtables under it; not reachable when "
            "the run resumed, so `--cleanup` cannot delete them)"
        )
    for a in report.get("abandoned") or ():
        lines.append(
            f"- abandoned roundtable of {a['id']}: {a['sessionID']}, which {a['abandoned']}; "
            "the question ran again"
        )
    resumed = sum(1 for r in report["records"] if r.get("resumed"))
    if resumed:
        lines.append(
            f"- {resumed} question(s) went on with the roundtable an earlier run had started; "
            "their seconds count from the resume"
        )
    if report.get("label"):
        lines.append(f"- note: {report['label']}")
    lines += [
        "",
        "| protocol | accuracy | 95% Wilson | vs best single (Δ, b/c, p) | vs vote (Δ, b/c, p) | "
        "flips w→r / r→w | seat calls/q | tokens/q | USD/q | s/q |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def vs(p: Mapping[str, Any] | None) -> str:
        if not p or p["diff"] is None:
            return "–"
        return f"{100 * p['diff']:+.1f} pts, {p['only_a']}/{p['only_b']}, p={p['p']:.3f}"

    for s in report["protocols"]:
        w = s["wilson95"]
        fl = s["flips"]
        lines.append(
            f"| {s['name']} | {s['correct']}/{s['n']} = {_pct(s['accuracy'])} | "
            + (f"{_pct(w[0])}–{_pct(w[1])}" if w else "–")
            + f" | {vs(s['vs_best_single'])} | {vs(s['vs_vote'])} | "
            + (f"{fl['wrong_to_right']} / {fl['right_to_wrong']}" if fl else "–")
            + f" | {_num(s['calls_per_question'])} | {_num(s['tokens_per_question'], 0)} | "
            + (f"{s['cost_per_question']:.5f}" if s["cost_per_question"] is not None else "unknown")
            + f" | {_num(s['seconds_per_question'])} |"
        )
    lines += [
        "",
        f"Best single seat: {report['bestSingle'] or '–'}. b/c: questions right only under the "
        "protocol / only under the other; p: exact McNemar (two-sided). Flips: each seat's "
        "opening answer against its answer in the protocol's final round (no answer counts as "
        "wrong). Tokens and calls count the seat turns the protocol needs; the observer's "
        "consolidation after each call is overhead, listed per question in report.json.",
    ]
    reads = report.get("answerReads") or {}
    if reads:
        lines += [
            "",
            "The seats' turns were read as: "
            + "; ".join(
                f"{_READ_WORDS.get(k, k)} {v}"
                for k, v in sorted(reads.items(), key=lambda kv: (-kv[1], kv[0]))
            )
            + ".",
        ]
    if report["tokensEstimated"]:
        lines += [
            "",
            "**Tokens are estimated**: the provider reported no usage (0 tokens on every turn), "
            "so tokens are counted from the texts each turn saw and wrote at 4 characters a "
            "token, and the cost is unknown.",
        ]
    if not report.get("plot"):
        lines += [
            "",
            "The plot of accuracy against tokens per question needs matplotlib: `pip install "
            "'roundtabled[plot]'`, then run the same command again (it resumes and only redraws).",
        ]
    else:
        lines += ["", "![accuracy vs tokens per question](accuracy-vs-tokens.png)"]
    return "\n".join(lines) + "\n"


def _num(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def write_reports(out: Path, report: dict[str, Any]) -> None:
    """Write ``report.json``, ``report.md`` and, with matplotlib installed, the plot."""
    report["plot"] = _plot(out / "accuracy-vs-tokens.png", report)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(render_markdown(report))


def _plot(path: Path, report: Mapping[str, Any]) -> str | None:
    try:
        os.environ.setdefault("MPLBACKEND", "Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    pts = [
        (s["tokens_per_question"], s["accuracy"], s["name"])
        for s in report["protocols"]
        if s["tokens_per_question"] is not None and s["accuracy"] is not None
    ]
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    span = max(x for x, _, _ in pts) - min(x for x, _, _ in pts) or 1.0
    placed: list[tuple[float, float]] = []
    for x, y, name in pts:
        ax.scatter([x], [100 * y])
        # Protocols at (nearly) the same point (seats of one model) get their labels stacked,
        # not printed over each other.
        near = sum(1 for px, py in placed if abs(px - x) < 0.08 * span and abs(py - y) < 0.03)
        placed.append((x, y))
        ax.annotate(
            name, (x, 100 * y), textcoords="offset points", xytext=(4, 4 - 10 * near), fontsize=8
        )
    ax.set_xlabel("tokens per question" + (" (estimated)" if report["tokensEstimated"] else ""))
    ax.set_ylabel("accuracy (%)")
    ax.set_title("roundtabled eval")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name
