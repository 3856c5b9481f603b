"""``adaptive``: the independent opening (every seat answers once, in parallel, seeing only the
topic); when one stance then holds a confidence-weighted share of at least the threshold the
roundtable stops there and the observer consolidates; otherwise the seats debate from round 2,
until they converged or the rounds run out.

Why: debate helps on the questions where independent answers disagree and costs turns where they
agree (iMAD, selective multi-agent debate, 2025); the confidence-weighted share is the vote's
(:mod:`roundtabled.core.protocols.tally`).

The rule (:func:`decide`, property-tested): stop iff every seat stated a stance and a confidence
(else the share is unknown, and unknown is never taken for agreement) and the leading stance's
share is at least ``threshold`` (in (0.5, 1]: a tie never stops). ``until`` is always
``converged`` after the opening; ``opening``, ``until``, ``sides`` and an extend are refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from roundtabled.core.deliberation import Stop, stop_after_seat_turn
from roundtabled.core.protocols import Opened, Protocol, ballots
from roundtabled.core.protocols.tally import Tally, count
from roundtabled.core.state import (
    DEFAULT_ADAPTIVE_THRESHOLD,
    AdaptiveOutcome,
    EndReason,
    HistoryEntry,
    Options,
    RoundtableState,
)

DEFAULT_ROUNDS = 3
"""The most rounds, the opening included, when the call gives no ``rounds``."""
MIN_THRESHOLD = 0.5
"""The threshold is above this (exclusive): a share of half or less is no majority."""


def decide(tally: Tally, threshold: float) -> AdaptiveOutcome:
    """Whether the opening's ``tally`` stops the roundtable at ``threshold`` (see the module
    docstring), and why in words.

    Raises:
        ValueError: ``threshold`` outside (0.5, 1].
    """
    if not MIN_THRESHOLD < threshold <= 1.0:
        raise ValueError(f"decide: threshold {threshold} is not in (0.5, 1]")
    share = tally.leader_share
    lead = next((s for s in tally.stances if s.stance == tally.leader), None)
    if lead is None:
        why = "no stance leads the opening" + (
            " (a tie)" if tally.stances else " (no seat stated one)"
        )
        return AdaptiveOutcome(stopped=False, threshold=threshold, why=why + ": debated")
    if share is None:
        if tally.degraded:
            unknown = ", ".join(f"{a} ({w})" for a, w in tally.degraded)
        else:
            unknown = "a seat stated no confidence"
        why = (
            f"the opening's leading stance “{lead.stance}” ({len(lead.seats)} of {tally.seats} "
            f"seats) has an unknown confidence-weighted share: {unknown}; debated"
        )
        return AdaptiveOutcome(stopped=False, stance=lead.stance, threshold=threshold, why=why)
    stopped = share >= threshold
    verb = "at least" if stopped else "below"
    then = "stopped at the opening" if stopped else "debated"
    why = (
        f"the opening's leading stance “{lead.stance}” held a confidence-weighted share of "
        f"{share:.2f}, {verb} the threshold {threshold:g}: {then}"
    )
    return AdaptiveOutcome(
        stopped=stopped, stance=lead.stance, share=share, threshold=threshold, why=why
    )


def _options(options: Options, rounds: int) -> tuple[Options, int]:
    threshold = options.adaptive_threshold or DEFAULT_ADAPTIVE_THRESHOLD
    update = {"opening": "independent", "until": "converged", "adaptive_threshold": threshold}
    return options.model_copy(update=update), rounds


def _after(
    state: RoundtableState, entries: Sequence[HistoryEntry], now: int, messages: Sequence[object]
) -> Opened:
    threshold = state.options.adaptive_threshold or DEFAULT_ADAPTIVE_THRESHOLD
    outcome = decide(count(ballots(state, entries)), threshold)
    new = state.model_copy(update={"adaptive": outcome})
    if new.total_rounds <= 1:
        return Opened(new, observer=True)  # one round: the opening was all of it either way
    if outcome.stopped:
        early = Stop(EndReason.CONVERGED, f"adaptive: {outcome.why}")
        return Opened(new, observer=True, stop=early)
    # The debate follows; the opening itself is judged by the threshold alone, the budget still
    # decides whether round 2 starts.
    rounds_only = new.options.model_copy(update={"until": "rounds"})
    budget_only = new.model_copy(update={"options": rounds_only})
    stop = stop_after_seat_turn(budget_only, now, messages)
    return Opened(new, observer=stop is not None, stop=stop)


def observer_lines(state: RoundtableState) -> list[str]:
    """What the observer is told of the adaptive rule's decision at the opening."""
    if state.adaptive is None:
        return []
    return [
        "",
        "Protocol adaptive: every seat first answered on its own, in parallel; then "
        f"{state.adaptive.why}.",
    ]


PROTOCOL = Protocol(
    name="adaptive",
    summary="an independent opening; debated only when no stance holds the threshold's "
    "confidence-weighted share",
    refuses={
        "until": "it debates until the panel converged or the rounds run out",
        "opening": "its round 1 is the independent opening",
        "sides": "its stop rule counts every seat's own answer",
    },
    options=_options,
    after_opening=_after,
    default_rounds=DEFAULT_ROUNDS,
    observer_lines=observer_lines,
)
