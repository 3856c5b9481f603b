"""Builders of the result's status, verdict and usage, and the verdict in words (docs/result.md).

Every builder is a pure function of a :class:`RoundtableState` (its history included): no I/O,
no clock. They fill the contract's models (:mod:`roundtabled.core.result_model`: what the
``roundtable`` tool returns, what ``GET /v1/roundtables/{ses}/result`` carries, the head of
``roundtabled export --format json`` and what the CLI renders); :mod:`roundtabled.core.result`
assembles them into the result.

Honesty rules (docs/result.md, "Honesty"):

- every failed, empty, truncated (finish ``length``), timed-out or cancelled turn is counted per
  seat and named in ``status.notes``; so are an early stop and why, an observer that failed, a
  verdict that had to be rebuilt from the ledger and a skipped observer;
- a seat that did not speak never counts toward agreement: it holds no label in the tally, an
  observer's ``unanimous`` is lowered and the confidence is capped at the share of seats that
  spoke;
- a position is what the seat's ``Position:`` line says; without one it is ``None`` and the notes
  say so — never guessed;
- a loop detected in the last round is reported as such, never as a stop before all rounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from roundtabled.core.changed import SeatLedger, compare
from roundtabled.core.deliberation import (
    convergence_note,
    current_notes,
    unenforceable_budget_note,
)
from roundtabled.core.observer_verdict import TRANSCRIPT_COPIED, is_repair
from roundtabled.core.positions import (
    Change,
    Position,
    changes,
    final_position,
    position_of,
    spoke,
)
from roundtabled.core.protocols import ballots
from roundtabled.core.protocols.tally import count
from roundtabled.core.result_model import (
    NATURAL_ENDS,
    UNKNOWN_CONFIDENCE_WEIGHT,
    AdaptiveReport,
    AgentUsage,
    AnswerRank,
    Consensus,
    CouncilReport,
    DegradedSeat,
    Deliberation,
    Disagreement,
    ObserverOutcome,
    ObserverStance,
    PositionChange,
    ProtocolCount,
    ProtocolReport,
    RankGiven,
    ResultUsage,
    SeatPosition,
    SeatStatus,
    StanceShare,
    Status,
    TallyItem,
    TurnKind,
    Verdict,
)
from roundtabled.core.stances import group, no_stance_reason, same_stance
from roundtabled.core.state import (
    EndReason,
    HistoryEntry,
    RoundtableState,
    UsageTotal,
    said_modes,
    tokens_in_out,
)

# ── per-seat status ─────────────────────────────────────────────────────────────────────────────


def classify(entry: HistoryEntry) -> TurnKind:
    """What one seat turn was. Order matters: a cut-off turn also has ``has_error``."""
    if entry.cut_off:
        return "cancelled" if "cancel" in (entry.error or "") else "timedOut"
    if entry.has_error:
        return "failed"
    if not entry.response.strip():
        return "empty"
    if entry.finish == "length":
        return "truncated"
    return "answered"


def _short(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _turn_note(entry: HistoryEntry, kind: TurnKind) -> str | None:
    r = f"round {entry.round}"
    partial = "; its partial text was kept" if entry.response.strip() else ""
    if kind == "failed":
        return f"{r}: failed ({_short(entry.error or 'error')})"
    if kind == "empty":
        tools = " (it only used tools)" if entry.tool_calls else ""
        return f"{r}: empty answer{tools}"
    if kind == "truncated":
        return f"{r}: answer cut at the output limit (finish length)"
    if kind == "timedOut":
        return f"{r}: {_short(entry.error or 'timed out')} and was skipped{partial}"
    if kind == "cancelled":
        return f"{r}: cut off by the cancel{partial}"
    pos = position_of(entry)
    if pos is None:
        return f"{r}: no Position line"
    if pos.only_line:
        return f"{r}: only the closing line, no argument"
    return None


def seat_statuses(state: RoundtableState) -> list[SeatStatus]:
    """One :class:`SeatStatus` per seat, in speaking order."""
    planned = state.total_rounds
    out: list[SeatStatus] = []
    for agent in state.agents:
        s = SeatStatus(agent=agent)
        for e in state.history:
            if e.kind != "turn" or e.agent != agent:
                continue
            kind = classify(e)
            s.turns += 1
            if kind == "timedOut":
                s.timed_out += 1
            elif kind == "answered":
                s.answered += 1
            else:
                setattr(s, kind, getattr(s, kind) + 1)
            if kind in ("answered", "truncated") and position_of(e) is None:
                s.no_position += 1
            note = _turn_note(e, kind)
            if note:
                s.notes.append(note)
        if not state.active:
            s.skipped = max(planned - s.turns, 0)
        out.append(s)
    return out


def _full_seats(state: RoundtableState) -> dict[int, set[str]]:
    """1-based round → the seats whose turn in it ended on its own (every outcome but a cut by
    the cancel)."""
    seats: dict[int, set[str]] = {}
    for e in state.history:
        if e.kind == "turn" and classify(e) != "cancelled":
            seats.setdefault(e.round, set()).add(e.agent)
    return seats


def rounds_completed(state: RoundtableState) -> int:
    """Rounds that ran in full: every seat's turn in it ended on its own (answered, failed,
    empty, truncated or timed out). A round with a turn cut off by the cancel, or with a seat
    whose turn never ran, is not counted, also when an extension ran later rounds: the count is
    the same in ``status``, the CLI, the export and the observer's prompt (docs/result.md)."""
    full = _full_seats(state)
    seats = set(state.agents)
    return sum(1 for r in range(1, state.total_rounds + 1) if seats <= full.get(r, set()))


def cut_round_notes(state: RoundtableState) -> list[str]:
    """One note per round that a seat spoke in but that did not run in full: which seats' turns
    never ran there (a cut-off turn has its own seat note), and, when later rounds ran (an
    extension of a stopped debate), that the debate went on after it. The round in flight of an
    active roundtable is not cut."""
    ran: dict[int, set[str]] = {}
    for e in state.seat_turns():
        ran.setdefault(e.round, set()).add(e.agent)
    last = max(ran, default=0)
    out: list[str] = []
    for r in sorted(ran):
        if state.active and r == last:
            continue
        missing = [a for a in state.agents if a not in ran[r]]
        if not missing:
            continue
        names = ", ".join(missing)
        turns = "turn" if len(missing) == 1 else "turns"
        later = f"; the debate went on from round {r + 1}" if r < last else ""
        out.append(f"round {r} did not run in full: {names}'s {turns} never ran{later}")
    return out


def _spoke_at_all(state: RoundtableState, agent: str) -> bool:
    return any(spoke(e) for e in state.history if e.kind == "turn" and e.agent == agent)


