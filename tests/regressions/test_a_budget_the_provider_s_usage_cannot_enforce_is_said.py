"""Regression: a real OpenAI-compatible server that sends no usage in its stream (llama.cpp's)
gave every turn 0 tokens and $0, so a token or USD budget could never stop the debate, and
nothing said so.

Proves, on the pure result (``status.notes``, what the result, the CLI and the export show):
with ``budget.tokens`` (or ``budget.usd``) set and an answered seat turn whose usage the server
did not record, the result is degraded and says the budget cannot be enforced, naming the first
such turn and that the seconds budget still applies; with usage reported there is no such note.
"""

from __future__ import annotations

import pytest

from roundtabled.core.state import (
    Budget,
    HistoryEntry,
    Options,
    RoundtableState,
    Usage,
)
from roundtabled.core.verdict import build_status
from tests.states import finished
from tests.states import seat_turn as turn


def finished_with(history: list[HistoryEntry], budget: Budget) -> RoundtableState:
    return finished(history, options=Options(budget=budget))


@pytest.mark.parametrize(
    ("budget", "words"),
    [
        (Budget(tokens=5000, seconds=600), "the token budget cannot be enforced"),
        (Budget(usd=0.5), "the USD budget cannot be enforced"),
    ],
)
def test_a_budget_without_reported_usage_is_said_unenforceable(budget: Budget, words: str) -> None:
    """Exact input: pm, dev × 2 rounds with a budget; every turn answered and the server
    recorded 0 tokens and $0 for each (no usage in the provider's stream)."""
    history = [turn(a, r, Usage()) for r in (1, 2) for a in ("pm", "dev")]
    status = build_status(finished_with(history, budget))
    said = [n for n in status.notes if "cannot be enforced" in n]
    assert len(said) == 1, status.notes
    assert said[0].startswith(words), said
    assert "4 answered turn(s), the first pm's in round 1" in said[0]
    assert "usage unknown, not 0" in said[0]
    assert ("seconds budget still applies" in said[0]) == (budget.seconds is not None)
    assert status.degraded


def test_reported_usage_gives_no_such_note() -> None:
    used = Usage(input=100, output=20, cost=0.001)
    history = [turn(a, r, used) for r in (1, 2) for a in ("pm", "dev")]
    status = build_status(finished_with(history, Budget(tokens=5000)))
    assert not [n for n in status.notes if "cannot be enforced" in n], status.notes
