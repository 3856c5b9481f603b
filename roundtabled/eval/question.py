"""One question through the daemon: one roundtable per protocol, each started (or attached to)
with the product's ``protocol`` and read back from the product's own result (docs/eval.md, "What
runs per question"), then scored into the question's record."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from roundtabled.cli.client import EXIT_USAGE, CliError, ControlClient
from roundtabled.cli.follow import REATTACH_PAUSE_S, REATTACH_S
from roundtabled.core import scoring
from roundtabled.core.scoring import Question
from roundtabled.core.state import END_SUFFIXES
from roundtabled.eval.ledger import GONE, GONE_END_REASONS, Journal, RoundtableGone
from roundtabled.eval.options import (
    DEBATE_ROUNDS,
    SELF_CONSISTENCY,
    EvalOptions,
    runs_of,
    sample_agents,
    singles_from,
    topic_for,
)
from roundtabled.eval.server import EvalServer
from roundtabled.eval.spending import roundtable_spend, spend_upto


def _said(line: str) -> None:
    """``line`` on standard error, over the progress bar on a terminal (it is drawn again at the
    next question)."""
    print(("\r\x1b[K" if sys.stderr.isatty() else "") + line, file=sys.stderr, flush=True)


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
    cc: ControlClient,
    oc: EvalServer | None,
    parent: str,
    qid: str,
    known: set[str],
    title: str,
) -> str | None:
    """A roundtable of question ``qid`` under ``parent`` that is not in ``known`` (found by its
    ``title``, the one the run gives it), or ``None``: what a start whose answer was lost may
    have begun."""
    if oc is None:
        return None
    titles = {title, *(f"{title}{s}" for s in END_SUFFIXES)}
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
    oc: EvalServer | None,
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
            found = await _unrecorded(
                cc, oc, body["parentSessionID"], qid, known, str(body["title"])
            )
            if found is not None:
                return found


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


def start_body(
    opts: EvalOptions, q: Question, run: str, parent: str, directory: str | None
) -> dict[str, Any]:
    """The ``POST /v1/roundtables`` of question ``q``'s roundtable for ``run`` (a protocol of
    :func:`~roundtabled.eval.options.runs_of`), as a user would start it (docs/control-api.md):

    - ``vote``, ``adaptive``, ``council``: ``protocol`` set, the product's own rules after that
      (``adaptive`` may take up to :data:`DEBATE_ROUNDS` rounds, the opening included);
    - ``debate``: the default protocol, :data:`DEBATE_ROUNDS` rounds after an independent opening
      (``opening: "independent"``: its first answers are taken alone, as a vote's are);
    - ``self-consistency``: the product's ``vote`` of the sampled seat under the names of
      :func:`~roundtabled.eval.options.sample_agents` (copies of the seat the run wrote);
    - ``single`` (only ``single`` asked of the independent answers): one independent round.
    """
    body: dict[str, Any] = {
        "agents": sample_agents(opts) if run == SELF_CONSISTENCY else list(opts.agents),
        "prompt": topic_for(q, opts.answer_line),
        "parentSessionID": parent,
        "title": f"eval {q.id} {run}",
    }
    if run == "debate":
        body.update(rounds=DEBATE_ROUNDS, opening="independent")
    elif run == "single":
        body.update(rounds=1, opening="independent")
    else:
        body["protocol"] = "vote" if run == SELF_CONSISTENCY else run
        if run == "adaptive":
            body["rounds"] = DEBATE_ROUNDS
    if directory:
        body["directory"] = directory
    if opts.turn_timeout:
        body["turnTimeout"] = opts.turn_timeout
    return body


def tally_leader(tally: Sequence[Mapping[str, Any]]) -> str | None:
    """The leading stance of a result's ``verdict.tally`` (docs/result.md): the one with the
    most weight (the seats' summed confidences, compared to 6 decimals so that float sums of
    equal tenths tie), as ``vote``'s count leads; ``None`` when no seat stated a stance or the
    lead is tied (the product decided nothing)."""
    if not tally:
        return None
    weights = [round(float(i.get("weight") or 0.0), 6) for i in tally]
    top = max(weights)
    leaders = [i for i, w in zip(tally, weights, strict=True) if w == top]
    return str(leaders[0]["label"]) if len(leaders) == 1 else None


def product_answer(run: str, verdict: Mapping[str, Any]) -> tuple[str | None, str]:
    """What the product decided in a roundtable of ``run``, read from its result's ``verdict``,
    and where it was read (docs/eval.md, "What runs per question"):

    - ``vote`` and ``self-consistency`` (a vote of one seat's copies): the leader of its count
      (``verdict.protocol.count.leader``; ``null`` on a tie);
    - ``adaptive``: that count's leader when its rule stopped at the opening
      (``verdict.protocol.adaptive.stopped``), else the final tally's leader;
    - ``council``: the chair's decision (``verdict.decision``; the observer chairs);
    - ``debate``: the leader of the final tally (:func:`tally_leader`).
    """
    proto = verdict.get("protocol") or {}
    count = proto.get("count") or None
    tally = verdict.get("tally") or []
    if run == "council":
        decision = verdict.get("decision")
        return (str(decision) if decision is not None else None), "decision"
    if run in ("vote", SELF_CONSISTENCY) and count is not None:
        return count.get("leader"), "count"
    if run == "adaptive" and (proto.get("adaptive") or {}).get("stopped") and count is not None:
        return count.get("leader"), "count"
    return tally_leader(tally), "tally"


def _flips(seats: Sequence[scoring.SeatRounds], gold: str | None) -> list[int] | None:
    """``[wrong→right, right→wrong]`` between each seat's first and last answer of a roundtable
    that ran more than one round; ``None`` for one round (nothing deliberated)."""
    if not seats or max(len(s.answers) for s in seats) < 2:
        return None
    out = [0, 0]
    for s in seats:
        first = s.answers[0] is not None and s.answers[0] == gold
        last = s.answers[-1] is not None and s.answers[-1] == gold
        out[0] += (not first) and last
        out[1] += first and not last
    return out


async def _roundtable(
    cc: ControlClient,
    oc: EvalServer | None,
    opts: EvalOptions,
    q: Question,
    run: str,
    parent: str,
    directory: str | None,
    journal: Journal | None,
) -> tuple[str, str, bool, dict[str, Any], float]:
    """Run (or attach to) the roundtable of ``q`` for ``run`` until it is done; returns its
    session, its parent, whether it was attached to, its JSON export and the seconds waited.
    Its journal key is ``"<question id>/<run>"``: a roundtable started before (and not given
    up) is attached to; a new one is recorded as soon as it is started.

    Raises:
        RoundtableGone: the roundtable is gone (the caller decides what follows).
    """
    key = f"{q.id}/{run}"
    t0 = time.monotonic()
    earlier = journal.started(key) if journal is not None else None
    if earlier is not None:
        ses = str(earlier["sessionID"])
        parent = str(earlier.get("parentSessionID") or parent)
        st = await _status(cc, key, ses)
        if st is None:
            raise RoundtableGone(ses, parent, GONE, key)
        if st.get("endReason") in GONE_END_REASONS:
            raise RoundtableGone(ses, parent, f"ended without a result ({st['endReason']})", key)
        print(
            f"eval: {key}: attaching to its roundtable {ses}, started before (phase "
            f"{st.get('phase')})",
            file=sys.stderr,
        )
    else:
        body = start_body(opts, q, run, parent, directory)
        known = journal.sessions() if journal is not None else set()
        ses = await _start(cc, oc, key, body, known)
        # Recorded before the run waits on it: a re-run, or this run after a daemon restart,
        # goes on with this roundtable rather than starting it again.
        if journal is not None:
            journal.add(key, ses, parent)
    try:
        await wait_done(cc, ses, key, parent)
    except RoundtableGone as gone:
        raise RoundtableGone(gone.ses, gone.parent, gone.reason, key) from None
    data = dict(await _call(cc, key, f"/v1/roundtables/{ses}/export", params={"format": "json"}))
    return ses, parent, earlier is not None, data, time.monotonic() - t0


async def run_question(
    cc: ControlClient,
    opts: EvalOptions,
    q: Question,
    parent: str,
    directory: str | None,
    oc: EvalServer | None = None,
    journal: Journal | None = None,
) -> dict[str, Any]:
    """Run one question — a roundtable per protocol (:func:`~roundtabled.eval.options.runs_of`),
    one after another, so that each one's wall time is its own — and return its record for
    ``results.jsonl`` (docs/eval.md, "results.jsonl").

    Raises:
        RoundtableGone: one of its roundtables is gone (the caller decides what follows; the
            exception's ``key`` names which).
    """
    topic = topic_for(q, opts.answer_line)
    gold = scoring.gold_canonical(q)
    record: dict[str, Any] = {
        "id": q.id,
        "question": q.question,
        "gold": q.answer,
        "parentSessionID": parent,
        "resumed": False,
        "runs": {},
        "protocols": {},
        "models": {},
    }
    runs: dict[str, Any] = record["runs"]
    protos: dict[str, Any] = record["protocols"]
    for run in runs_of(opts):
        ses, run_parent, resumed, data, seconds = await _roundtable(
            cc, oc, opts, q, run, parent, directory, journal
        )
        record["resumed"] = record["resumed"] or resumed
        record["parentSessionID"] = run_parent
        turns = data.get("turns") or []
        agents = sample_agents(opts) if run == SELF_CONSISTENCY else opts.agents
        status = data.get("status") or {}
        verdict = data.get("verdict") or {}
        label, source = product_answer(run, verdict)
        # A line per roundtable: on a slow model a question takes minutes, its progress line
        # comes only at its end.
        _said(
            f"eval: {q.id}/{run}: {status.get('endReason')}, "
            + ("no decision" if label is None else f"decided {label!r}")
            + f" ({seconds:.0f} s)"
        )
        seats, reads = seat_rounds(turns, agents, q)
        spend = roundtable_spend(turns, topic, agents)
        runs[run] = {
            **spend,
            "seconds": seconds,
            "sessionID": ses,
            "parentSessionID": run_parent,
            "resumed": resumed,
            "endReason": status.get("endReason"),
            "degraded": status.get("degraded"),
            "rounds": status.get("roundsCompleted"),
            "notes": list(status.get("notes") or ()),
            "protocol": (verdict.get("protocol") or {}).get("name"),
            "reads": reads,
        }
        for agent, model in (data.get("models") or {}).items():
            record["models"][agent] = model
        if run in opts.protocols:
            answer = scoring.answer_to(q, label)
            protos[run] = {
                "answer": answer,
                "label": label,
                "readFrom": source,
                "correct": answer is not None and answer == gold,
                "flips": _flips(seats, gold),
                **spend,
                "seconds": seconds,
                "sessionID": ses,
                "endReason": status.get("endReason"),
                "degraded": status.get("degraded"),
            }
        if "single" in opts.protocols and run == singles_from(opts):
            for s in seats:
                first = s.answers[0] if s.answers else None
                protos[f"single:{s.agent}"] = {
                    "answer": first,
                    "correct": first is not None and first == gold,
                    "flips": None,
                    **spend_upto(turns, 1, s.agent, topic),
                    "observerCalls": 0,
                    "seconds": seconds,
                    "sessionID": ses,
                }
    record["sessions"] = [r["sessionID"] for r in runs.values()]
    return record