def silent_seats(state: RoundtableState) -> list[str]:
    """Seats that never gave an answer with text (failed, empty, timed out, or no turn)."""
    return [a for a in state.agents if not _spoke_at_all(state, a)]


# ── ledger, tally, consensus ────────────────────────────────────────────────────────────────────


def _change(c: Change) -> PositionChange:
    return PositionChange(round=c.round, from_=c.from_label, to=c.to_label, why=c.why)


def _topics(state: RoundtableState) -> list[str]:
    """Every topic text of the roundtable (its prompt, each extension's): a label copying one
    names no stance."""
    return [state.prompt, *(ext.prompt for ext in state.extensions)]


def no_stance(state: RoundtableState, label: str) -> str | None:
    """Why ``label`` names no stance in ``state`` (a seat's name, the word "position", a
    placeholder, a topic copied: :func:`roundtabled.core.stances.no_stance_reason`), else
    ``None``."""
    for topic in _topics(state):
        reason = no_stance_reason(label, seats=state.agents, topic=topic)
        if reason is not None:
            return reason
    return None


def _stated(state: RoundtableState, entry: HistoryEntry) -> Position | None:
    pos = position_of(entry)
    return pos if pos is not None and no_stance(state, pos.label) is None else None


def final_stated(state: RoundtableState, agent: str) -> tuple[int | None, Position | None, bool]:
    """``(round, position, carried)`` of ``agent``'s final position.

    The position of its last turn that spoke (:func:`roundtabled.core.positions.final_position`:
    ``None`` when that turn states none — an older label may have been abandoned), except after
    an ``extend``: a seat that stated no position in any turn of the last call keeps its last
    position from before that call, with that position's round (``carried`` true).
    """
    rnd, pos = final_position(state.history, agent)
    start = state.options.call_from_round  # 0-indexed first round of the last call
    if start <= 0 or rnd is None or rnd <= start:
        return rnd, pos, False
    if pos is not None and no_stance(state, pos.label) is None:
        return rnd, pos, False
    turns = [e for e in state.history if e.kind == "turn" and e.agent == agent and spoke(e)]
    if any(_stated(state, e) is not None for e in turns if e.round > start):
        return rnd, pos, False
    before = [e for e in turns if e.round <= start and _stated(state, e) is not None]
    if not before:
        return rnd, pos, False
    return before[-1].round, position_of(before[-1]), True


def positions(state: RoundtableState) -> list[SeatPosition]:
    """Each seat's final stated position (:func:`final_stated`), its stance among the seats'
    final labels (:func:`roundtabled.core.stances.group`) and its changes over all rounds
    (extensions too)."""
    finals = {agent: final_stated(state, agent) for agent in state.agents}

    def stated(label: str) -> bool:
        return no_stance(state, label) is None

    reasons = {
        a: no_stance(state, pos.label) if pos is not None else None
        for a, (_, pos, _) in finals.items()
    }
    names = group(
        pos.label for a, (_, pos, _) in finals.items() if pos is not None and reasons[a] is None
    )
    out: list[SeatPosition] = []
    for agent, (rnd, pos, carried) in finals.items():
        reason = reasons[agent]
        out.append(
            SeatPosition(
                agent=agent,
                label=pos.label if pos else None,
                position=(pos.position or None) if pos else None,
                confidence=pos.confidence if pos else None,
                round=rnd,
                stance=names.get(pos.label) if pos is not None and reason is None else None,
                no_stance=reason,
                carried=carried,
                changes=[_change(c) for c in changes(state.history, agent, stated)],
                side=state.options.sides.get(agent),
                cut_off=_cut_off(state, agent),
            )
        )
    return out


def unstated_words(position: dict[str, Any]) -> str:
    """Why a seat's entry of the result's ``verdict.positions`` (its JSON form) has no label, in
    words: ``no position stated`` (a turn that spoke stated none), ``cut off at the time limit,
    partial text kept`` / ``cut off by a cancel, …`` (its last turn was cut off: it spoke, its
    ``Position:`` line is not counted), else ``did not speak`` (docs/result.md, verdict)."""
    if position.get("round"):
        return "no position stated"
    cut = position.get("cutOff")
    if cut == "timedOut":
        return "cut off at the time limit, partial text kept"
    if cut == "cancelled":
        return "cut off by a cancel, partial text kept"
    return "did not speak"


def _cut_off(state: RoundtableState, agent: str) -> Literal["timedOut", "cancelled"] | None:
    """How ``agent``'s last seat turn was cut off (:func:`classify`) when its partial text was
    kept; ``None`` when it was not cut off or kept nothing (docs/result.md, verdict)."""
    turns = [e for e in state.history if e.kind == "turn" and e.agent == agent]
    if not turns or not turns[-1].cut_off or not turns[-1].response.strip():
        return None
    return "cancelled" if turns[-1].cut_by_cancel else "timedOut"


def left_opening(
    opening: Position | None, seat_changes: Sequence[PositionChange]
) -> PositionChange | None:
    """The change by which a seat left its ``opening`` stance, or ``None`` (no opening stated,
    no change): of ``seat_changes`` (oldest first, a seat's ``changes``)
    the last one from a label of the opening stance to one of another
    (:func:`roundtabled.core.stances.same_stance`) — a seat that came back to its opening and
    left it again left it then — else the first change. Not the seat's last change: a seat that
    moved twice (“go all in” in round 2, then “staged rollout first” in round 4) left its
    opening in round 2 (docs/result.md, "deliberation")."""
    if opening is None or not seat_changes:
        return None
    left = [
        c
        for c in seat_changes
        if same_stance(c.from_, opening.label) and not same_stance(c.to, opening.label)
    ]
    return left[-1] if left else seat_changes[0]


def deliberation_of(state: RoundtableState, seats: Sequence[SeatPosition]) -> Deliberation:
    """What deliberation changed (:func:`roundtabled.core.changed.compare`, docs/result.md,
    "deliberation"): each seat's opening position — its stated position of round 1 (the
    independent opening round when one ran), ``None`` when that turn did not speak, stated no
    ``Position:`` line or a label naming no stance — beside its final one (``seats``,
    :func:`positions`), with the round and reason of the change by which it left its opening
    stance (:func:`left_opening`)."""
    opening: dict[str, Position | None] = {}
    for e in state.history:
        if e.kind == "turn" and e.round == 1 and e.agent not in opening:
            opening[e.agent] = _stated(state, e)
    ledgers = []
    for s in seats:
        first = opening.get(s.agent)
        last = left_opening(first, s.changes)
        ledgers.append(
            SeatLedger(
                agent=s.agent,
                opening=first.label if first is not None else None,
                final=s.label if s.stance is not None else None,
                opening_confidence=first.confidence if first is not None else None,
                final_confidence=s.confidence if s.stance is not None else None,
                moved_round=last.round if last is not None else None,
                why=last.why if last is not None else None,
                side=s.side,
            )
        )
    rounds = max((e.round for e in state.seat_turns()), default=0)
    return compare(ledgers, rounds=rounds, opening=state.options.opening)


