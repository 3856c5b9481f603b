"""An observer whose turn failed (its model request errored, or it replied nothing) left as the
roundtable's summary ``(The observer roundtable-observer failed: down.)`` followed by
``[Roundtable cancelled — partial history up to cancellation:]`` — the control API's
``summary`` said the roundtable was cancelled when nobody had cancelled it. Now the history
goes under a header that says what happened; a real cancel keeps its own header, and the CLI
still cuts the pasted history after either."""

from __future__ import annotations

from roundtabled.cli.debate import result_head
from roundtabled.core.observer_flow import observed
from roundtabled.core.result import CANCELLED_HEADER, OBSERVER_FAILED_HEADER
from roundtabled.core.state import EndReason, Options, Phase

from ..unit.test_verdict import observer, state, turn


def test_an_observer_that_failed_is_not_said_to_be_a_cancel() -> None:
    seats = [turn("pm", 1, "Position: split (confidence 6/10)"), turn("dev", 1, "Position: keep")]
    before = state(seats, summary=None, end_reason=None, phase=Phase.OBSERVING)
    failed = observer("", has_error=True, error="down")
    after, repair = observed(before, failed, {"history": [*seats, failed]})
    assert not repair and after.end_reason == EndReason.OBSERVER_FAILED
    summary = after.summary or ""
    assert "cancel" not in summary.lower(), summary
    assert summary.startswith("(The observer roundtable-observer failed: down.)\n\n")
    assert OBSERVER_FAILED_HEADER in summary and "── pm · round 1 ──" in summary
    assert result_head(summary) == "(The observer roundtable-observer failed: down.)"


def test_a_cancel_without_a_summary_still_says_cancelled() -> None:
    seats = [turn("pm", 1, "Position: split")]
    before = state(
        seats,
        summary=None,
        end_reason=EndReason.CANCELLED,
        phase=Phase.OBSERVING,
        options=Options(cancel_summarize=False),
    )
    entry = observer("", has_error=True, error="aborted")
    after, _ = observed(before, entry, {"history": [*seats, entry]})
    assert (after.summary or "").startswith(CANCELLED_HEADER)
