"""Field failure (a user trying the product on a real small local model): in a two-seat debate
neither seat stated a position — one wrote no ``Position:`` line, the other closed with its own
name, and a later run copied the topic or the instruction's placeholder — and the observer wrote
prose without a usable verdict JSON. The result read ``completed``, ``degraded: false``, with
the summary leading with the observer's prose: a debate that decided nothing read like a healthy
one. Now it is degraded, and the first lines of the summary say that no seat stated a position
and there is no decision.

Built on the pure result (``status``, the summary's honesty header), from the states such runs
leave; beside them, the debates that did decide stay healthy: an observer that names a decision,
seats that stated positions.
"""

from __future__ import annotations

from typing import Any

import pytest

from roundtabled.core.result import HEADER_TITLE, build_result, verdict_lines
from roundtabled.core.state import EndReason, HistoryEntry, Phase, RoundtableState, VerdictRecord

AGENTS = ["seat-a", "seat-b"]
TOPIC = "Is 7 a prime number? Answer briefly."
PROSE = "1. Executive summary: the seats talked about the number 7."
NO_VERDICT = VerdictRecord(error="no fenced block", fallback=True)
"""The observer wrote prose and no verdict JSON at all (no repair asked)."""
UNUSABLE = VerdictRecord(error="decision: 'seat-a' names a seat", repair_asked=True, fallback=True)
"""The observer's verdict JSON was unusable, also after the one repair request."""
NOTE = "no seat stated a position in its last answer and the observer {obs}: there is no decision"


def turn(agent: str, text: str, rnd: int = 1) -> HistoryEntry:
    return HistoryEntry.model_validate(
        {"agent": agent, "round": rnd, "response": text, "kind": "turn", "finish": "stop"}
    )


def observer(text: str = PROSE) -> HistoryEntry:
    return HistoryEntry.model_validate(
        {"agent": "roundtable-observer", "round": 1, "response": text, "kind": "observer"}
    )


def finished(seats: list[HistoryEntry], verdict: VerdictRecord, **kw: Any) -> RoundtableState:
    """A completed one-round debate of seat-a and seat-b on :data:`TOPIC` whose observer wrote
    :data:`PROSE` with ``verdict``."""
    data: dict[str, Any] = {
        "session_id": "ses_nopositionnodecision1",
        "title": "Is 7 prime?",
        "agents": AGENTS,
        "total_rounds": 1,
        "current_round": 1,
        "prompt": TOPIC,
        "phase": Phase.DONE,
        "end_reason": EndReason.COMPLETED,
        "history": [*seats, observer()],
        "summary": PROSE,
        "verdict": verdict,
        **kw,
    }
    return RoundtableState.model_validate(data)


NO_POSITIONS = {
    "no Position line, a seat's name": [
        turn("seat-a", "7 is prime: its only divisors are 1 and 7."),
        turn("seat-b", "I agree with seat-a.\nPosition: Seat-B — 7 is prime (confidence 9/10)"),
    ],
    "the topic copied, a placeholder": [
        turn("seat-a", f"Yes.\nPosition: {TOPIC} — yes it is"),
        turn("seat-b", "Yes.\nPosition: <short label> — <one sentence>"),
    ],
}


@pytest.mark.parametrize("seats", NO_POSITIONS.values(), ids=list(NO_POSITIONS))
@pytest.mark.parametrize(
    ("verdict", "obs"),
    [(NO_VERDICT, "gave no usable verdict"), (UNUSABLE, "gave no usable verdict")],
    ids=["no verdict JSON", "unusable after the repair"],
)
def test_no_position_and_no_usable_verdict_is_degraded_and_said_first(
    seats: list[HistoryEntry], verdict: VerdictRecord, obs: str
) -> None:
    result = build_result(finished(seats, verdict))
    status = result.status
    assert all(p.stance is None for p in result.verdict.positions)
    assert result.verdict.decision is None and result.verdict.source == "ledger"
    assert status.end_reason == "completed"
    assert status.degraded
    assert NOTE.format(obs=obs) in status.notes
    header = result.summary.split("\n\n", 1)[0].splitlines()
    assert header[0] == HEADER_TITLE
    assert f"- {NOTE.format(obs=obs)}" in header
    assert result.summary.endswith(PROSE)
    # The verdict's lines show no label that counts as no position as if it were one.
    lines = "\n".join(verdict_lines(result))
    assert "no decision" in lines
    assert all(f"{p.agent}: no stated position" in lines for p in result.verdict.positions)


def test_an_observer_verdict_that_names_no_decision_is_no_decision_either() -> None:
    data = {"decision": None, "confidence": 0.2, "consensus": "none", "agreements": []}
    seats = NO_POSITIONS["no Position line, a seat's name"]
    result = build_result(finished(seats, VerdictRecord(data=data)))
    assert result.status.degraded
    assert NOTE.format(obs="named no decision") in result.status.notes


def test_an_observer_that_decided_without_positions_is_no_undecided_debate() -> None:
    """Its decision stands, so this is not "there is no decision"; its ``unanimous``, though,
    no seat stated: that is its own degradation
    (``test_a_unanimity_no_seat_stated_is_degraded_and_said_first.py``)."""
    data = {"decision": "7 is prime", "confidence": 0.9, "consensus": "unanimous"}
    seats = NO_POSITIONS["no Position line, a seat's name"]
    result = build_result(finished(seats, VerdictRecord(data=data)))
    assert result.verdict.decision == "7 is prime"
    assert not [n for n in result.status.notes if "there is no decision" in n]
    assert result.status.degraded and result.verdict.confidence is None


def test_seats_that_stated_different_positions_are_a_split_not_a_degradation() -> None:
    seats = [
        turn("seat-a", "Prime.\nPosition: 7 is prime — divisors 1 and 7 (confidence 9/10)"),
        turn("seat-b", "Odd.\nPosition: 7 is odd, that is all — no claim (confidence 4/10)"),
    ]
    result = build_result(finished(seats, NO_VERDICT))
    assert result.verdict.decision is None and result.verdict.tally_consensus == "none"
    assert not result.status.degraded
    assert not [n for n in result.status.notes if "there is no decision" in n]


def test_a_cancel_without_a_summary_says_the_cancel_not_no_decision() -> None:
    """The cancel prints its effect in a dozen lines (``roundtabled cancel``): a debate cancelled
    without a summary decided nothing because the caller asked for that, which the cancel's own
    notes say; the no-decision note would only repeat it."""
    st = RoundtableState.model_validate(
        {
            "session_id": "ses_cancelnodecision0001",
            "title": "Prime?",
            "agents": ["seat-a", "seat-b"],
            "total_rounds": 8,
            "current_round": 2,
            "prompt": "Is 7 a prime number?",
            "phase": Phase.ABORTED,
            "end_reason": EndReason.CANCELLED,
            "history": [
                turn("seat-a", "I think so."),
                turn("seat-b", "Probably."),
            ],
            "summary": "",
        }
    )
    result = build_result(st)
    assert result.status.degraded  # the cancel is
    assert not any("there is no decision" in n for n in result.status.notes), result.status.notes