def counted(seats: Sequence[SeatPosition]) -> list[SeatPosition]:
    """The seats whose positions count toward the tally and the consensus: the free ones. A
    side-bound seat argues what it was assigned (docs/result.md, "Sides"): shown, not counted."""
    return [s for s in seats if s.side is None]


def tally(seats: Sequence[SeatPosition]) -> list[TallyItem]:
    """Final positions grouped by stance, heaviest first. Weight = sum of the confidences
    (``UNKNOWN_CONFIDENCE_WEIGHT`` for a label without one); a seat without a stance (silent, no
    ``Position:`` line, or a label that names no stance) is in no group. A seat given without
    its ``stance`` (and without a ``noStance`` reason) is grouped here among such seats."""
    names = group(s.label for s in seats if s.stance is None and s.no_stance is None and s.label)
    groups: dict[str, TallyItem] = {}
    for s in seats:
        if s.label is None or s.no_stance is not None:
            continue
        key = s.stance if s.stance is not None else names.get(s.label)
        if key is None:
            continue
        w = s.confidence if s.confidence is not None else UNKNOWN_CONFIDENCE_WEIGHT
        item = groups.get(key)
        if item is None:
            groups[key] = TallyItem(
                label=key, seats=[s.agent], weight=round(w, 3), labels=[s.label]
            )
        else:
            item.seats.append(s.agent)
            item.weight = round(item.weight + w, 3)
            if s.label not in item.labels:
                item.labels.append(s.label)
    return sorted(groups.values(), key=lambda t: (-len(t.seats), -t.weight, t.label.casefold()))


def counted_tally(
    state: RoundtableState, counted: Iterable[str] | None = None
) -> tuple[list[TallyItem], Consensus]:
    """The tally and its consensus over the ``counted`` seats only (``None``: every seat).

    Stances are grouped over every seat's final label (:func:`positions`), so a stance has the
    same name whichever seats are counted; the consensus is taken over the counted seats (a
    counted seat without a stance counts against every group, :func:`tally_consensus`). For a
    caller that leaves some seats out of the count (e.g. seats bound to a side).
    """
    keep = set(state.agents if counted is None else counted)
    seats = [p for p in positions(state) if p.agent in keep]
    items = tally(seats)
    return items, tally_consensus(items, len(seats))


def tally_consensus(items: Sequence[TallyItem], n_seats: int) -> Consensus:
    """The daemon's own consensus over ``n_seats`` seats (a seat without a label counts against
    every group): ``unanimous`` all seats one label; ``majority`` one label held by more than
    half; ``none`` every stated label different; ``split`` otherwise; ``unknown`` fewer than two
    seats stated a label (and no majority)."""
    if not items:
        return "unknown"
    top = len(items[0].seats)
    stated = sum(len(t.seats) for t in items)
    if top == n_seats:
        return "unanimous"
    if top * 2 > n_seats:
        return "majority"
    if stated < 2:
        return "unknown"
    if top == 1:
        return "none"
    return "split"


def confidence_cap(state: RoundtableState) -> float:
    """The highest confidence a verdict may claim: the share of seats that spoke."""
    n = len(state.agents)
    return round((n - len(silent_seats(state))) / n, 3) if n else 0.0


def unbacked_by_count(claim: str, free: int, stated: int, sided: int = 0) -> str | None:
    """Why ``stated`` of ``free`` counted seats (``sided`` more bound to a side, never counted)
    do not back an observer's consensus ``claim``, in words, or ``None`` when they do
    (docs/result.md, "degraded"). Only ``unanimous`` and ``majority`` claim seats: ``unanimous``
    needs every free seat to have stated a position (a stance), ``majority`` more than half of
    them, and each at least one. Whether the stated stances agree is not this rule's (the tally
    and its note say that)."""
    if claim not in ("unanimous", "majority"):
        return None
    need = free if claim == "unanimous" else free // 2 + 1
    if free and stated >= max(need, 1):
        return None
    if not free:
        return "every seat argued an assigned side, and such a seat is never counted"
    if not stated:
        return "no seat stated a position"
    of = f"{free} free seats" if sided else f"{free} seats"
    return f"only {stated} of {of} stated a position"


def unbacked_claim(claim: str, seats: Sequence[SeatPosition]) -> str | None:
    """:func:`unbacked_by_count` for the final positions ``seats`` (:func:`positions`): a seat
    bound to a side never counts (:func:`counted`), a seat without a stance stated none."""
    free = counted(seats)
    stated = sum(1 for s in free if s.stance is not None)
    return unbacked_by_count(claim, len(free), stated, len(seats) - len(free))


def unbacked_consensus_note(state: RoundtableState, seats: Sequence[SeatPosition]) -> str | None:
    """The degradation of a verdict whose observer claimed a consensus the seats' stated
    positions do not back (:func:`unbacked_claim`): "no seat stated a position: the observer's
    'unanimous' is its own reading, …"; ``None`` otherwise (no usable observer verdict, or a
    claim they back). A degradation: the result's consensus and confidence are then not the
    observer's (:func:`build_verdict`), and the header says why before the observer's text."""
    data = state.verdict.data
    claim = data.get("consensus") if data is not None else None
    why = unbacked_claim(_silent_lowered(state, claim), seats) if claim else None
    if why is None:
        return None
    free = counted(seats)
    backed = tally_consensus(tally(free), len(free))
    return (
        f"{why}: the observer's '{claim}' is its own reading, not the seats' count — consensus "
        f"by their stated positions: {backed}, confidence unknown"
    )


def _silent_lowered(state: RoundtableState, claim: Any) -> Consensus:
    """An observer's consensus ``claim`` as the daemon counts it when a seat never spoke:
    ``unanimous`` is lowered to ``majority`` when more than half spoke, else ``unknown`` (a seat
    that did not speak never agrees); any other known claim as it is."""
    silent = silent_seats(state)
    n = len(state.agents)
    if claim == "unanimous" and silent:
        return "majority" if (n - len(silent)) * 2 > n else "unknown"
    return claim if claim in ("unanimous", "majority", "split", "none") else "unknown"


