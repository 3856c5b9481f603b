"""Deliberation rules: when a debate has converged, what the next turn will cost, what a seat sees.

Pure: no I/O, no clock (``now`` is an argument), no asyncio. The machine calls these functions;
the rules are described for users in ``docs/deliberation.md``.

The *position ledger* is each seat turn's stated position
(:class:`~roundtabled.core.positions.Position`, the reply's closing ``Position:`` line), kept on
its :class:`~roundtabled.core.state.HistoryEntry`.

Convergence (``until: "converged"``), checked after each complete round:

- A seat *spoke* in a round when its turn stored a reply without an error (a failed, cut-off or
  timed-out turn did not speak). At least :data:`MIN_SPEAKERS` seats must have spoken.
- A speaking seat without a label blocks convergence (never guessed).
- A label *changed* when the seat stated a label in the previous round and states one of a
  different *stance* now (:mod:`roundtabled.core.stances`: the two rounds' labels grouped
  together; a label naming no stance — a seat's name, the topic copied — is no label).
  Convergence never fires on a round in which any label changed: a seat that just moved to the
  others' label is heard once more before the panel counts as settled.
- Then the panel converged when every speaking seat holds the label it held in the previous round
  (rule ``unchanged``), or all speaking seats hold one label (rule ``unanimous``: it also covers a
  seat whose previous round had no label): all speaking seats hold one stance.
- Only free seats count: the turns of a seat with an assigned side
  (:mod:`roundtabled.core.sides`) are left out before the rule reads the round.
- It is checked from the second round of the current call on (a start or an ``extend``: an
  extension debates at least two rounds before it can stop), except for an independent opening
  round (every seat answered without seeing the others): a unanimous opening converges at once.

Budget (``budget: {tokens, usd, seconds}``, per call): before each seat turn the machine projects
that turn (:func:`project_turn`) and stops when ``spent + projection > limit - reserve`` on any
limited dimension, where the *reserve* is what the observer is expected to need
(:func:`observer_reserve`); the observer always runs. Tokens are input + output as the server
records them on each assistant message, usd the server's ``cost``, seconds wall time since the
call began.

Recent context (``context: "recent"``): at the start of round ``r`` the replies of the rounds
between the opening round and the last complete round are hidden from the models in whole rounds
(:func:`rounds_to_hide`) and summarised in a digest built from the ledger (:func:`digest`, never
a model call); a seat sees the opening round, the digest and the last round in full. The server
keeps an assistant reply's text in the model's context even when its part is marked ``ignored``
(docs/deliberation.md, ``context: "recent"``), so the daemon refuses ``context: "recent"`` today;
these rules are what it applies once replies can be hidden."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

from roundtabled.core.messages import UserView
from roundtabled.core.positions import (
    normalise_label,
    position_of,
    spoke,
)
from roundtabled.core.sides import free_history
from roundtabled.core.similarity import jaccard_bigrams
from roundtabled.core.stances import seat_stances
from roundtabled.core.state import (
    MODE_NOTES,
    MODE_SWITCH_NOTES,
    PLUGIN_MISSING_V2,
    RESUMED_NOTE,
    Budget,
    ContextMode,
    EndReason,
    HistoryEntry,
    Options,
    PermissionPolicy,
    RoundtableState,
    Until,
)

__all__ = [
    "DIVERSITY_PROMPT_SIMILARITY",
    "MIN_SPEAKERS",
    "RESERVE_SECONDS_FACTOR",
    "BudgetCheck",
    "Call",
    "Convergence",
    "Spent",
    "Stop",
    "budget_check",
    "check_convergence",
    "current_notes",
    "digest",
    "diversity_warning",
    "next_call",
    "observer_reserve",
    "position_of",
    "project_turn",
    "rounds_to_hide",
    "spent",
    "stop_after_seat_turn",
]

MIN_SPEAKERS = 2
"""Seats that must have spoken in a round for it to count as converged."""
DIVERSITY_PROMPT_SIMILARITY = 0.8
"""Bigram Jaccard similarity (:mod:`roundtabled.core.similarity`) from which two seats' system
prompts count as near-identical for the diversity warning."""
RESERVE_SECONDS_FACTOR = 2.0
"""The observer's time reserve in mean seat turns (it reads the whole debate and writes the
longest reply)."""

# ── the ledger ─────────────────────────────────────────────────────────────────────────────────


def round_turns(history: Iterable[HistoryEntry], round_number: int) -> dict[str, HistoryEntry]:
    """Seat turns of a 1-based round by agent (the last one when a seat appears twice)."""
    return {e.agent: e for e in history if e.kind == "turn" and e.round == round_number}


def convergence_note(state: RoundtableState) -> str | None:
    """For ``status.notes``: why ``until: "converged"`` never stopped a debate that is over, when
    it is because seats gave no ``Position:`` line (convergence cannot be judged without one);
    ``None`` otherwise (a debate still running, another ``until``, a converged stop, or every
    speaking turn stated a position)."""
    if (
        state.active
        or state.options.until != "converged"
        or state.end_reason == EndReason.CONVERGED
    ):
        return None
    turns = [e for e in state.seat_turns() if spoke(e)]
    missing = [e for e in turns if position_of(e) is None]
    if not missing:
        return None
    rounds = ", ".join(str(r) for r in sorted({e.round for e in missing}))
    return (
        f"until converged never stopped the debate: {len(missing)} of {len(turns)} seat turns "
        f"gave no Position: line (rounds {rounds}), so convergence could not be judged"
    )


# ── convergence ────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class Convergence:
    """The outcome of :func:`check_convergence` for one complete round.

    ``converged``: whether the debate may stop; ``rule``: ``unchanged`` | ``unanimous`` when it
    converged; ``labels``: each speaking seat's label as written (agent → label, ``None`` = no
    label); ``changed``: seats whose label changed this round; ``reason``: one sentence in words
    (why it converged, or what blocked it).
    """

    converged: bool
    round: int
    rule: Literal["unchanged", "unanimous"] | None
    labels: Mapping[str, str | None]
    changed: tuple[str, ...]
    reason: str


def _stance_map(
    now: Mapping[str, str | None],
    before: Mapping[str, str | None],
    seats: Sequence[str],
    topic: str,
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """The stances of two rounds' labels, grouped together so that they compare
    (:func:`roundtabled.core.stances.seat_stances`); a label naming no stance is ``None``."""
    cur = seat_stances(now, seats=seats, topic=topic, also=[v for v in before.values() if v])
    prev = seat_stances(before, seats=seats, topic=topic, also=[v for v in now.values() if v])
    return {a: s.stance for a, s in cur.items()}, {a: s.stance for a, s in prev.items()}


def check_convergence(
    history: Sequence[HistoryEntry],
    round_number: int,
    *,
    first_round: int = 1,
    independent_opening: bool = False,
    seats: Sequence[str] = (),
    topic: str = "",
    counted: Iterable[str] | None = None,
) -> Convergence:
    """Whether the panel converged in the complete 1-based round ``round_number``.

    Args:
        history: the roundtable's history (seat turns are read; other kinds are skipped).
        round_number: the round just completed, 1-based.
        first_round: the 1-based first round of the current call (a start: 1; an extend: its
            first new round). Only rounds after it can converge, except an independent opening.
        independent_opening: round ``round_number`` is an opening whose seats answered
            independently (then unanimity alone converges it).
        seats: every seat's name (a label that is a seat's name names no stance).
        topic: the topic in force (a label that copies it names no stance).
        counted: the seats whose stances count (``None``: every seat that took a turn).

    Returns:
        A :class:`Convergence`; see the module docstring for the rules. Labels are compared as
        stances (:mod:`roundtabled.core.stances`), two rounds grouped together.
    """
    now = round_turns(history, round_number)
    if counted is not None:
        keep = set(counted)
        now = {a: e for a, e in now.items() if a in keep}
    speaking = {a: e for a, e in now.items() if spoke(e)}
    labels = {a: (p.label if (p := position_of(e)) is not None else None) for a, e in now.items()}
    labels = {a: labels[a] for a in speaking}

    # Every answer about this round carries its labels; a converged round has no changed seat.
    def no(reason: str, changed: tuple[str, ...] = ()) -> Convergence:
        return Convergence(False, round_number, None, labels, changed, reason)

    def yes(rule: Literal["unchanged", "unanimous"], reason: str) -> Convergence:
        return Convergence(True, round_number, rule, labels, (), reason)

    opening = independent_opening and round_number == first_round
    if round_number <= first_round and not opening:
        return no(f"round {round_number} is the first round of this call")
    if len(speaking) < MIN_SPEAKERS:
        return no(f"only {len(speaking)} seat(s) spoke in round {round_number}")
    before = round_turns(history, round_number - 1)
    before_labels: dict[str, str | None] = {}
    for agent in speaking:
        e = before.get(agent)
        p = position_of(e) if e is not None and spoke(e) else None
        before_labels[agent] = p.label if p is not None else None
    keys, previous = _stance_map(labels, before_labels, seats, topic)
    missing = [a for a in labels if keys[a] is None]
    if missing:
        return no(f"{', '.join(missing)} stated no position in round {round_number}")
    unanimous = len(set(keys.values())) == 1
    if opening:
        if unanimous:
            stance = next(iter(keys.values()))
            return yes(
                "unanimous",
                f"every seat opened independently with the same position ({stance!r})",
            )
        return no("the independent openings differ")
    changed = tuple(a for a in speaking if previous[a] is not None and previous[a] != keys[a])
    if changed:
        return no(f"{', '.join(changed)} changed position in round {round_number}", changed)
    if all(previous[a] is not None for a in speaking):
        return yes(
            "unchanged",
            f"every seat that spoke held its position from round {round_number - 1} to "
            f"round {round_number}",
        )
    if unanimous:
        stance = next(iter(keys.values()))
        return yes(
            "unanimous",
            f"every seat that spoke in round {round_number} holds the same position ({stance!r})",
        )
    fresh = [a for a in speaking if previous[a] is None]
    return no(f"{', '.join(fresh)} stated no position in round {round_number - 1} to compare with")


# ── budget ─────────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class Spent:
    """Tokens (input + output), cost in USD and wall seconds."""

    tokens: int = 0
    usd: float = 0.0
    seconds: float = 0.0

    def plus(self, other: Spent) -> Spent:
        """The sum of two amounts."""
        return Spent(self.tokens + other.tokens, self.usd + other.usd, self.seconds + other.seconds)


def _tokens(entry: HistoryEntry) -> int:
    return entry.usage.input + entry.usage.output


def _call_entries(history: Iterable[HistoryEntry], from_round: int) -> list[HistoryEntry]:
    """Entries of the current call: rounds after ``from_round`` (0-indexed first round), so an
    earlier call's observer (numbered with that call's last round) is not counted."""
    return [e for e in history if e.round > from_round]


def spent(history: Sequence[HistoryEntry], *, from_round: int, started_at: int, now: int) -> Spent:
    """What the current call has used so far.

    Args:
        history: every entry (seat turns, observer, replies to a person: all are model calls).
        from_round: 0-indexed first round of the current call (``Options.call_from_round``).
        started_at, now: epoch milliseconds (``Options.call_started_at`` and the clock).
    """
    entries = _call_entries(history, from_round)
    return Spent(
        tokens=sum(_tokens(e) for e in entries),
        usd=sum(e.usage.cost for e in entries),
        seconds=max(0.0, (now - started_at) / 1000.0) if started_at else 0.0,
    )


def _mean_turn_seconds(
    history: Sequence[HistoryEntry], from_round: int, started_at: int, now: int
) -> float:
    turns = [e for e in _call_entries(history, from_round) if e.kind == "turn"]
    if not turns or not started_at:
        return 0.0
    return max(0.0, (now - started_at) / 1000.0) / len(turns)


def project_turn(
    history: Sequence[HistoryEntry], agent: str, *, from_round: int, started_at: int, now: int
) -> Spent:
    """The expected cost of ``agent``'s next seat turn.

    Tokens: the seat's last turn (input + output) plus the output of every entry since (the
    conversation it reads has grown by those replies); a seat that has not spoken yet is
    projected from the last turn of any seat (the same growth rule); with no turn at all, 0.
    USD: the last turn's cost scaled by the same token ratio. Seconds: the mean wall time per seat
    turn of the current call (turn durations are not recorded per turn).
    """
    turns = [(i, e) for i, e in enumerate(history) if e.kind == "turn"]
    own = [(i, e) for i, e in turns if e.agent == agent and _tokens(e) > 0]
    base = own[-1] if own else next(((i, e) for i, e in reversed(turns) if _tokens(e) > 0), None)
    seconds = _mean_turn_seconds(history, from_round, started_at, now)
    if base is None:
        return Spent(0, 0.0, seconds)
    index, last = base
    growth = sum(e.usage.output for e in history[index + 1 :])
    tokens = _tokens(last) + growth
    usd = last.usage.cost * (tokens / _tokens(last)) if _tokens(last) else last.usage.cost
    return Spent(tokens, usd, seconds)


def observer_reserve(
    history: Sequence[HistoryEntry], *, from_round: int, started_at: int, now: int
) -> Spent:
    """What is kept back for the observer, which always runs after a budget stop.

    Tokens: the largest seat turn of the current call (input + output: the observer reads the
    same conversation) plus the output of every seat turn of the call (its prompt repeats the
    debate). USD: the largest turn's cost scaled by that token ratio. Seconds:
    :data:`RESERVE_SECONDS_FACTOR` mean seat turns. Zero before the first turn.
    """
    turns = [e for e in _call_entries(history, from_round) if e.kind == "turn"]
    if not turns:
        return Spent()
    largest = max(turns, key=_tokens)
    tokens = _tokens(largest) + sum(e.usage.output for e in turns)
    if _tokens(largest):
        usd = largest.usage.cost * tokens / _tokens(largest)
    else:
        usd = 2 * max(e.usage.cost for e in turns)
    seconds = RESERVE_SECONDS_FACTOR * _mean_turn_seconds(history, from_round, started_at, now)
    return Spent(tokens, usd, seconds)


def unenforceable_budget_note(state: RoundtableState) -> str | None:
    """For ``status.notes``: a token or USD budget of the current call that cannot be enforced,
    said from the first answered turn whose usage the server did not report; ``None`` when the
    call has no such budget or every answered turn reported usage. The seconds budget still
    applies (it is measured by the daemon)."""
    budget = state.options.budget
    if budget is None:
        return None
    dims = [name for name, v in (("token", budget.tokens), ("USD", budget.usd)) if v is not None]
    if not dims:
        return None
    turns = [
        e for e in _call_entries(state.history, state.options.call_from_round) if e.kind == "turn"
    ]
    unknown = [e for e in turns if e.usage_unreported]
    if not unknown:
        return None
    first = unknown[0]
    still = "; the seconds budget still applies" if budget.seconds is not None else ""
    return (
        f"the {' and '.join(dims)} budget cannot be enforced: the server reported no usage for "
        f"{len(unknown)} answered turn(s), the first {first.agent}'s in round {first.round} "
        f"(usage unknown, not 0){still}"
    )


@dataclass(frozen=True, slots=True)
class BudgetCheck:
    """The outcome of :func:`budget_check` before one seat turn.

    ``stop``: the turn must not run; ``dimension``: the first limit it would break
    (``tokens`` | ``usd`` | ``seconds``); ``spent``/``projection``/``reserve``: the amounts;
    ``limit``: the budget; ``note``: the words for ``status.notes`` (spent and limit).
    """

    stop: bool
    dimension: Literal["tokens", "usd", "seconds"] | None
    spent: Spent
    projection: Spent
    reserve: Spent
    limit: Budget
    note: str


def _fmt(dimension: str, value: float) -> str:
    if dimension == "tokens":
        return f"{int(value):,} tokens"
    if dimension == "usd":
        return f"${value:.4f}"
    return f"{value:.1f} s"


def budget_check(state: RoundtableState, agent: str, now: int) -> BudgetCheck | None:
    """Whether ``agent``'s next seat turn fits the budget of the current call.

    Args:
        state: the roundtable (history, ``options.budget``, ``call_from_round``,
            ``call_started_at``).
        agent: the seat about to be prompted.
        now: epoch milliseconds.

    Returns:
        ``None`` when the roundtable has no budget; otherwise a :class:`BudgetCheck` whose
        ``stop`` is true when ``spent + projection > limit - reserve`` on a limited dimension.
    """
    budget = state.options.budget
    if budget is None or budget.empty():
        return None
    opts = state.options
    kw = {"from_round": opts.call_from_round, "started_at": opts.call_started_at, "now": now}
    used = spent(state.history, **kw)
    projection = project_turn(state.history, agent, **kw)
    reserve = observer_reserve(state.history, **kw)
    limits: tuple[tuple[Literal["tokens", "usd", "seconds"], float | None], ...] = (
        ("tokens", budget.tokens),
        ("usd", budget.usd),
        ("seconds", budget.seconds),
    )
    for dim, limit in limits:
        if limit is None:
            continue
        have = float(getattr(used, dim))
        want = float(getattr(projection, dim))
        keep = float(getattr(reserve, dim))
        if have + want > limit - keep:
            note = (
                f"budget: spent {_fmt(dim, have)} of {_fmt(dim, limit)}; {agent}'s next turn "
                f"(about {_fmt(dim, want)}) would not leave the observer's reserve of "
                f"{_fmt(dim, keep)}, so the debate stopped there"
            )
            return BudgetCheck(True, dim, used, projection, reserve, budget, note)
    parts = [
        f"spent {_fmt(dim, float(getattr(used, dim)))} of {_fmt(dim, limit)}"
        for dim, limit in limits
        if limit is not None
    ]
    return BudgetCheck(
        False, None, used, projection, reserve, budget, "budget: " + "; ".join(parts)
    )


# ── the machine's question ─────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class Stop:
    """The debate stops taking seat turns: ``reason`` (converged | budget) and ``note``, the
    sentence for ``status.notes`` and the observer."""

    reason: EndReason
    note: str

    def recorded(self, state: RoundtableState) -> RoundtableState:
        """``state`` with the stop said: the note among ``notes`` (the result's
        ``status.notes`` and the observer) and as ``stop_detail`` (the state card)."""
        return state.model_copy(
            update={"notes": [*state.notes, self.note], "stop_detail": self.note}
        )


def current_notes(state: RoundtableState) -> list[str]:
    """``state.notes`` as the current result says them: the mode lines, and a stop's note only
    while that stop is the roundtable's current one (``stop_detail``). An ``extend`` clears
    ``stop_detail``: a stop of an earlier call ("converged after round 3 of 5 …") is then history,
    and the extension's own outcome is what the result says (docs/behaviour.md, "Extend")."""
    modes = {*MODE_NOTES.values(), *MODE_SWITCH_NOTES.values()}
    return [
        n
        for n in state.notes
        if n in modes
        or n == state.stop_detail
        or n.startswith(RESUMED_NOTE)
        or n.startswith(PLUGIN_MISSING_V2)
    ]


