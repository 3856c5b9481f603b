"""Field failure (a user trying the product on a real small local model): a three-seat debate
ended unanimous on "keep the monolith" after 2 rounds; ``extend`` by 2 rounds, and no seat wrote
a ``Position:`` line in rounds 3–4 (the small model wrote filler). Every seat kept its round-2
position (``carried``), the decision stayed — as it should: an extension never turns an earlier
decision into none for that reason alone — but nothing said, as a whole, that the extension
added no position: the result read as if the panel had confirmed its decision in rounds 3–4.

Now ``status.notes`` says so in one sentence, and the verdict's words mark each kept position
with its round. It is a note, not a degradation (a missing ``Position:`` line never is): the
result turns degraded only when the extension's turns also went wrong, which their own notes
say.

Built on the pure result, from the state such a run leaves.
"""

from __future__ import annotations

from typing import Any

from roundtabled.core.result import build_result, verdict_lines
from roundtabled.core.state import (
    EndReason,
    HistoryEntry,
    Options,
    Phase,
    RoundtableState,
    VerdictRecord,
)

AGENTS = ["pm", "dev", "rv"]
NOTE = (
    "no seat stated a position in the extension (rounds 3–4): the decision stands on round 2's "
    "positions"
)


def turn(agent: str, rnd: int, text: str, **kw: Any) -> HistoryEntry:
    return HistoryEntry.model_validate(
        {"agent": agent, "round": rnd, "response": text, "kind": "turn", "finish": "stop", **kw}
    )


def said(agent: str, rnd: int) -> HistoryEntry:
    return turn(agent, rnd, f"{agent} argues.\nPosition: keep the monolith — fewer parts (8/10)")


def extended(extension: list[HistoryEntry], **kw: Any) -> RoundtableState:
    """pm, dev, rv: rounds 1–2 all "keep the monolith", then ``extension`` (rounds 3–4, the
    last call); the observer wrote prose without verdict JSON (the seats' positions decide)."""
    history = [
        *(said(a, r) for r in (1, 2) for a in AGENTS),
        *extension,
        HistoryEntry.model_validate(
            {"agent": "roundtable-observer", "round": 4, "response": "Prose.", "kind": "observer"}
        ),
    ]
    data: dict[str, Any] = {
        "session_id": "ses_extensionnoposition1",
        "title": "Split?",
        "agents": AGENTS,
        "total_rounds": 4,
        "current_round": 4,
        "prompt": "Split the monolith?",
        "phase": Phase.DONE,
        "end_reason": EndReason.COMPLETED,
        "options": Options(call_from_round=2),
        "history": history,
        "summary": "Prose.",
        "verdict": VerdictRecord(error="no fenced block", fallback=True),
        **kw,
    }
    return RoundtableState.model_validate(data)


FILLER = [turn(a, r, "I have nothing to add beyond what I said.") for r in (3, 4) for a in AGENTS]
"""The extension as the small model wrote it: every seat answered, none stated a position."""


def test_an_extension_without_any_position_keeps_the_decision_and_says_so() -> None:
    result = build_result(extended(FILLER))
    verdict, status = result.verdict, result.status
    assert verdict.decision == "keep the monolith" and verdict.tally_consensus == "unanimous"
    assert all(p.carried and p.round == 2 for p in verdict.positions)
    assert NOTE in status.notes
    assert not status.degraded  # the seats answered: said, not a degradation
    lines = "\n".join(verdict_lines(result))
    assert "pm: keep the monolith (confidence 8/10) (kept from round 2)" in lines


def test_an_extension_whose_turns_also_failed_is_degraded_and_says_so() -> None:
    failed = [
        turn(a, 4, "", has_error=True, error="APIError: model crashed", finish=None) for a in AGENTS
    ]
    result = build_result(extended([*FILLER[:3], *failed]))
    assert result.verdict.decision == "keep the monolith"
    assert result.status.degraded
    assert NOTE in result.status.notes
    assert f"- {NOTE}" in result.summary.split("\n\n", 1)[0].splitlines()


def test_one_seat_that_stated_a_position_in_the_extension_needs_no_such_note() -> None:
    extension = [*FILLER[:5], said("rv", 4)]
    result = build_result(extended(extension))
    assert result.verdict.decision == "keep the monolith"
    assert not [n for n in result.status.notes if n.startswith("no seat stated a position")]