def ledger_verdict(state: RoundtableState) -> Verdict:
    """The verdict built from the position ledger alone (the observer's was unusable, failed, or
    never ran): consensus from the tally, decision = the label held unanimously or by a
    majority, confidence = that group's weight over all counted seats (capped, see
    :func:`confidence_cap`), unknown (``None``) when a seat of that group stated no confidence:
    the tally's stand-in weight for such a seat orders the groups, it is no measurement
    (docs/result.md). Only free seats are counted (:func:`counted`)."""
    seats = positions(state)
    free = counted(seats)
    items = tally(free)
    cons = tally_consensus(items, len(free))
    decision = _ledger_decision(items, cons)
    stated = bool(items) and all(
        s.confidence is not None for s in free if s.agent in items[0].seats
    )
    conf = round(items[0].weight / len(free), 3) if stated and free else None
    agreements: list[str] = []
    disagreements: list[Disagreement] = []
    if items and cons in ("unanimous", "majority"):
        agreements.append(f"{', '.join(items[0].seats)} hold “{items[0].label}”")
        rest = items[1:]
    else:
        rest = items if len(items) > 1 else []
    for t in rest:
        views = [s.position for s in seats if s.agent in t.seats and s.position]
        disagreements.append(
            Disagreement(
                point="final position",
                minority=list(t.seats),
                view=t.label + (f" — {views[0]}" if views else ""),
            )
        )
    return Verdict(
        decision=decision,
        confidence=None if conf is None else min(conf, confidence_cap(state)),
        consensus=cons,
        tally_consensus=cons,
        source="ledger",
        positions=seats,
        tally=items,
        agreements=agreements,
        disagreements=disagreements,
        deliberation=deliberation_of(state, seats),
        protocol=protocol_report(state),
    )


def protocol_report(state: RoundtableState) -> ProtocolReport:
    """Which protocol ran and what it counted (docs/deliberation.md, "Protocols"): for ``vote``
    and ``adaptive`` the count of the independent opening (:func:`roundtabled.core.protocols.
    tally.count`: by stance, confidence-weighted only when every seat stated a confidence, the
    seats that cast no ballot named), for ``adaptive`` its decision at the opening."""
    name = state.options.protocol
    if name == "debate":
        return ProtocolReport()
    opening = [e for e in state.seat_turns() if e.round == 1]
    counted_ = count(ballots(state, opening)) if opening else None
    tally_ = None
    if counted_ is not None:
        tally_ = ProtocolCount(
            stances=[
                StanceShare(
                    stance=s.stance,
                    seats=list(s.seats),
                    labels=list(s.labels),
                    weight=s.weight,
                    share=s.share,
                )
                for s in counted_.stances
            ],
            weighted=counted_.weighted,
            leader=counted_.leader,
            leader_share=counted_.leader_share,
            degraded=[DegradedSeat(agent=a, why=w) for a, w in counted_.degraded],
        )
    adaptive = None
    if state.adaptive is not None:
        adaptive = AdaptiveReport.model_validate(state.adaptive.model_dump())
    council_ = None
    if name == "council":
        from roundtabled.core.protocols import council  # its prompt needs prompts → verdict

        ranked, degraded = council.rankings(state)
        council_ = CouncilReport(
            ran=state.second_round is not None,
            aggregate=[
                AnswerRank(
                    author=r.author,
                    mean_rank=r.mean,
                    ranks=[RankGiven(by=b, rank=k, reason=w) for b, k, w in r.ranks],
                )
                for r in ranked
            ],
            degraded=[DegradedSeat(agent=a, why=w) for a, w in degraded],
        )
    return ProtocolReport(name=name, count=tally_, adaptive=adaptive, council=council_)


def protocol_line(verdict: dict[str, Any]) -> str | None:
    """The protocol in words for the verdict's text, the CLI and the state card (``None`` for a
    debate, the default, which the rest of the verdict already describes)::

        Protocol: vote — “keep the monolith” 2 of 3 seats (confidence-weighted share 0.71);
        degraded: dev (failed: …)
    """
    p = verdict.get("protocol") or {}
    name = p.get("name") or "debate"
    if name == "debate":
        return None
    parts: list[str] = []
    c = p.get("count")
    if c:
        stances = c.get("stances") or []
        n = sum(len(s.get("seats") or []) for s in stances) + len(c.get("degraded") or [])
        shown = []
        for s in stances[:3]:
            share = s.get("share")
            weight = (
                f"confidence-weighted share {share:.2f}"
                if isinstance(share, int | float)
                else "share unknown"
            )
            shown.append(f"“{s.get('stance')}” {len(s.get('seats') or [])} of {n} ({weight})")
        if len(stances) > 3:
            shown.append(f"{len(stances) - 3} more")
        parts.append(", ".join(shown) if shown else "no seat stated a stance")
        if not c.get("weighted") and stances:
            parts.append("unweighted: not every seat stated a confidence")
        if c.get("degraded"):
            parts.append(
                "degraded: " + ", ".join(f"{d['agent']} ({d['why']})" for d in c["degraded"])
            )
    a = p.get("adaptive")
    if a:
        parts.append(str(a.get("why")))
    c = p.get("council")
    if c:
        ranked = [
            f"{r['author']} {r['meanRank']:g}"
            for r in c.get("aggregate") or []
            if isinstance(r.get("meanRank"), int | float)
        ]
        if ranked:
            parts.append("aggregate rank (mean, 1 = best): " + ", ".join(ranked))
        elif not c.get("ran"):
            parts.append("no ranking round (fewer than three answers)")
        else:
            parts.append("no answer was ranked")
        if c.get("degraded"):
            parts.append(
                "rankings not counted: "
                + ", ".join(f"{d['agent']} ({d['why']})" for d in c["degraded"])
            )
    return f"Protocol: {name} — " + "; ".join(parts) if parts else f"Protocol: {name}"


def _ledger_decision(items: Sequence[TallyItem], cons: Consensus) -> str | None:
    """The decision the seats' positions give: the stance held unanimously or by a majority."""
    return items[0].label if items and cons in ("unanimous", "majority") else None


def decision_of(state: RoundtableState, seats: Sequence[SeatPosition]) -> str | None:
    """The verdict's decision as :func:`build_verdict` gives it, for the final ``seats``
    (:func:`positions`): the observer's when its verdict was usable (its ``null`` included),
    else the one the free seats' positions give (:func:`ledger_verdict`)."""
    data = state.verdict.data
    if data is not None:
        decision = data.get("decision")
        return decision if isinstance(decision, str) and decision.strip() else None
    free = counted(seats)
    items = tally(free)
    return _ledger_decision(items, tally_consensus(items, len(free)))


_RANK: dict[str, int] = {"unanimous": 3, "majority": 2, "split": 1, "none": 1, "unknown": 0}