def stop_after_seat_turn(
    state: RoundtableState, now: int, messages: Sequence[object] = ()
) -> Stop | None:
    """Whether the debate stops after the seat turn just recorded in ``state``.

    Args:
        state: the roundtable with the finished turn in its history and its position
            (``current_round``, ``current_agent_index``) already moved to the next seat turn.
        now: epoch milliseconds.
        messages: what the machine observed of S2 (message views). When the next seat turn's
            signed prompt is already there (sent before a crash, its state write lost), that
            turn goes on: a decision re-taken later (the budget's seconds grow) never leaves a
            prompted turn unanswered beside the observer's.

    Returns:
        ``None`` to go on (also when the planned rounds are over: that is a normal completion);
        a :class:`Stop` with ``converged`` when ``until`` is ``converged`` and the round just
        completed converged (:func:`check_convergence`), or with ``budget`` when the next seat
        turn does not fit (:func:`budget_check`).
    """
    if state.current_round >= state.total_rounds:
        return None
    nxt = ("turn", state.current_round, state.current_agent_index)
    if any(
        isinstance(m, UserView)
        and m.marker is not None
        and (m.marker.kind, m.marker.round, m.marker.seat) == nxt
        for m in messages
    ):
        return None
    opts = state.options
    if opts.until == "converged" and state.current_agent_index == 0:
        done = state.current_round  # 1-based number of the round just completed
        c = check_convergence(
            # Side-bound seats argue what they were assigned: only the free seats converge.
            free_history(state.history, opts.sides),
            done,
            first_round=opts.call_from_round + 1,
            independent_opening=opts.opening == "independent" and done == 1,
            seats=state.agents,
            topic=_topic(state, done - 1),
        )
        if c.converged:
            return Stop(
                EndReason.CONVERGED,
                f"converged after round {done} of {state.total_rounds} ({c.rule}): {c.reason}",
            )
    check = budget_check(state, state.agents[state.current_agent_index], now)
    if check is not None and check.stop:
        return Stop(EndReason.BUDGET, check.note)
    return None


