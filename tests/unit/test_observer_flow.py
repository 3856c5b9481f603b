"""The verdict's decisions in the machine (roundtabled/observer_flow.py): what a turn records,
what the observer's reply leads to (done, exactly one repair, the ledger verdict), and when the
observer is skipped."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core.observer_flow import annotate, observer_step, skip_observer
from roundtabled.core.observer_verdict import REPAIR_SEAT
from roundtabled.core.state import EndReason, HistoryEntry, Options, VerdictRecord

from .test_verdict import VALID, observer, state, turn


def fenced(data: object) -> str:
    return f"Prose of the five sections.\n```json\n{json.dumps(data)}\n```"


def test_annotate_records_finish_position_and_reason() -> None:
    e = annotate(
        HistoryEntry(
            agent="pm", round=2, response="Changed: rv\nPosition: keep — x (confidence 6/10)"
        ),
        "stop",
    )
    assert e.finish == "stop" and e.position is not None and e.position.label == "keep"
    assert e.changed == "rv"
    failed = annotate(HistoryEntry(agent="pm", round=1, response="", has_error=True), None)
    assert failed.position is None and failed.finish is None
    cut = annotate(HistoryEntry(agent="pm", round=1, response="Position: half"), "length")
    assert cut.finish == "length" and cut.position is not None  # a truncated answer still spoke


def test_valid_verdict_is_done_with_the_prose_as_summary() -> None:
    step = observer_step(state([]), observer(fenced(VALID)))
    assert step.repair is None and not step.failed
    assert step.summary == "Prose of the five sections."
    assert step.verdict.data is not None and step.verdict.data["consensus"] == "unanimous"


def test_invalid_verdict_asks_exactly_once_then_falls_back() -> None:
    st_ = state([])
    first = observer_step(st_, observer(fenced({"decision": "x", "consensus": "mostly"})))
    assert first.repair is not None and first.repair.startswith("Your verdict JSON was invalid:")
    assert first.verdict.repair_asked and not first.verdict.fallback
    assert first.summary == "Prose of the five sections."
    after = st_.model_copy(update={"verdict": first.verdict, "summary": first.summary})
    bad = observer("still {not json", seat=REPAIR_SEAT)
    second = observer_step(after, bad)
    assert second.repair is None and second.verdict.fallback and second.summary is None
    # A first reply seen again after a restart (the record says the repair was asked): no second.
    again = observer_step(after, observer(fenced({"decision": "x", "consensus": "mostly"})))
    assert again.repair is None and again.verdict.fallback


def test_repair_reply_that_validates_keeps_the_first_prose() -> None:
    after = state([], verdict=VerdictRecord(error="e", repair_asked=True), summary="First prose.")
    step = observer_step(after, observer(json.dumps(VALID), seat=REPAIR_SEAT))
    assert step.summary is None  # the first reply's prose stays
    assert step.verdict.data is not None and step.verdict.repair_asked and not step.verdict.fallback


def test_no_verdict_block_falls_back_without_a_repair() -> None:
    step = observer_step(state([]), observer("Only prose."))
    assert step.repair is None and step.verdict.fallback and not step.verdict.repair_asked
    assert step.summary == "Only prose."


def test_failed_observer_and_failed_repair() -> None:
    assert observer_step(state([]), observer("", has_error=True, error="down")).failed
    assert observer_step(state([]), observer("   ")).failed
    after = state([], verdict=VerdictRecord(error="e", repair_asked=True))
    step = observer_step(after, observer("", seat=REPAIR_SEAT, has_error=True, error="down"))
    assert (
        not step.failed
        and step.verdict.fallback
        and "repair turn failed" in (step.verdict.error or "")
    )


def test_skip_observer_only_when_no_seat_spoke() -> None:
    failed = [turn(a, 1, "", has_error=True, error="x") for a in ("pm", "dev", "rv")]
    assert skip_observer(state(failed, summary=None))
    assert not skip_observer(state([*failed, turn("pm", 2, "ok")], summary=None))
    assert skip_observer(state([turn("pm", 1, ""), turn("dev", 1, "  ")], summary=None))
    # A cancel that asked for a summary still gets its observer (the person asked for it).
    asked = state(
        failed,
        summary=None,
        end_reason=EndReason.CANCELLED,
        options=Options(cancel_summarize=True),
    )
    assert not skip_observer(asked)


@given(st.text(max_size=300), st.booleans())
def test_a_repair_is_never_asked_twice(reply: str, asked: bool) -> None:
    st_ = state([], verdict=VerdictRecord(repair_asked=asked))
    for seat in (None, REPAIR_SEAT):
        step = observer_step(st_, observer(reply or "x", seat=seat))
        if asked or seat == REPAIR_SEAT:
            assert step.repair is None