def build_verdict(state: RoundtableState) -> tuple[Verdict, list[str]]:
    """The verdict and the notes it adds to ``status.notes``.

    The observer's validated verdict (``state.verdict.data``) gives decision, consensus,
    confidence and the lists; the daemon adds positions and the tally. Where the two disagree
    both are kept and a note says so; an observer's ``unanimous`` with silent seats is lowered
    (a seat that did not speak never agrees) and the confidence is capped. A consensus the
    seats' stated positions do not back (:func:`unbacked_claim`) is not taken: ``consensus`` is
    the tally's, ``observerConsensus`` the claim, the confidence unknown (``None``), and the
    status is degraded (:func:`unbacked_consensus_note`, docs/result.md).
    """
    notes: list[str] = []
    base = ledger_verdict(state)
    data = state.verdict.data
    if data is None:
        return base, notes
    silent = silent_seats(state)
    n = len(state.agents)
    claimed: Consensus = data.get("consensus") or "unknown"
    consensus = claimed
    conf = data.get("confidence")
    edits = [ObserverStance.model_validate(e) for e in data.get("stances") or []]
    if silent and consensus == "unanimous":
        consensus = _silent_lowered(state, consensus)
        notes.append(
            f"the observer called the panel unanimous, but {', '.join(silent)} did not speak: "
            f"counted as {consensus}"
        )
    unbacked = unbacked_claim(consensus, base.positions) is not None
    if unbacked:
        # The observer's own reading, not a count: the seats' count stands, and its confidence
        # is not shown as if it were measured (said by the status: unbacked_consensus_note).
        consensus, conf = base.tally_consensus, None
    if _RANK.get(consensus, 0) != _RANK.get(base.tally_consensus, 0) or (
        consensus in ("split", "none") and base.tally_consensus not in ("split", "none")
    ):
        notes.append(
            f"the observer's verdict ({consensus}) and the tally of stated positions "
            f"({base.tally_consensus}) disagree: both are shown"
        )
    for e in edits:
        named = " and ".join(f"“{x}”" for x in e.stances)
        verb = "merge" if e.action == "merge" else "split"
        why = f" ({e.why})" if e.why else ""
        notes.append(
            f"the observer would {verb} the stances {named}{why}: the tally keeps the daemon's "
            "grouping; both are shown"
        )
    cap = confidence_cap(state)
    if isinstance(conf, int | float) and silent and conf > cap:
        notes.append(
            f"confidence capped at {cap:g}: {len(silent)} of {n} seats gave no usable answer"
        )
        conf = cap
    verdict = base.model_copy(
        update={
            "decision": data.get("decision"),
            "confidence": conf if isinstance(conf, int | float) else None,
            "consensus": consensus,
            "observer_consensus": claimed if unbacked else None,
            "source": "observer",
            "agreements": list(data.get("agreements") or []),
            "disagreements": [
                Disagreement.model_validate(d) for d in data.get("disagreements") or []
            ],
            "open_questions": list(data.get("openQuestions") or []),
            "next_steps": list(data.get("nextSteps") or []),
            "observer_stances": edits,
        }
    )
    return verdict, notes


# ── status notes (the words of the honesty header) ──────────────────────────────────────────────


def _rounds(entries: Sequence[HistoryEntry]) -> str:
    nums = sorted({e.round for e in entries})
    word = "round" if len(nums) == 1 else "rounds"
    return f"{word} {', '.join(str(r) for r in nums)}"


def _seat_notes(state: RoundtableState) -> list[str]:
    out: list[str] = []
    for agent in state.agents:
        turns = [e for e in state.history if e.kind == "turn" and e.agent == agent]
        if not turns:
            if not state.active:
                out.append(f"{agent} never finished a turn (the debate stopped first)")
            continue
        by: dict[TurnKind, list[HistoryEntry]] = {}
        for e in turns:
            by.setdefault(classify(e), []).append(e)
        if not any(spoke(e) for e in turns):
            out.append(f"{agent} gave no usable answer in any round")
        if "failed" in by:
            err = _short(by["failed"][-1].error or "error", 120)
            out.append(f"{agent} failed in {_rounds(by['failed'])} ({err})")
        if "empty" in by:
            out.append(f"{agent} gave an empty answer in {_rounds(by['empty'])}")
        if "truncated" in by:
            out.append(
                f"{agent}'s answer was cut at the output limit (truncated) in "
                f"{_rounds(by['truncated'])}"
            )
        if "timedOut" in by:
            out.append(f"{agent} timed out and was skipped in {_rounds(by['timedOut'])}")
        if "cancelled" in by:
            out.append(f"{agent} was cut off by the cancel in {_rounds(by['cancelled'])}")
    return out


def _last_turn(state: RoundtableState) -> HistoryEntry | None:
    turns = state.seat_turns()
    return turns[-1] if turns else None


def stop_note(state: RoundtableState) -> str | None:
    """The sentence saying how and when the debate stopped, ``None`` for a full completed run."""
    reason = state.end_reason
    planned = state.total_rounds
    done = rounds_completed(state)
    last = _last_turn(state)
    if last is None:
        where = f"before round 1 of {planned}"
    elif classify(last) == "cancelled":
        where = f"in round {last.round} of {planned} (while {last.agent} spoke)"
    else:
        where = f"in round {last.round} of {planned} (after {last.agent}'s turn)"
    if reason is None or reason == EndReason.COMPLETED:
        return None
    if reason == EndReason.REPETITION:
        if done >= planned:
            return (
                f"a loop (repetition detected) in the last round ({planned} of {planned}): "
                "all rounds ran, the agents ended at an impasse"
            )
        return (
            f"the debate stopped {where}: the agents started repeating themselves "
            "(repetition detected)"
        )
    if reason == EndReason.CONVERGED:
        return (
            f"the panel converged after round {done} of {planned}: "
            "the remaining rounds were not needed"
        )
    if reason == EndReason.ALL_FAILED:
        rnd = last.round if last is not None else 1
        return f"the debate stopped {where}: every agent failed in round {rnd}"
    if reason == EndReason.CANCELLED:
        why = next(
            (
                e[len("cancelled: ") :]
                for e in reversed(state.errors)
                if e.startswith("cancelled: ")
            ),
            "",
        )
        return f"the roundtable was cancelled {where}" + (f" ({why})" if why else "")
    if reason == EndReason.BUDGET:
        return f"the debate stopped {where}: the budget was reached"
    if reason == EndReason.TIMEOUT:
        return f"the roundtable ran out of time {where}"
    if reason == EndReason.SESSION_DELETED:
        return f"the roundtable session was closed {where}"
    if reason == EndReason.PARENT_DELETED:
        return f"the main session was closed {where}"
    if reason == EndReason.FAILED:
        err = _short(state.errors[-1], 160) if state.errors else "see the daemon's log"
        return f"the roundtable failed {where}: {err}"
    if reason == EndReason.OBSERVER_FAILED:
        return None  # said by the observer note
    return f"the debate ended {where}: {reason.value}"