def _topic(state: RoundtableState, round_index: int) -> str:
    """The topic text in force in 0-indexed round ``round_index`` (the latest extension's prompt
    from that round on, else the roundtable's prompt): what a copied label is compared with."""
    topic = state.prompt
    for ext in sorted(state.extensions, key=lambda e: e.from_round):
        if ext.from_round <= round_index:
            topic = ext.prompt
    return topic


@dataclass(frozen=True, slots=True)
class Call:
    """What an ``extend`` call sets for itself (``None``: keep the roundtable's).

    ``turn_timeout`` in seconds; ``until``; ``budget`` is the call's own (``None``: no budget,
    never the previous call's); ``context`` (``None``: keep the roundtable's).
    """

    turn_timeout: float | None = None
    permission_policy: PermissionPolicy | None = None
    until: Until | None = None
    budget: Budget | None = None
    context: ContextMode | None = None


def next_call(state: RoundtableState, call: Call | None, now: int) -> tuple[int, Options]:
    """Where an ``extend`` of ``state`` starts and the options it runs with.

    Args:
        state: the concluded roundtable.
        call: what the extend sets (``None``: nothing).
        now: epoch milliseconds (the call's budget seconds count from here).

    Returns:
        ``(start, options)``: ``start`` is the 0-indexed first round of the extension — right
        after the last round in which a seat took a turn when the debate stopped early for any
        reason (converged, budget, all-failed, repetition, cancelled, observer-failed, timeout
        …: no skipped, never-mentioned round numbers; a round cut short counts as run), else
        ``total_rounds``; ``options`` with the call's values and its budget window.
    """
    call = call or Call()
    start = state.total_rounds
    if state.end_reason not in (None, EndReason.COMPLETED):
        played = max((e.round for e in state.seat_turns()), default=0)
        start = min(start, played)
    update: dict[str, object] = {
        "until": call.until or state.options.until,
        "budget": call.budget,
        "call_started_at": now,
        "call_from_round": start,
    }
    if call.turn_timeout:
        update["turn_timeout"] = call.turn_timeout
    if call.permission_policy:
        update["permission_policy"] = call.permission_policy
    if call.context:
        update["context"] = call.context
    return start, state.options.model_copy(update=update)


