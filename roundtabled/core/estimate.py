"""The cost preview of a roundtable (``dryRun``): what it would ask of the models, before it runs.

Pure: the shell reads the server (agents, their prompts and models, the providers' prices) and
calls :func:`estimate`; nothing here does I/O. The rules (also in docs/result.md, "Cost preview"):

- Requests: one per seat turn (seats × rounds) plus one for the observer; a verdict that does not
  validate may cost one repair request more (not counted).
- Tokens are estimated from text sizes at :data:`CHARS_PER_TOKEN` characters per token. A seat
  turn's input is the seat's system prompt, its turn prompt (the topic, the orchestration text,
  bounded by :data:`~roundtabled.core.prompts.TURN_ORCHESTRATION_BUDGET`, and its side) and the
  replies it reads, each assumed :data:`REPLY_TOKENS` long (the same figure is each turn's
  output). The server's own system text and tool definitions are not known here and not counted.
- With ``context: "full"`` a turn reads every earlier reply, so input grows with each turn; with
  ``context: "recent"`` it reads the opening round, the last complete round and the current
  round's earlier turns in full, and a digest of the rounds between
  (:func:`~roundtabled.core.deliberation.rounds_to_hide`, at most
  :data:`~roundtabled.core.deliberation.DIGEST_MAX_BYTES`).
- The observer reads the conversation and a prompt that repeats the debate: twice the replies,
  plus its system prompt; it writes :data:`OBSERVER_REPLY_TOKENS`.
- Cost: each model's price as the server reports it (USD per million input and output tokens);
  a model without a reported price makes its turns' cost, and the total, unknown (``None``).
- A budget's expected stop: the first seat turn whose tokens (or cost) would pass the limit less
  the observer's reserve, both as the budget rule counts them during a run
  (:func:`~roundtabled.core.deliberation.observer_reserve`: the largest turn so far plus every
  reply so far; the first turn always runs, the run having nothing to project it from;
  docs/deliberation.md); a ``seconds`` limit
  cannot be estimated before a run and says so.
- ``until: "converged"``: the plan says the debate may stop after any round from the second on,
  and that its figures are for every round (the most it can take).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from roundtabled.core.deliberation import DIGEST_MAX_BYTES, rounds_to_hide
from roundtabled.core.prompts import TURN_ORCHESTRATION_BUDGET
from roundtabled.core.state import Budget

__all__ = [
    "CHARS_PER_TOKEN",
    "OBSERVER_REPLY_TOKENS",
    "REPLY_TOKENS",
    "Estimate",
    "Price",
    "Seat",
    "estimate",
    "plan_text",
    "protocol_lines",
    "protocol_prices",
]

CHARS_PER_TOKEN = 4
"""Characters per token of English text (a common rule of thumb; the models' tokenisers vary)."""
REPLY_TOKENS = 400
"""Assumed tokens of one seat reply (its output, and what each later reader reads of it)."""
RANK_LINE_TOKENS = 40
"""Assumed tokens of one line of a council ranking (``Rank 1: Answer B — why``)."""
OBSERVER_REPLY_TOKENS = 800
"""Assumed tokens of the observer's reply (the summary and the verdict JSON)."""

Context = Literal["full", "recent"]


@dataclass(frozen=True, slots=True)
class Price:
    """A model's price in USD per million tokens, as the server reports it."""

    input: float
    output: float


@dataclass(frozen=True, slots=True)
class Seat:
    """A seat (or the observer): agent name, ``provider/model``, the chars of its system prompt,
    its assigned side (``None``: free)."""

    agent: str
    model: str
    prompt_chars: int = 0
    side: str | None = None


@dataclass(frozen=True, slots=True)
class Estimate:
    """The plan and its estimate for one context mode.

    ``per_round``: input tokens of each round's seat turns (round 1 first); ``input``/``output``:
    totals with the observer; ``cost``: USD, ``None`` when a model has no price; ``stop``: the
    budget's expected stop in words (``None``: no budget).
    """

    context: Context
    per_round: list[int]
    input: int
    output: int
    cost: float | None
    stop: str | None = None
    turns: list[tuple[str, int, int, int]] = field(default_factory=list)
    """Each seat turn: (agent, 1-based round, input tokens, output tokens)."""


def _tokens(chars: int) -> int:
    return -(-max(chars, 0) // CHARS_PER_TOKEN)  # ceiling: a started token counts


def _turn_cost(
    model: str, tokens_in: int, tokens_out: int, prices: Mapping[str, Price]
) -> float | None:
    price = prices.get(model)
    if price is None:
        return None
    return (tokens_in * price.input + tokens_out * price.output) / 1_000_000


def _visible_replies(
    context: Context, round_index: int, position: int, n_seats: int, independent: bool = False
) -> int:
    """Replies a seat reads at its turn: ``round_index`` 0-indexed, ``position`` its seat;
    ``independent``: round 1 is the independent opening (no seat reads another there)."""
    if independent and round_index == 0:
        return 0
    earlier = round_index * n_seats + position
    if context == "full" or round_index == 0:
        return earlier
    hidden = len(rounds_to_hide(round_index)) * n_seats
    return earlier - hidden


def estimate(
    seats: Sequence[Seat],
    observer: Seat,
    *,
    rounds: int,
    topic_chars: int,
    context: Context,
    prices: Mapping[str, Price],
    budget: Budget | None = None,
    independent: bool = False,
) -> Estimate:
    """The estimate of a roundtable that has not run (rules in the module docstring).

    Args:
        seats: the seats in speaking order (at least one).
        observer: the observer's agent and model.
        rounds: planned rounds (≥ 1).
        topic_chars: characters of the topic (the prompt).
        context: ``full`` or ``recent``.
        prices: ``provider/model`` → its price; a model not in it has an unknown price.
        budget: the call's budget (``None``: none).
        independent: round 1 is the independent opening (``opening: "independent"``, the
            ``vote`` and ``adaptive`` protocols): no seat reads another's reply in it.

    Returns:
        An :class:`Estimate`; input tokens never decrease when rounds, seats or the topic grow.
    """
    n = len(seats)
    per_round: list[int] = []
    turns: list[tuple[str, int, int, int]] = []
    cost: float | None = 0.0
    for r in range(rounds):
        total = 0
        for i, seat in enumerate(seats):
            side = len(seat.side or "") + 80 if seat.side else 0  # the side's line
            prompt = _tokens(seat.prompt_chars + topic_chars + TURN_ORCHESTRATION_BUDGET + side)
            reads = _visible_replies(context, r, i, n, independent) * REPLY_TOKENS
            if context == "recent" and r > 0 and len(rounds_to_hide(r)):
                reads += _tokens(DIGEST_MAX_BYTES)
            tokens_in = prompt + reads
            total += tokens_in
            turns.append((seat.agent, r + 1, tokens_in, REPLY_TOKENS))
            c = _turn_cost(seat.model, tokens_in, REPLY_TOKENS, prices)
            cost = None if cost is None or c is None else cost + c
        per_round.append(total)
    replies = n * rounds * REPLY_TOKENS
    obs_in = _tokens(observer.prompt_chars + topic_chars) + 2 * replies
    c = _turn_cost(observer.model, obs_in, OBSERVER_REPLY_TOKENS, prices)
    cost = None if cost is None or c is None else cost + c
    stop = _budget_stop(turns, seats, prices, budget)
    return Estimate(
        context=context,
        per_round=per_round,
        input=sum(per_round) + obs_in,
        output=len(turns) * REPLY_TOKENS + OBSERVER_REPLY_TOKENS,
        cost=None if cost is None else round(cost, 6),
        stop=stop,
        turns=turns,
    )


def protocol_prices(
    seats: Sequence[Seat],
    observer: Seat,
    *,
    rounds: int,
    topic_chars: int,
    context: Context,
    prices: Mapping[str, Price],
    opening_independent: bool = False,
) -> dict[str, dict[str, Any]]:
    """What each protocol would ask of the models for this panel and topic (docs/deliberation.md,
    "Protocols"): ``debate`` for ``rounds`` rounds (its round 1 independent when
    ``opening_independent``), ``vote`` one independent round, ``adaptive`` between its opening
    alone (it stopped there) and ``rounds`` rounds (it debated to the end; at least 2),
    ``council`` the vote and one ranking turn per seat (its own answer and the others' read,
    :data:`RANK_LINE_TOKENS` written per answer ranked; the observer's reading of the rankings is
    not counted). Each:
    ``{"turns", "inputTokens", "outputTokens", "costUsd"}``, ``adaptive`` as ``least`` and
    ``most`` of those; a cost is ``None`` when a model has no price."""

    def one(n_rounds: int, independent: bool) -> dict[str, Any]:
        e = estimate(
            seats,
            observer,
            rounds=n_rounds,
            topic_chars=topic_chars,
            context=context,
            prices=prices,
            independent=independent,
        )
        return {
            "turns": len(seats) * n_rounds,
            "inputTokens": e.input,
            "outputTokens": e.output,
            "costUsd": e.cost,
        }

    n = len(seats)
    council = one(1, True)
    if n >= 3:  # every seat ranks the others' answers when it has two or more to rank
        ranking_out = RANK_LINE_TOKENS * (n - 1)
        for seat in seats:
            # Its own session: its opening prompt and answer, then the other answers to rank.
            tokens_in = _tokens(seat.prompt_chars + 2 * topic_chars + TURN_ORCHESTRATION_BUDGET)
            tokens_in += n * REPLY_TOKENS
            c = _turn_cost(seat.model, tokens_in, ranking_out, prices)
            council["costUsd"] = (
                None
                if council["costUsd"] is None or c is None
                else round(council["costUsd"] + c, 6)
            )
            council["inputTokens"] += tokens_in
            council["outputTokens"] += ranking_out
        council["turns"] += n
    return {
        "debate": one(rounds, opening_independent),
        "vote": one(1, True),
        "adaptive": {"least": one(1, True), "most": one(max(rounds, 2), True)},
        "council": council,
    }


def protocol_lines(
    priced: Mapping[str, Mapping[str, Any]], chosen: str, context: Context
) -> list[str]:
    """:func:`protocol_prices` in words, the ``chosen`` protocol marked."""

    def said(p: Mapping[str, Any]) -> str:
        return (
            f"{p['turns']} seat turns, ~{p['inputTokens']:,} input + ~{p['outputTokens']:,} "
            f"output tokens, cost {_usd(p['costUsd'])}"
        )

    lines = [f"Each protocol for this panel (context {context}):"]
    for name, p in priced.items():
        mark = " (this call)" if name == chosen else ""
        if "least" in p:
            lines.append(
                f"  {name}{mark}: {said(p['least'])} when it stops at the opening; up to "
                f"{said(p['most'])} when it debates"
            )
        else:
            lines.append(f"  {name}{mark}: {said(p)}")
    return lines


def _budget_stop(
    turns: Sequence[tuple[str, int, int, int]],
    seats: Sequence[Seat],
    prices: Mapping[str, Price],
    budget: Budget | None,
) -> str | None:
    if budget is None or budget.empty():
        return None
    models = {s.agent: s.model for s in seats}
    spent_tokens, spent_usd = 0, 0.0
    # The observer's reserve as the run keeps it back (deliberation.observer_reserve): the
    # largest seat turn so far (its tokens and cost) and every seat reply so far.
    largest, largest_usd, replies = 0, 0.0, 0
    usd_known = True
    notes: list[str] = []
    for agent, rnd, t_in, t_out in turns:
        c = _turn_cost(models[agent], t_in, t_out, prices)
        usd_known = usd_known and c is not None
        reserve_tokens = largest + replies
        reserve_usd = largest_usd * reserve_tokens / largest if largest else 0.0
        over = []
        # The first turn always runs: before it the run has nothing to project a turn from.
        first = largest == 0
        if (
            not first
            and budget.tokens is not None
            and spent_tokens + t_in + t_out > budget.tokens - reserve_tokens
        ):
            over.append(f"{budget.tokens:,} tokens")
        if (
            not first
            and budget.usd is not None
            and usd_known
            and c is not None
            and spent_usd + c > budget.usd - reserve_usd
        ):
            over.append(f"${budget.usd:g}")
        if over:
            notes.append(
                f"expected to stop before {agent}'s turn in round {rnd} (budget "
                f"{' and '.join(over)}, keeping the observer's share); the observer then sums up"
            )
            break
        spent_tokens += t_in + t_out
        spent_usd += c or 0.0
        if t_in + t_out > largest:
            largest, largest_usd = t_in + t_out, c or 0.0
        replies += t_out
    else:
        notes.append("expected to run every turn within the budget")
    if budget.usd is not None and not usd_known:
        notes.append("the usd limit cannot be estimated: a model's price is unknown")
    if budget.seconds is not None:
        notes.append("the seconds limit cannot be estimated before a run")
    return "; ".join(notes)


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def plan_json(
    seats: Sequence[Seat],
    observer: Seat,
    rounds: int,
    prices: Mapping[str, Price],
    estimates: Sequence[Estimate],
) -> dict[str, Any]:
    """The plan as JSON for the control API (camelCase; unknown prices and costs ``null``)."""

    def seat(s: Seat) -> dict[str, Any]:
        p = prices.get(s.model)
        return {
            "agent": s.agent,
            "model": s.model,
            "side": s.side,
            "price": None if p is None else {"input": p.input, "output": p.output},
        }

    return {
        "seats": [seat(s) for s in seats],
        "observer": seat(observer),
        "rounds": rounds,
        "turns": len(seats) * rounds,
        "requests": len(seats) * rounds + 1,
        "estimates": {
            e.context: {
                "inputTokens": e.input,
                "outputTokens": e.output,
                "perRound": e.per_round,
                "costUsd": e.cost,
                "budgetStop": e.stop,
            }
            for e in estimates
        },
        "charsPerToken": CHARS_PER_TOKEN,
        "replyTokens": REPLY_TOKENS,
    }


def plan_text(
    seats: Sequence[Seat],
    observer: Seat,
    rounds: int,
    prices: Mapping[str, Price],
    estimates: Sequence[Estimate],
    chosen: Context = "full",
    until: str | None = None,
) -> str:
    """The plan in words, for the terminal and the tool (nothing has run; every figure is an
    estimate, an unknown price reads ``unknown``); ``chosen``: the call's context, marked;
    ``until``: the call's stop rule (``converged`` adds a line: it may stop early)."""

    def price(model: str) -> str:
        p = prices.get(model)
        return "price unknown" if p is None else f"${p.input:g}/${p.output:g} per 1M in/out"

    lines = ["Dry run: nothing was started. The plan:"]
    for i, s in enumerate(seats, 1):
        side = f" · side: {s.side}" if s.side else ""
        lines.append(f"  {i}. {s.agent} — {s.model} ({price(s.model)}){side}")
    lines.append(f"  observer: {observer.agent} — {observer.model} ({price(observer.model)})")
    turns = len(seats) * rounds
    lines.append(
        f"Turns: {rounds} round(s) × {len(seats)} seats = {turns} seat turns; requests: "
        f"{turns + 1} (with the observer's; one more if its verdict needs a repair)"
    )
    if until == "converged":
        lines.append(
            f"Until converged: the debate stops after the first round, from round 2 on, in which "
            f"the panel converged; the figures below are for all {rounds} rounds, the most it "
            "can take"
        )
    for e in estimates:
        rounds_text = ", ".join(f"{t:,}" for t in e.per_round)
        mark = " (this call)" if e.context == chosen else ""
        lines.append(
            f"Context {e.context}{mark}: ~{e.input:,} input + ~{e.output:,} output tokens, cost "
            f"{_usd(e.cost)} (per round, input: {rounds_text})"
        )
        if e.stop:
            lines.append(f"  budget: {e.stop}")
    lines.append(
        f"Estimates: {CHARS_PER_TOKEN} characters per token, {REPLY_TOKENS}-token replies; the "
        "server's own system text and tools are not counted."
    )
    return "\n".join(lines)