def observer_outcome(state: RoundtableState) -> ObserverOutcome:
    """How the observer's part went (see docs/result.md)."""
    obs = _observer_turns(state)
    if state.end_reason == EndReason.OBSERVER_FAILED:
        return "failed"
    if state.end_reason == EndReason.CANCELLED and not state.options.cancel_summarize:
        return "cancelled"
    if not obs:
        if state.active:
            return "pending"
        return "skipped"
    if obs[-1].has_error or not obs[-1].response.strip():
        return "failed"
    if state.verdict.fallback:
        return "fallback"
    if state.verdict.repair_asked:
        return "repaired"
    return "ok"


def _observer_turns(state: RoundtableState) -> list[HistoryEntry]:
    """The observer's consolidation turns (not its repair replies), oldest first."""
    return [e for e in state.history if e.kind == "observer" and not is_repair(e)]


def observer_truncated(state: RoundtableState) -> list[HistoryEntry]:
    """The observer's turns (its reply and its verdict repair reply) cut at the output limit
    (the last step's finish ``length``), oldest first; a turn the server then called failed
    (OpenCode 2.x may end such an execution failed) was cut there all the same, so it counts
    too; one cut off by the time limit or a cancel does not (docs/result.md,
    ``observerTruncated``)."""
    return [
        e for e in state.history if e.kind == "observer" and e.finish == "length" and not e.cut_off
    ]


def _observer_cut_notes(state: RoundtableState) -> list[str]:
    """One degradation per observer turn cut at the output limit, in the seats' words
    (docs/result.md, "degraded"): a summary or a verdict cut mid-way is not what was asked."""
    return [
        "the observer's verdict repair reply was cut at the output limit (truncated)"
        if is_repair(e)
        else "the observer's reply was cut at the output limit (truncated)"
        for e in observer_truncated(state)
    ]


def _observer_notes(state: RoundtableState, outcome: ObserverOutcome) -> list[str]:
    obs = _observer_turns(state)
    if outcome == "failed":
        err = (obs[-1].error if obs and obs[-1].error else None) or "empty reply"
        return [
            f"the observer failed ({_short(err, 120)}): the summary is a digest of each seat's "
            "last position, not a consolidation"
        ]
    if outcome == "skipped":
        if silent_seats(state) == list(state.agents):
            return ["the observer was not asked: no seat gave a usable answer"]
        return ["the observer did not run: the summary is a digest of each seat's last position"]
    if outcome == "cancelled":
        return ["the observer did not run (cancelled without a summary)"]
    if outcome == "fallback" and state.verdict.error == TRANSCRIPT_COPIED:
        return [f"{TRANSCRIPT_COPIED}: the summary is a digest of each seat's last position"]
    return []


_NO_DECISION_BY: dict[ObserverOutcome, str] = {
    "fallback": "gave no usable verdict",
    "failed": "failed",
    "skipped": "did not run",
}
"""What the observer did, in the no-decision note, when it gave no verdict to read. Not after a
cancel without a summary: no decision is what the caller asked for, and the cancel's own notes
say so."""


def no_decision_note(
    state: RoundtableState, seats: Sequence[SeatPosition], outcome: ObserverOutcome
) -> str | None:
    """The degradation of a finished roundtable that decided nothing (docs/result.md,
    status): no seat's final position (``seats``, :func:`positions`) names a stance and the
    verdict has no decision, neither the observer's nor the seats'; ``None`` otherwise. A debate
    in which the seats stated positions and disagreed is a split, not this; one in which no
    seat spoke at all has its own notes (every seat's, the observer's), and so has one cancelled
    without a summary (``outcome`` ``"cancelled"``: deciding nothing is what was asked)."""
    if state.active or outcome == "cancelled" or any(s.stance is not None for s in seats):
        return None
    if len(silent_seats(state)) == len(state.agents) or decision_of(state, seats) is not None:
        return None
    if state.verdict.data is not None:
        by = "named no decision"
    else:
        by = _NO_DECISION_BY.get(outcome, "gave no verdict")
    return (
        f"no seat stated a position in its last answer and the observer {by}: there is no decision"
    )


def _verdict_notes(state: RoundtableState, outcome: ObserverOutcome) -> list[str]:
    """Notes about the observer's verdict JSON (said, but not degradations: the debate ran)."""
    built = "decision, consensus and confidence are built from the seats' stated positions"
    if outcome == "fallback" and not state.verdict.repair_asked:
        return [f"the observer gave no verdict JSON: {built}"]
    if outcome == "fallback":
        err = _short(state.verdict.error or "invalid", 160)
        return [
            f"the observer's verdict was unusable ({err}) even after one repair request: {built}"
        ]
    if outcome == "repaired":
        return ["the observer's verdict JSON was invalid and was corrected by one repair request"]
    return []


def _position_notes(state: RoundtableState, seats: Sequence[SeatPosition]) -> list[str]:
    out = []
    start = state.options.call_from_round
    for s in seats:
        if s.carried:
            out.append(
                f"{s.agent} stated no position in the extension (from round {start + 1}): its "
                f"position from round {s.round} (“{s.label}”) is kept"
            )
        elif s.label is not None and s.no_stance is not None:
            out.append(
                f"{s.agent}'s label in its last answer (round {s.round}), “{s.label}”, is "
                f"{s.no_stance}, not a stance: counted as no position"
            )
        elif s.label is None and s.round is not None:
            out.append(
                f"{s.agent} stated no Position line in its last answer (round {s.round}): its "
                "position is unknown, not guessed"
            )
        for c in s.changes:
            if c.why is None:
                out.append(
                    f"{s.agent} changed its position in round {c.round} (from “{c.from_}” to "
                    f"“{c.to}”) without giving a reason"
                )
    for e in state.history:
        pos = position_of(e) if e.kind == "turn" else None
        if pos is not None and pos.lines > 1:
            out.append(
                f"{e.agent} wrote {pos.lines} Position lines in round {e.round}: the last one "
                "counts"
            )
    return out


def _span(rounds: Sequence[int]) -> str:
    """``round 3``, ``rounds 3–4`` (a run), ``rounds 1, 3`` (sorted, distinct ``rounds``)."""
    if len(rounds) == 1:
        return f"round {rounds[0]}"
    if rounds == list(range(rounds[0], rounds[-1] + 1)):
        return f"rounds {rounds[0]}–{rounds[-1]}"
    return f"rounds {', '.join(str(r) for r in rounds)}"


def extension_note(state: RoundtableState, seats: Sequence[SeatPosition]) -> str | None:
    """The note of a finished ``extend`` in which no seat stated a position (docs/result.md,
    verdict): the positions, and the decision on them, stand on rounds before it; ``None`` when
    some seat stated one there, when no turn of the extension ran, or when no seat ever stated
    one (:func:`no_decision_note` says that). A note, not a degradation: the extension's turns
    that went wrong have their own notes."""
    start = state.options.call_from_round  # 0-indexed first round of the last call
    if start <= 0 or state.active:
        return None
    turns = [e for e in state.seat_turns() if e.round > start]
    if not turns or any(_stated(state, e) is not None for e in turns):
        return None
    kept = sorted({s.round for s in seats if s.stance is not None and s.round is not None})
    if not kept:
        return None
    extension = _span(list(range(start + 1, max(e.round for e in turns) + 1)))
    on = f"round {kept[0]}'s positions" if len(kept) == 1 else f"the positions of {_span(kept)}"
    what = "the decision" if decision_of(state, seats) is not None else "the verdict"
    return f"no seat stated a position in the extension ({extension}): {what} stands on {on}"


