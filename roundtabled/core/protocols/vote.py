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

from roundtabled.core.protocols import Opened, Protocol
from roundtabled.core.state import HistoryEntry, Options, RoundtableState


def _options(options: Options, rounds: int) -> tuple[Options, int]:
    return options.model_copy(update={"opening": "independent", "until": "rounds"}), 1


def _after(
    state: RoundtableState, entries: Sequence[HistoryEntry], now: int, messages: Sequence[object]
) -> Opened:
    return Opened(state, observer=True)


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
)
