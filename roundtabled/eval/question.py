"""One question through the daemon: its roundtable started (or attached to), extended for the
protocols that continue it, read back, and scored into its record (docs/eval.md, "Protocols");
the ``sc`` baseline straight through the OpenCode server."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from roundtabled.cli.client import EXIT_USAGE, CliError, ControlClient
from roundtabled.cli.follow import REATTACH_PAUSE_S, REATTACH_S
from roundtabled.core import scoring, wire
from roundtabled.core.scoring import Question
from roundtabled.core.state import CONCLUDED_SUFFIX
from roundtabled.eval.ledger import GONE, GONE_END_REASONS, Journal, RoundtableGone
from roundtabled.eval.options import (
    ADAPTIVE_MAX,
    CONTINUE_PROMPT,
    DEBATE_ROUNDS,
    SC_CLOSING,
    EvalOptions,
    topic_for,
)
from roundtabled.eval.spending import CHARS_PER_TOKEN, observer_spend, spend_upto
from roundtabled.opencode.client import OpenCodeClient


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
