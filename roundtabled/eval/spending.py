"""What a question spent: seat calls, tokens and cost per protocol read from the exported turns,
the observer's overhead, the pre-run estimate, and the totals the spend caps compare (docs/eval.md,
"Tokens and cost")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from roundtabled.core.scoring import Question
from roundtabled.core.state import tokens_in_out
from roundtabled.eval.options import DEBATE_ROUNDS, SELF_CONSISTENCY, EvalOptions, runs_of

NOT_SEAT_KINDS = ("observer", "user")
"""Exported turn kinds that are no seat's model call (the observer's is counted apart)."""
CHARS_PER_TOKEN = 4
"""Used to estimate tokens from texts when the provider reports no usage (said in the report)."""


def usage_of(turn: Mapping[str, Any]) -> tuple[int, float | None]:
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
    tokens = sum(usage_of(t)[0] for t in mine)
    costs = [usage_of(t)[1] for t in mine]
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
    tokens = sum(usage_of(t)[0] for t in mine)
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


def roundtable_spend(
    turns: Sequence[Mapping[str, Any]], topic: str, agents: Sequence[str]
) -> dict[str, Any]:
    """What a whole roundtable spent, from its export's ``turns``: ``calls`` (the turns of its
    seats ``agents`` of any kind but the observer's — a protocol's second round, such as a
    ranking, included), ``observerCalls``, ``tokens`` (seats and observer), ``cost`` (``None``:
    unknown, when any turn's is or the tokens are estimated) and ``estimated`` (the provider
    reported no usage: tokens from the texts, as :func:`spend_upto` and :func:`observer_spend`
    estimate them)."""
    seats = [t for t in turns if t.get("agent") in agents and t.get("kind") not in NOT_SEAT_KINDS]
    observer = observer_spend(turns, topic)
    tokens = sum(usage_of(t)[0] for t in seats)
    estimated = bool(observer["estimated"])
    if tokens == 0 and seats:
        tokens = spend_upto(turns, 10**6, None, topic)["tokens"]
        estimated = True
    costs = [usage_of(t)[1] for t in [*seats, *(t for t in turns if t.get("kind") == "observer")]]
    cost = (
        None
        if estimated or any(c is None for c in costs)
        else sum(c for c in costs if c is not None)
    )
    return {
        "calls": len(seats),
        "observerCalls": observer["calls"],
        "tokens": tokens + observer["tokens"],
        "cost": cost,
        "estimated": estimated,
    }


def estimate(
    opts: EvalOptions,
    questions: Sequence[Question],
    prices: dict[str, tuple[float, float]],
    models: Sequence[str],
) -> dict[str, Any]:
    """A rough pre-run estimate: seat calls, tokens (each call reads its prompt and every earlier
    reply, assumed 300 tokens each; about 600 tokens of prompt) and cost at the listed prices
    (``None`` when any seat's model lists no price), the most each roundtable may take: one round
    for ``vote`` and ``self-consistency``, two for ``council`` (the answers, the rankings),
    :data:`DEBATE_ROUNDS` for the others, and one observer call per roundtable."""
    seats = len(opts.agents)
    most = {"vote": 1, "single": 1, SELF_CONSISTENCY: 1, "council": 2}
    rounds = [most.get(run, DEBATE_ROUNDS) for run in runs_of(opts)]
    per_q_tokens = 0
    for n in rounds:
        for r in range(n):
            per_q_tokens += seats * (600 + 300 * seats * r + 300)
        per_q_tokens += 600 + 300 * seats * n + 600
    tokens = len(questions) * per_q_tokens
    known = [prices[m] for m in models if m in prices]
    cost = None
    if models and len(known) == len(models):
        mean_in = sum(p[0] for p in known) / len(known)
        mean_out = sum(p[1] for p in known) / len(known)
        cost = tokens * (0.8 * mean_in + 0.2 * mean_out) / 1e6
    return {
        "questions": len(questions),
        "roundtablesPerQuestion": len(rounds),
        "seatCallsPerQuestion": seats * sum(rounds),
        "observerCallsPerQuestion": len(rounds),
        "tokens": tokens,
        "usd": cost,
    }


def total_tokens(rec: Mapping[str, Any]) -> int:
    """Every token a question's record spent: each of its roundtables (``runs``) once."""
    return sum(int(v.get("tokens") or 0) for v in (rec.get("runs") or {}).values())


def without_cost(rec: dict[str, Any]) -> dict[str, Any]:
    """``rec`` with every protocol's cost unknown (``None``): what a run whose seats' models list
    no price records (OpenCode writes a cost of 0 for such a model, which measures nothing)."""
    protocols = {k: {**v, "cost": None} for k, v in rec.get("protocols", {}).items()}
    runs = {k: {**v, "cost": None} for k, v in (rec.get("runs") or {}).items()}
    return {**rec, "protocols": protocols, "runs": runs}


def total_cost(rec: Mapping[str, Any]) -> float | None:
    """The cost of a question's record (its roundtables, :func:`total_tokens`); ``None`` when
    any is unknown."""
    costs = [v.get("cost") for v in (rec.get("runs") or {}).values()]
    if any(c is None for c in costs):
        return None
    return sum(float(c) for c in costs if c is not None)
