"""Roundtable states built by hand for the pure-core tests: one seat turn, one finished debate.

The defaults are a healthy finished two-seat debate (pm, dev × 2 rounds, completed); each test
overrides what it is about.
"""

from __future__ import annotations

from typing import Any

from roundtabled.core.state import EndReason, HistoryEntry, Phase, RoundtableState, Usage


def seat_turn(
    agent: str, rnd: int, usage: Usage | None = None, *, failed: bool = False
) -> HistoryEntry:
    """``agent``'s answered turn of round ``rnd`` (1-based) with ``usage`` (default: none
    recorded); ``failed``: an empty reply with the server's error instead."""
    return HistoryEntry.model_validate(
        {
            "agent": agent,
            "round": rnd,
            "response": "" if failed else f"{agent} answers in round {rnd}.",
            "kind": "turn",
            "finish": "stop",
            "usage": usage or Usage(),
            "has_error": failed,
            "error": "APIError: boom" if failed else None,
        }
    )


def finished(history: list[HistoryEntry], **extra: Any) -> RoundtableState:
    """A concluded roundtable of pm and dev × 2 rounds holding ``history``; ``extra`` overrides
    any field of the state."""
    data: dict[str, Any] = {
        "session_id": "ses_handbuilt000000001",
        "title": "Split?",
        "agents": ["pm", "dev"],
        "total_rounds": 2,
        "current_round": 2,
        "prompt": "Split the monolith?",
        "phase": Phase.DONE,
        "end_reason": EndReason.COMPLETED,
        "history": history,
        **extra,
    }
    return RoundtableState.model_validate(data)
