"""Field failure (a new user on the demo, OpenCode 1.18.33): a three-seat debate ended
unanimous on "keep the monolith" after 2 rounds; ``extend`` by 2 rounds, and every turn of
rounds 3–4 was filler without a ``Position:`` line. ``roundtabled extend`` printed ``Status:
completed`` and "consensus unanimous · confidence 0.767"; only a ``note:`` line further down said
the positions were kept from round 2 — the status read as if the panel had confirmed its
decision in rounds 3–4.

The exact input: rounds 1–2 with positions (confidence 8, 8, 7 of 10), an extension (rounds
3–4) of filler, the observer without verdict JSON (the seats' positions decide: confidence
0.767). Now the status line says that the extension stated no position and what the decision
stands on, and the CLI's verdict line and the state card mark the consensus as standing on
positions kept from round 2. It is still no degradation (the seats answered; the decision
stands). Built on the pure core, from the state such a run leaves.
"""

from __future__ import annotations

from typing import Any

from roundtabled.cli.verdict import render_verdict
from roundtabled.core.card import state_card
from roundtabled.core.result import build_result, delivery_text
from roundtabled.core.state import (
    EndReason,
    HistoryEntry,
    Options,
    Phase,
    RoundtableState,
    VerdictRecord,
)

AGENTS = ["pm", "dev", "rv"]
CONFIDENCE = {"pm": 8, "dev": 8, "rv": 7}
UNSTATED = (
    "no seat stated a position in the extension (rounds 3–4): the decision stands on round 2's "
    "positions"
)
KEPT = "on positions kept from round 2: the extension stated none"


def turn(agent: str, rnd: int, text: str) -> HistoryEntry:
    return HistoryEntry.model_validate(
        {"agent": agent, "round": rnd, "response": text, "kind": "turn", "finish": "stop"}
    )


def extended() -> RoundtableState:
    said = [
        turn(a, r, f"{a} argues.\nPosition: keep the monolith — fewer parts ({CONFIDENCE[a]}/10)")
        for r in (1, 2)
        for a in AGENTS
    ]
    filler = [
        turn(a, r, "I have nothing to add beyond what I said.") for r in (3, 4) for a in AGENTS
    ]
    observer = HistoryEntry.model_validate(
        {"agent": "roundtable-observer", "round": 4, "response": "Prose.", "kind": "observer"}
    )
    data: dict[str, Any] = {
        "session_id": "ses_fillerextension0001",
        "title": "Split?",
        "agents": AGENTS,
        "total_rounds": 4,
        "current_round": 4,
        "prompt": "Split the monolith?",
        "phase": Phase.DONE,
        "end_reason": EndReason.COMPLETED,
        "options": Options(call_from_round=2),
        "history": [*said, *filler, observer],
        "summary": "Prose.",
        "verdict": VerdictRecord(error="no fenced block", fallback=True),
    }
    return RoundtableState.model_validate(data)


def test_an_extension_of_filler_says_so_in_the_status_line_the_verdict_line_and_the_card() -> None:
    state = extended()
    result = build_result(state)
    assert result.verdict.decision == "keep the monolith"
    assert result.verdict.consensus == "unanimous" and result.verdict.confidence == 0.767
    assert not result.status.degraded
    status = next(x for x in delivery_text(state).splitlines() if x.startswith("Status: "))
    assert status == f"Status: completed, 4/4 rounds — {UNSTATED}"
    cli = render_verdict(result.dump(), tty=False)
    [line] = [x for x in cli.splitlines() if x.startswith("consensus:")]
    assert KEPT in line and "confidence 0.77" in line
    card = state_card(state)
    assert any(x.startswith("Consensus: ") and KEPT in x for x in card.splitlines()), card
