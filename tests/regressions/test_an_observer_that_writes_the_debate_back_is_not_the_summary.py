"""Field failure (a new user's ``roundtabled start --agents pm,dev "topic"`` on a real 0.5B local
model): the observer wrote no verdict and began its reply with pm's turn copied, header and all::

    pm · round 1 ──
    Position: Open-ended search — To find files by name patterns…

The result showed that as the "Executive summary", status ``completed``, not degraded. A reply
that starts with a seat's turn header is the transcript written back, not a consolidation: it is
not kept as the summary (the digest of the seats' positions is), and the result is degraded and
says why."""

from __future__ import annotations

from typing import Any

from roundtabled.core.observer_flow import observer_step
from roundtabled.core.observer_verdict import TRANSCRIPT_COPIED, copies_a_turn
from roundtabled.core.result import build_result
from roundtabled.core.state import EndReason, HistoryEntry, Phase, RoundtableState, VerdictRecord

COPIED = (
    "pm · round 1 ──\nPosition: Open-ended search — To find files by name patterns, use glob.\n"
    "dev · round 1 ──\nPosition: Open-ended search — agreed."
)


def entry(agent: str, text: str, kind: str = "turn") -> HistoryEntry:
    return HistoryEntry.model_validate(
        {"agent": agent, "round": 1, "response": text, "kind": kind, "finish": "stop"}
    )


def state(**kw: Any) -> RoundtableState:
    data: dict[str, Any] = {
        "session_id": "ses_observercopiedturn01",
        "title": "topic",
        "agents": ["pm", "dev"],
        "total_rounds": 1,
        "current_round": 1,
        "prompt": "topic",
        "phase": Phase.OBSERVING,
        "history": [
            entry("pm", "Use glob.\nPosition: Open-ended search — find files by pattern (7/10)"),
            entry("dev", "Agreed.\nPosition: Open-ended search — agreed (6/10)"),
        ],
        **kw,
    }
    return RoundtableState.model_validate(data)


def test_a_reply_that_starts_with_a_turn_header_is_no_summary() -> None:
    st = state()
    step = observer_step(st, entry("roundtable-observer", COPIED, kind="observer"))
    assert step.summary is None and step.repair is None
    assert step.verdict.fallback and step.verdict.error == TRANSCRIPT_COPIED


def test_the_result_is_degraded_and_its_summary_is_the_digest() -> None:
    done = state(
        phase=Phase.DONE,
        end_reason=EndReason.COMPLETED,
        history=[*state().history, entry("roundtable-observer", COPIED, kind="observer")],
        summary="",
        verdict=VerdictRecord(error=TRANSCRIPT_COPIED, fallback=True),
    )
    result = build_result(done)
    assert result.status.degraded
    assert any(n.startswith(TRANSCRIPT_COPIED) for n in result.status.notes), result.status.notes
    assert "round 1 ──" not in result.summary, result.summary


def test_prose_that_only_mentions_a_round_is_kept() -> None:
    assert not copies_a_turn("In round 1 pm · round 1 argued for glob.", ["pm", "dev"])
    assert not copies_a_turn("Summary: both seats agree.", ["pm", "dev"])
    assert copies_a_turn("── dev · round 2 ──\ntext", ["pm", "dev"])
