"""Field fault (``roundtabled eval`` on the local llama.cpp model, which streams no usage):
the eval record's ``overhead.observerTokens`` was 0 — an observer that cost nothing — while the
seats' tokens were estimated from their texts. The exact input: the export's turns with
``usage`` absent on every turn, the observer's included. Now the observer's tokens are estimated
the same way and marked ``observerTokensEstimated``."""

from __future__ import annotations

from typing import Any

from roundtabled.eval.spending import CHARS_PER_TOKEN, observer_spend


def test_an_observer_whose_provider_reports_no_usage_is_estimated_not_zero() -> None:
    turns: list[dict[str, Any]]
    turns = [
        {"kind": "turn", "round": 1, "agent": "pm", "response": "a" * 400, "usage": None},
        {"kind": "turn", "round": 2, "agent": "pm", "response": "b" * 400, "usage": None},
        {"kind": "observer", "round": 2, "response": "c" * 200, "usage": None},
    ]
    spent = observer_spend(turns, "t" * 40)
    assert spent == {"calls": 1, "tokens": 1040 // CHARS_PER_TOKEN, "estimated": True}
    turns[2]["usage"] = {"input": 300, "output": 50, "cost": 0.0}
    assert observer_spend(turns, "t") == {"calls": 1, "tokens": 350, "estimated": False}
    assert observer_spend(turns[:2], "t") == {"calls": 0, "tokens": 0, "estimated": False}