# ── diversity ──────────────────────────────────────────────────────────────────────────────────


def diversity_warning(
    models: Mapping[str, str], prompts: Mapping[str, str | None], agents: Sequence[str]
) -> str | None:
    """A warning when the panel lacks diversity, else ``None``.

    Args:
        models: agent → ``provider/model`` it runs on.
        prompts: agent → its system prompt (``None`` or ``""``: the server's default prompt).
        agents: the seats.

    Returns:
        A sentence when every seat runs the same model and every pair of seats' prompts is at
        least :data:`DIVERSITY_PROMPT_SIMILARITY` similar (two missing prompts are identical):
        the panel is then one voice several times (a mix of models is the strongest single
        factor for debate quality, docs/deliberation.md).
    """
    if len(agents) < 2:
        return None
    seat_models = {models.get(a) for a in agents}
    if len(seat_models) != 1 or None in seat_models:
        return None
    for a, b in combinations(agents, 2):
        pa, pb = (prompts.get(a) or "").strip(), (prompts.get(b) or "").strip()
        if pa == pb:
            continue
        if jaccard_bigrams(pa, pb) < DIVERSITY_PROMPT_SIMILARITY:
            return None
    model = next(iter(seat_models))
    return (
        f"low diversity: every seat ({', '.join(agents)}) runs {model} with near-identical "
        "prompts, so the debate is one voice several times; seat agents on different models "
        "or give them distinct roles"
    )


