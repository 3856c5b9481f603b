"""Field failure (a new user's run: `roundtabled start --agents seat-a,seat-b --rounds 1
--turn-timeout 240 "Is 7 a prime number? Answer briefly."`, both seats and the built-in observer
on a real Qwen2.5-Coder 0.5B through llama.cpp's server): the observer's verdict was accepted and
the result read

    Verdict (by the observer): consensus unanimous · decision: seat-a · round 1 ── · confidence 0
    Minority (seat-a, seat-b): 2: The debate is one voice several times; …

— a decision copied from the transcript's turn header, and a "minority" of every seat beside a
unanimous consensus; the result said completed, not degraded. The verdict block below holds the
values that run showed (decision, consensus, confidence, the minority, its view, the next step).
Now such a verdict is unusable: one repair request, then the verdict built from the seats'
positions, said in the result.
"""

from __future__ import annotations

import json

from roundtabled.core.observer_verdict import parse_reply

AGENTS = ["seat-a", "seat-b"]
VERDICT = {
    "decision": "seat-a · round 1 ──",
    "confidence": 0,
    "consensus": "unanimous",
    "agreements": [],
    "disagreements": [
        {
            "point": "2",
            "minority": ["seat-a", "seat-b"],
            "view": "The debate is one voice several times; seat agents on different models or "
            "give them distinct roles",
        }
    ],
    "openQuestions": [],
    "nextSteps": ["seat-a · round 1 ──"],
    "stances": [],
}


def reply(verdict: dict[str, object]) -> str:
    return f"6. Verdict\n```json\n{json.dumps(verdict, ensure_ascii=False)}\n```"


def test_a_decision_copied_from_a_turn_header_is_unusable() -> None:
    _, verdict, error = parse_reply(reply(VERDICT), AGENTS)
    assert verdict is None and error is not None and "turn header" in error


def test_a_minority_of_every_seat_is_unusable() -> None:
    fixed = {**VERDICT, "decision": "7 is a prime number"}
    _, verdict, error = parse_reply(reply(fixed), AGENTS)
    assert verdict is None and error is not None and "names every seat" in error


def test_a_seat_name_as_the_decision_is_unusable() -> None:
    named = {**VERDICT, "decision": "Seat-A", "disagreements": []}
    _, verdict, error = parse_reply(reply(named), AGENTS)
    assert verdict is None and error is not None


def test_a_real_decision_with_a_real_minority_stands() -> None:
    good = {
        **VERDICT,
        "decision": "7 is prime",
        "consensus": "majority",
        "disagreements": [{"point": "is 7 prime", "minority": ["seat-b"], "view": "no"}],
        "nextSteps": ["check 9"],
    }
    _, verdict, error = parse_reply(reply(good), AGENTS)
    assert error is None and verdict is not None and verdict.decision == "7 is prime"
