"""Roundtable states built by hand for the pure-core tests: one seat turn, one finished debate,
one not started yet; and S2's messages as the server stores them (a daemon's signed prompt, a
model's reply), for the tests that play the server.

The defaults are a healthy finished two-seat debate (pm, dev × 2 rounds, completed); each test
overrides what it is about.
"""

from __future__ import annotations

from typing import Any

from roundtabled import ids
from roundtabled.core.state import (
    EndReason,
    HistoryEntry,
    Marker,
    Phase,
    RoundtableState,
    Signer,
    Usage,
    sign_marker,
)


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


def fresh(session_id: str, agents: list[str], rounds: int, **extra: Any) -> RoundtableState:
    """A roundtable in S2 ``session_id`` of ``agents`` × ``rounds`` rounds, titled ``t`` on the
    topic ``topic``, before its first turn; ``extra`` overrides any field of the state (its
    ``options``, ``history``, position or ``pending`` turn)."""
    data: dict[str, Any] = {
        "session_id": session_id,
        "title": "t",
        "agents": agents,
        "total_rounds": rounds,
        "prompt": "topic",
        **extra,
    }
    return RoundtableState.model_validate(data)


def raw_prompt(
    message_id: str,
    text: str,
    marker: Marker,
    session_id: str,
    signer: Signer,
    *,
    created: int = 1,
) -> dict[str, Any]:
    """The daemon's prompt as the server stores it (an item of ``GET /message``): ``text``, then
    an ignored part carrying ``marker`` signed with ``signer`` for ``session_id``; ``created``:
    epoch ms."""
    return {
        "info": {"id": message_id, "role": "user", "time": {"created": created}},
        "parts": [
            {"type": "text", "text": text},
            {
                "type": "text",
                "text": "label",
                "ignored": True,
                "metadata": sign_marker(marker, session_id, signer),
            },
        ],
    }


def raw_reply(
    parent: str,
    text: str,
    *,
    at: int,
    error: tuple[str, str] | None = None,
    step_start: bool = True,
    **info: Any,
) -> dict[str, Any]:
    """A completed step of agent ``x`` answering the prompt ``parent`` with ``text``, created and
    completed at ``at`` (epoch ms), as the server stores it: finished ``stop``, or failed with
    ``error`` (its name and message) instead; ``step_start``: a ``step-start`` part comes before
    the text; ``info``: more fields of the message's info (``tokens``)."""
    body: dict[str, Any] = {
        "id": ids.message_id(),
        "role": "assistant",
        "parentID": parent,
        "agent": "x",
        "time": {"created": at, "completed": at},
        **info,
    }
    if error is not None:
        body["error"] = {"name": error[0], "data": {"message": error[1]}}
    else:
        body["finish"] = "stop"
    parts: list[dict[str, Any]] = [{"type": "step-start"}] if step_start else []
    return {"info": body, "parts": [*parts, {"type": "text", "text": text}]}