# ── recent context (which earlier rounds a seat no longer sees, and their digest) ──────────────
#
# For ``context: "recent"`` (docs/deliberation.md): a seat sees the opening round, a rolling
# digest of the rounds between (built from the position ledger, never a model call) and the last
# round in full. The server sends every assistant reply to the model (an ``ignored`` assistant
# part too), so the hidden rounds leave the request only through the roundtable plugin
# (docs/plugin.md): the machine writes the span into the prompt's marker and the digest into its
# text; without the plugin the daemon refuses ``context: "recent"``.

DIGEST_MAX_BYTES = 900
"""Bytes (UTF-8) of the recent-context digest at most; older label runs are dropped first."""


def rounds_to_hide(round_index: int) -> range:
    """1-based rounds whose replies are hidden when 0-indexed round ``round_index`` starts.

    Seats keep the opening round (1) and the last complete round (``round_index``, 1-based) in
    full; the rounds between are hidden, in whole rounds, so the visible conversation changes
    once per round, never per turn (a stable prefix for the server's prompt cache). Empty
    before round 4 (0-indexed 3).
    """
    return range(2, max(2, round_index))


def _run_text(rounds: list[int], label: str, confidence: float | None) -> str:
    span = f"r{rounds[0]}" if len(rounds) == 1 else f"r{rounds[0]}–{rounds[-1]}"
    conf = f" ({round(confidence * 10):g}/10)" if confidence is not None else ""
    return f"{span} “{label}”{conf}"


