"""Properties of what a usage total knows (roundtabled/core/state.py ``HistoryEntry.
usage_unreported``, ``UsageTotal``; docs/result.md, usage): unknown stays unknown, never a 0 that
looks measured."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core.result import usage_table
from roundtabled.core.state import HistoryEntry, Usage, UsageTotal

usages = st.builds(
    Usage,
    input=st.sampled_from([0, 0, 43, 3136]),
    output=st.sampled_from([0, 0, 256]),
)
entries = st.builds(
    HistoryEntry,
    agent=st.sampled_from(["pm", "dev"]),
    round=st.integers(1, 3),
    response=st.sampled_from(["", "  ", "Flag.\nPosition: flag"]),
    cut_off=st.booleans(),
    has_error=st.booleans(),
    kind=st.sampled_from(["turn", "observer", "user", "interjection"]),
    usage=usages,
)


@given(entries)
def test_a_turn_is_unreported_when_the_model_worked_and_nothing_was_recorded(
    e: HistoryEntry,
) -> None:
    worked = bool(e.response.strip()) or e.cut_off  # text written, or a request sent and cut
    want = e.kind != "user" and worked and not e.usage.recorded
    assert e.usage_unreported is want


@given(st.lists(entries, max_size=6))
def test_a_total_is_null_unless_some_usage_was_recorded(history: list[HistoryEntry]) -> None:
    total = usage_table(history)["total"]
    counted = [e for e in history if e.kind != "user"]
    dumped = total.dump()
    if not any(e.usage.recorded for e in counted):
        # nothing measured (no turn yet, or none recorded): unknown, never 0
        assert total.unknown and dumped["input"] is None and dumped["cost"] is None
    else:
        assert dumped["input"] == sum(e.usage.input for e in counted)
    assert dumped["unreportedTurns"] == sum(e.usage_unreported for e in counted)


def test_a_total_of_no_turn_is_unknown() -> None:
    assert UsageTotal().dump()["input"] is None