def _side_notes(seats: Sequence[SeatPosition]) -> list[str]:
    return [
        f"{s.agent} argued an assigned side ({s.side}): its position is shown but not counted "
        "toward the consensus or convergence"
        for s in seats
        if s.side is not None
    ]


def running_notes(state: RoundtableState) -> list[str]:
    """What a caller must hear while the roundtable still runs (the live status's ``notes`` and
    the progress feed): a token or USD budget that cannot be enforced because the server reports
    no usage, said from the first answered turn that reported none."""
    note = unenforceable_budget_note(state)
    return [] if note is None else [note]


def build_status(state: RoundtableState, verdict_notes: Sequence[str] = ()) -> Status:
    """The ``status`` block: counts per seat, rounds, end reason and the notes in order:
    seats, stop, observer, verdict, positions, other rules' notes (``state.notes`` of the
    current call, :func:`roundtabled.core.deliberation.current_notes`)."""
    seats = seat_statuses(state)
    outcome = observer_outcome(state)
    degradation = _seat_notes(state) + cut_round_notes(state)
    info: list[str] = []
    stop = stop_note(state)
    if stop:
        # A converged stop is the debate working as asked: said, but not a degradation.
        (info if state.end_reason == EndReason.CONVERGED else degradation).append(stop)
    degradation += _observer_notes(state, outcome) + _observer_cut_notes(state)
    seated = positions(state)
    if (unbacked := unbacked_consensus_note(state, seated)) is not None:
        # A consensus no seat stated is no result (docs/result.md, "degraded").
        degradation.append(unbacked)
    if (undecided := no_decision_note(state, seated, outcome)) is not None:
        # Nothing to act on: neither the observer nor the seats' positions gave a decision.
        degradation.append(undecided)
    info += _verdict_notes(state, outcome)
    if (unjudged := convergence_note(state)) is not None:
        info.append(unjudged)
    if (unenforced := unenforceable_budget_note(state)) is not None:
        degradation.append(unenforced)
    degraded = bool(degradation) or (
        state.end_reason is not None and state.end_reason not in NATURAL_ENDS
    )
    notes = [
        *degradation,
        *info,
        *verdict_notes,
        *_side_notes(seated),
        # Said once for the whole extension, before each seat's kept position.
        *filter(None, [extension_note(state, seated)]),
        *_position_notes(state, seated),
        *said_modes(current_notes(state)),
    ]
    return Status(
        end_reason=state.end_reason.value if state.end_reason else "running",
        degraded=degraded,
        rounds_completed=rounds_completed(state),
        rounds_planned=state.total_rounds,
        observer=outcome,
        observer_truncated=len(observer_truncated(state)),
        seats=seats,
        notes=list(dict.fromkeys(notes)),
    )


def build_usage(state: RoundtableState) -> ResultUsage:
    """Totals per agent name and overall (a person's messages in S2 are not counted); a total
    whose turns recorded nothing while some answered is ``null`` in each number, and every
    total counts its ``unreportedTurns`` (docs/result.md, usage)."""
    per: dict[str, list[HistoryEntry]] = {}
    counted = [e for e in state.history if e.kind != "user"]
    for e in counted:
        per.setdefault(e.agent, []).append(e)
    total = _agent_usage(counted, state.unpriced)
    return ResultUsage(
        input=total.input,
        output=total.output,
        cost=total.cost,
        unreported_turns=total.unreported_turns,
        per_agent={name: _agent_usage(entries, state.unpriced) for name, entries in per.items()},
    )


def _agent_usage(entries: Sequence[HistoryEntry], unpriced: Sequence[str]) -> AgentUsage:
    """The contract's form of :class:`UsageTotal` (input includes cached prompt tokens, output
    includes reasoning: :func:`roundtabled.core.state.tokens_in_out`); the cost is
    ``None`` when a turn's model lists no price (``unpriced``)."""
    total = UsageTotal()
    for e in entries:
        total = total.plus(e, unpriced)
    if total.unknown:
        return AgentUsage(input=None, output=None, cost=None, unreported_turns=total.unreported)
    u = total.usage
    tokens_in, tokens_out = tokens_in_out(u.dump())
    return AgentUsage(
        input=tokens_in,
        output=tokens_out,
        cost=None if total.cost_unknown else round(u.cost, 8),
        unreported_turns=total.unreported,
    )


def note_key(note: str) -> str:
    """What identifies a running note across turns: its clause before the first colon (the
    counts after it grow turn by turn), so a caller says each note once."""
    return note.split(":")[0]


# ── the verdict in words (the CLI and the export say it alike) ──────────────────────────────────

TALLY_WORDS = {
    "unanimous": "unanimous (every seat holds one label)",
    "majority": "majority (one label held by more than half of the seats)",
    "split": "split (no label held by more than half of the seats)",
    "none": "split (no two agree)",
    "unknown": "unknown (fewer than two seats stated a position)",
}
"""``tallyConsensus`` in words (docs/result.md, verdict): its ``none`` means every stated label
differs, not that no position was stated."""


def consensus_text(verdict: dict[str, Any]) -> str:
    """The consensus of ``verdict`` (the contract's JSON form, as the control API returns it) in
    words, without the ``consensus:`` label: whose count it is (the observer or the seats' stated
    positions) and, when the observer and the tally differ, both with the disagreement spelled
    out (docs/result.md, verdict)."""
    cons = str(verdict.get("consensus", "unknown"))
    tally = verdict.get("tallyConsensus")
    claim = verdict.get("observerConsensus")
    if claim:
        seats = [p for p in verdict.get("positions") or [] if isinstance(p, dict)]
        free = [p for p in seats if not p.get("side")]
        stated = sum(1 for p in free if p.get("stance"))
        why = unbacked_by_count(str(claim), len(free), stated, len(seats) - len(free))
        why = why or "the seats' stated positions do not back it"
        return (
            f"{why}: the observer's '{claim}' is its own reading; by the stated positions: {cons}"
        )
    if verdict.get("source") == "ledger":
        return f"{TALLY_WORDS.get(cons, cons)}, by the seats' own stated positions"
    if not tally or tally == cons:
        return cons
    words = TALLY_WORDS.get(str(tally), str(tally))
    ranks = {"unanimous": 3, "majority": 2, "split": 1, "none": 0}
    if ranks.get(str(tally), 9) < ranks.get(cons, -1):
        return f"{cons} per the observer — but the seats' stated positions disagree: {words}"
    return f"{cons} per the observer — but by the seats' stated positions: {words}"