def digest(history: Sequence[HistoryEntry], rounds: Iterable[int], agents: Sequence[str]) -> str:
    """A rolling digest of the hidden ``rounds`` built from the position ledger (no model call).

    Args:
        history: the roundtable's history.
        rounds: the 1-based rounds to summarise (:func:`rounds_to_hide`).
        agents: the seats in speaking order.

    Returns:
        ``""`` when ``rounds`` is empty; else a header line and one line per seat with its label
        runs (``pm: r2–3 “modular monolith” (7/10) → r4 “split now”``; a turn without a label
        reads ``no position``, a failed one ``no reply``), within :data:`DIGEST_MAX_BYTES`
        bytes (older runs are dropped first, marked ``…``).
    """
    wanted = sorted(set(rounds))
    if not wanted:
        return ""
    span = f"{wanted[0]}" if len(wanted) == 1 else f"{wanted[0]}–{wanted[-1]}"
    header = (
        f"[Digest of round(s) {span}: those replies are hidden to keep the context short; "
        "the opening round and the last round are in full above]"
    )
    lines = [header]
    share = max(40, (DIGEST_MAX_BYTES - len(header.encode())) // max(1, len(agents)) - 1)
    for agent in agents:
        runs: list[tuple[list[int], str, float | None]] = []
        for rnd in wanted:
            e = round_turns(history, rnd).get(agent)
            if e is None:
                continue
            if not spoke(e):
                label, conf = "no reply", None
            else:
                p = position_of(e)
                label, conf = (p.label, p.confidence) if p is not None else ("no position", None)
            if runs and normalise_label(runs[-1][1]) == normalise_label(label):
                runs[-1][0].append(rnd)
                runs[-1] = (runs[-1][0], runs[-1][1], conf)
            else:
                runs.append(([rnd], label, conf))
        if not runs:
            continue
        texts = [_run_text(r, lbl, c) for r, lbl, c in runs]
        line = f"- {agent}: " + " → ".join(texts)
        while len(line.encode()) > share and len(texts) > 1:
            texts.pop(0)
            line = f"- {agent}: … → " + " → ".join(texts)
        if len(line.encode()) > share:
            line = line.encode()[: share - 3].decode(errors="ignore") + "…"
        lines.append(line)
    return "\n".join(lines)
