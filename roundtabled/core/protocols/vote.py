"""``vote``: every seat answers the topic once, independently and in parallel (the independent
opening round, :mod:`roundtabled.core.opening`: no seat sees another's answer), with no debate;
then the observer consolidates and the answers are counted by stance, weighted by each seat's
stated confidence (:mod:`roundtabled.core.protocols.tally`).

Why: on many tasks the gain of multi-agent debate is the gain of voting over independent answers
(Choi et al., "Debate or Vote", 2025); weighting a vote by the answer's own confidence needs fewer
answers for the same accuracy (CISC, "Confidence Improves Self-Consistency", 2025).

One round: ``rounds``, ``until``, ``opening``, ``context``, ``sides``, ``budget`` (no turn follows
the parallel round to stop before) and ``adaptiveThreshold`` are refused, and so is an extend.
"""

from __future__ import annotations

from collections.abc import Sequence

from roundtabled.core.protocols import Opened, Protocol, ballots
from roundtabled.core.protocols.tally import count
from roundtabled.core.state import HistoryEntry, Options, RoundtableState


def _options(options: Options, rounds: int) -> tuple[Options, int]:
    return options.model_copy(update={"opening": "independent", "until": "rounds"}), 1


def _after(
    state: RoundtableState, entries: Sequence[HistoryEntry], now: int, messages: Sequence[object]
) -> Opened:
    return Opened(state, observer=True)


def observer_lines(state: RoundtableState) -> list[str]:
    """What the observer is told of a vote: that the answers were independent (there was no
    debate to summarise) and the daemon's count of them."""
    opening = [e for e in state.seat_turns() if e.round == 1]
    t = count(ballots(state, opening))
    lines = [
        "",
        "Protocol vote: every seat answered on its own, in parallel, without seeing another's "
        "answer; there was no debate. Consolidate the answers; the daemon's count of the stated "
        "positions (confidence-weighted only when every seat stated a stance and a confidence):",
    ]
    for st in t.stances:
        share = f", confidence-weighted share {st.share:.2f}" if st.share is not None else ""
        lines.append(f"- “{st.stance}”: {', '.join(st.seats)}{share}")
    lines.extend(f"- {agent} is not counted: {why}" for agent, why in t.degraded)
    return lines


PROTOCOL = Protocol(
    name="vote",
    summary="every seat answers once, independently; the answers are counted by stance, "
    "weighted by stated confidence",
    refuses={
        "rounds": "every seat answers once",
        "until": "there is no debate to stop",
        "opening": "every seat answers independently",
        "context": "no seat reads another's answer",
        "sides": "a vote counts every seat's own answer",
        "budget": "the one parallel round is not stopped between turns",
        "adaptiveThreshold": "it is adaptive's stop share",
    },
    options=_options,
    after_opening=_after,
    observer_lines=observer_lines,
)
