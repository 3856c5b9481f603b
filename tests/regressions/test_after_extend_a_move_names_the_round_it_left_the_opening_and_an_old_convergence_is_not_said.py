"""Seen on the offline demo model: a debate of pm, dev, rv converged after round 3 of 5;
``roundtabled extend SES --rounds 1 "Continue: address the cost concern"`` ran round 4. The
verdict said ``Deliberation: … rv moved from “go all in this quarter” in round 4`` although rv
left “go all in this quarter” in round 2 (round 4 is when it left “staged rollout first”), and
still printed ``note: converged after round 3 of 5 (unchanged): every seat that spoke held its
position…`` beside ``Status: completed, 4/4 rounds``. A move names the round the seat left its
opening stance; a stop of the call before the extension is not said as the current state."""

from __future__ import annotations

import json

from roundtabled.core.result import build_result
from roundtabled.core.state import (
    EndReason,
    Extension,
    HistoryEntry,
    RoundtableState,
    VerdictRecord,
)
from roundtabled.core.verdict import deliberation_line
from tests.states import finished

AGENTS = ["pm", "dev", "rv"]
CONVERGED = (
    "converged after round 3 of 5 (unchanged): every seat that spoke held its position from "
    "round 2 to round 3"
)
LABELS = {
    "pm": ["a staged rollout"] * 4,
    "dev": ["a staged rollout"] * 4,
    "rv": [
        "go all in this quarter",
        "staged rollout first",
        "staged rollout first",
        "a time-boxed pilot",
    ],
}


def turn(agent: str, rnd: int) -> HistoryEntry:
    label = LABELS[agent][rnd - 1]
    why = "Changed: dev's numbers.\n" if agent == "rv" and rnd in (2, 4) else ""
    return HistoryEntry.model_validate(
        {
            "agent": agent,
            "round": rnd,
            "response": f"{why}{agent} argues in round {rnd}.\n\nPosition: {label} — so (7/10)",
            "kind": "turn",
            "finish": "stop",
        }
    )


def extended_state() -> RoundtableState:
    return finished(
        [turn(a, r) for r in (1, 2, 3, 4) for a in AGENTS],
        agents=AGENTS,
        total_rounds=4,
        current_round=4,
        end_reason=EndReason.COMPLETED,
        # The stop of the first call, kept in the state's notes; the extend cleared
        # ``stop_detail`` (engine/launch.py ``extended``).
        notes=[CONVERGED],
        stop_detail=None,
        extensions=[
            Extension(
                from_round=3, prompt="Continue: address the cost concern", mode="continuation"
            )
        ],
        summary="",
        verdict=VerdictRecord(error="no fenced block", fallback=True),
    )


def test_the_move_names_the_round_rv_left_its_opening_stance() -> None:
    result = build_result(extended_state())
    verdict = json.loads(result.model_dump_json(by_alias=True))["verdict"]
    (rv,) = [m for m in verdict["deliberation"]["moved"] if m["agent"] == "rv"]
    assert (rv["from"], rv["round"]) == ("go all in this quarter", 2)
    line = deliberation_line(verdict)
    assert line is not None
    assert "rv moved from “go all in this quarter” to “a time-boxed pilot” in round 2" in line


def test_the_convergence_of_before_the_extension_is_not_a_current_note() -> None:
    status = build_result(extended_state()).status
    assert status.end_reason == "completed"
    assert not any("converged after round 3 of 5" in n for n in status.notes), status.notes


def test_a_convergence_of_the_current_call_is_still_said() -> None:
    state = extended_state().model_copy(
        update={"end_reason": EndReason.CONVERGED, "stop_detail": CONVERGED, "extensions": []}
    )
    assert CONVERGED in build_result(state).status.notes