def kept_rounds(verdict: dict[str, Any]) -> str:
    """``round 2`` (``rounds 1, 2``) when every counted seat's position with a stance was kept
    from before an extension (``carried``, docs/result.md): the consensus then stands on those
    rounds, not on the extension; '' otherwise."""
    held = [
        p
        for p in verdict.get("positions") or []
        if isinstance(p, dict) and p.get("stance") and not p.get("side")
    ]
    if not held or not all(p.get("carried") for p in held):
        return ""
    rounds = sorted({int(p["round"]) for p in held if isinstance(p.get("round"), int)})
    if not rounds:
        return ""
    return f"round {rounds[0]}" if len(rounds) == 1 else f"rounds {', '.join(map(str, rounds))}"


def consensus_line(verdict: dict[str, Any]) -> str:
    """``consensus: … · confidence …`` of ``verdict`` (the contract's JSON form): the CLI's
    verdict line and the state card say it alike (docs/result.md, verdict). A claim the stated
    positions do not back reads as such with the confidence unknown; a consensus that stands on
    positions kept from before an extension says so."""
    line = f"consensus: {consensus_text(verdict)}"
    if kept := kept_rounds(verdict):
        line += f" — on positions kept from {kept}: the extension stated none"
    conf = verdict.get("confidence")
    if isinstance(conf, int | float):
        line += f" · confidence {conf:.2f}"
    elif verdict.get("observerConsensus"):
        line += " · confidence unknown"  # the observer's number is no measurement then
    return line


MOVES_SHOWN = 3
"""Moved seats named in the deliberation line (the rest are counted: the data has them all)."""


def _names_and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _majority_words(
    m: dict[str, Any],
    items: Sequence[dict[str, Any]],
    weights: bool,
    order: Sequence[str] = (),
) -> str:
    """One tally's majority (the contract's ``Majority``) in words, with its confidence-weighted
    share when known and ``weights``. A tie names its stances in speaking order (of each stance,
    its first seat in ``order``, the seats in speaking order)."""
    kind, seats, n = m.get("kind"), m.get("seats"), m.get("counted")
    if kind == "majority":
        share = m.get("weightedShare")
        weighted = f", weighted {share:.2f}" if weights and isinstance(share, int | float) else ""
        return f"“{m.get('stance')}” ({seats} of {n}{weighted})"
    if kind == "tied":
        place = {a: i for i, a in enumerate(order)}

        def first_seat(t: dict[str, Any]) -> int:
            return min((place.get(a, len(place)) for a in t.get("seats") or []), default=len(place))

        tied = [t for t in items if len(t.get("seats") or []) == seats]
        top = [f"“{t.get('label')}”" for t in sorted(tied, key=first_seat)]
        return f"a tie between {_names_and(top)} ({seats} of {n} each)"
    if kind == "none":
        return f"no majority (largest {seats} of {n})"
    if not n:
        return "unknown (every seat argued an assigned side)"
    return f"unknown ({m.get('unstated')} of {n} seats stated no position)"


def deliberation_line(
    verdict: dict[str, Any], *, weights: bool = True, brief: bool = False
) -> str | None:
    """``Deliberation: …`` of ``verdict`` (the contract's JSON form; docs/result.md,
    "deliberation"): the opening majority beside the final one, the seats that moved (where to,
    unless to the final majority), the seats that stated no position at the opening or at the
    end, and whether the majority changed — said first when it did. One round is said as
    ``Deliberation: none (one round)``. ``None`` for a verdict without the field (an older
    daemon) or with no round run. The CLI's verdict, the text S1 receives, the state card and
    the markdown export say it alike; the card, when the line is too long for it, leaves out the
    confidence-weighted shares (``weights`` false), then counts the seats that moved and stated
    nothing instead of naming them (``brief``)."""
    d = verdict.get("deliberation")
    if not isinstance(d, dict) or not d.get("rounds"):
        return None
    if int(d["rounds"]) <= 1:
        return "Deliberation: none (one round)"
    order = [str(p.get("agent")) for p in verdict.get("positions") or [] if isinstance(p, dict)]
    opening_m, final_m = d.get("openingMajority") or {}, d.get("finalMajority") or {}
    before = _majority_words(opening_m, d.get("openingTally") or [], weights, order)
    after = _majority_words(final_m, d.get("finalTally") or [], weights, order)
    moved = [m for m in d.get("moved") or [] if isinstance(m, dict)]
    joined = (d.get("finalMajority") or {}).get("stance")
    said = [
        f"{m.get('agent')} moved from “{m.get('from')}”"
        # Where it went is said by the final majority when it joined it.
        + ("" if joined is not None and m.get("to") == joined else f" to “{m.get('to')}”")
        + (f" in round {m['round']}" if isinstance(m.get("round"), int) else "")
        for m in moved[:MOVES_SHOWN]
    ]
    if len(moved) > MOVES_SHOWN:
        said.append(f"{len(moved) - MOVES_SHOWN} more moved")
    if brief and moved:
        said = [f"{len(moved)} seat{'' if len(moved) == 1 else 's'} moved"]
    parts = ["; ".join(said) if said else "no seat moved"]
    for key, when in (("unstatedAtOpening", "opening"), ("unstatedAtEnd", "end")):
        if names := [str(a) for a in d.get(key) or []]:
            who = f"{len(names)} seat{'' if len(names) == 1 else 's'}" if brief else None
            parts.append(f"{who or _names_and(names)} stated no position at the {when} (unknown)")
    rest = "; ".join(parts)
    changed = d.get("majorityChanged")
    held_before = opening_m.get("kind") == "majority"
    held_after = final_m.get("kind") == "majority"
    if changed is True:
        # A tie or no majority is no majority that changed: the words say what did.
        if held_before and held_after:
            return f"Deliberation: the majority changed — opening {before} → final {after}; {rest}."
        if held_after:
            what = "the tie was broken" if opening_m.get("kind") == "tied" else "a majority formed"
            return f"Deliberation: {what} — opening {before} → final majority {after}; {rest}."
        return (
            f"Deliberation: the majority was lost — opening majority {before} → final {after}; "
            f"{rest}."
        )
    if changed is False:
        if not held_before:
            return (
                f"Deliberation: opening {before} → final {after}; {rest}; no majority at either "
                "end."
            )
        return (
            f"Deliberation: opening majority {before} → final {after}; {rest}; the majority did "
            "not change."
        )
    return (
        f"Deliberation: whether the majority changed is unknown — opening {before} → final "
        f"{after}; {rest}."
    )
