"""Seen on the offline demo model (``roundtabled start --agents pm,dev,rv --side rv=against
--opening independent …``): the two free seats opened on two stances, 1 of 2 each, and ended on
one. The verdict said ``Deliberation: the majority changed — opening a tie between “go all in
this quarter” and “a staged rollout” (1 of 2 each) → …``: a tie is no majority, so no majority
changed. The line says what happened (the tie was broken) and names the tied stances in speaking
order; ``majorityChanged`` stays true: the outcome changed (docs/result.md, "deliberation")."""

from __future__ import annotations

import json
from typing import Any

from roundtabled.core.result import build_result
from roundtabled.core.state import EndReason, HistoryEntry, Options, VerdictRecord
from roundtabled.core.verdict import deliberation_line
from tests.states import finished

AGENTS = ["pm", "dev", "rv"]
LABELS = {
    "pm": ["a staged rollout", "a staged rollout"],
    # The heavier opening, so the tally (by weight) lists it first: the tie does not.
    "dev": ["go all in this quarter", "a staged rollout"],
    "rv": ["keep the current frontend", "keep the current frontend"],
}
CONFIDENCE = {"pm": 5, "dev": 8, "rv": 6}


def turn(agent: str, rnd: int) -> HistoryEntry:
    label = LABELS[agent][rnd - 1]
    text = f"{agent} argues.\n\nPosition: {label} — so (confidence {CONFIDENCE[agent]}/10)"
    return HistoryEntry.model_validate(
        {"agent": agent, "round": rnd, "response": text, "kind": "turn", "finish": "stop"}
    )


def verdict() -> dict[str, Any]:
    state = finished(
        [turn(a, r) for r in (1, 2) for a in AGENTS],
        agents=AGENTS,
        total_rounds=2,
        current_round=2,
        end_reason=EndReason.COMPLETED,
        options=Options(sides={"rv": "against"}, opening="independent"),
        summary="",
        verdict=VerdictRecord(error="no fenced block", fallback=True),
    )
    out: dict[str, Any] = json.loads(build_result(state).model_dump_json(by_alias=True))
    return dict(out["verdict"])


def test_a_broken_tie_is_said_as_such_with_the_tied_stances_in_speaking_order() -> None:
    v = verdict()
    d = v["deliberation"]
    assert d["openingMajority"]["kind"] == "tied"
    assert d["finalMajority"]["kind"] == "majority"
    assert d["majorityChanged"] is True
    assert deliberation_line(v) == (
        "Deliberation: the tie was broken — opening a tie between “a staged rollout” and “go all "
        "in this quarter” (1 of 2 each) → final majority “a staged rollout” (2 of 2, weighted "
        "1.00); dev moved from “go all in this quarter” in round 2."
    )
