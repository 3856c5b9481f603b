"""Regression (review of the independent opening): one rule of "this turn is final"
(:func:`roundtabled.core.history.turn_is_final`), used by the machine and the opening.

A step whose every tool was refused (the default ``permission_policy = reject``) ends the turn
once the session is idle: in a seat's session of the opening as in the roundtable's session, the
seat is settled at once, not after the whole turn timeout.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from roundtabled import ids
from roundtabled.core import messages, opening
from roundtabled.core.commands import PromptSeat, SeatSettled
from roundtabled.core.history import turn_is_final
from roundtabled.core.opening import OpeningObservation, SeatView
from roundtabled.opencode import v1_wire
from tests.unit.test_opening_properties import S2, SIGNER, TIMEOUT_S, setup, user_message

FINISHES = st.sampled_from(["stop", "length", "tool-calls", "unknown", None, "other"])
TOOL_STATES = st.sampled_from(["completed", "error", "running"])


def step(
    parent: str,
    finish: str | None,
    tools: list[str],
    *,
    completed: bool = True,
    error: bool = False,
) -> dict[str, Any]:
    info: dict[str, Any] = {
        "id": ids.message_id(),
        "role": "assistant",
        "parentID": parent,
        "agent": "a0",
        "time": {"created": 1, **({"completed": 2} if completed else {})},
    }
    if finish is not None:
        info["finish"] = finish
    if error:
        info["error"] = {"name": "APIError", "data": {"message": "boom"}}
    parts: list[dict[str, Any]] = [
        {"type": "tool", "tool": "read", "state": {"status": s, "output": "x"}} for s in tools
    ]
    return {"info": info, "parts": parts}


@given(
    steps=st.lists(
        st.tuples(FINISHES, st.lists(TOOL_STATES, max_size=3), st.booleans(), st.booleans()),
        max_size=4,
    )
)
def test_an_idle_event_never_makes_final_what_the_idle_status_would_not(
    steps: list[tuple[str | None, list[str], bool, bool]],
) -> None:
    """From events (``idle=False``: the idle may be stale) a turn is final only when it is final
    for a session known idle, and never while a step is incomplete."""
    parent = ids.message_id()
    raw = [step(parent, f, t, completed=c, error=e) for f, t, c, e in steps]
    answers = [v for v in (v1_wire.message_view(m, S2, SIGNER) for m in raw) if v is not None]
    answers_ = [a for a in answers if isinstance(a, messages.AnswerView)]
    if turn_is_final(answers_, idle=False):
        assert turn_is_final(answers_, idle=True)
    if any(not a.completed for a in answers_) or not answers_:
        assert not turn_is_final(answers_, idle=True)


def test_an_opening_seat_whose_tools_were_all_refused_is_settled_at_once() -> None:
    """Exact input: one seat of an independent opening; its only step calls ``read`` and ends
    ``tool-calls`` with the tool refused (part state ``error``); the seat's session is idle.
    Before the shared rule the opening waited out the turn timeout (60 s here)."""
    now = 1_000_000
    conf = setup(1)
    rnd = opening.start(["a0"], [ids.message_id() for _ in range(3)], now)
    sid = "ses_seat0000000001"
    obs = OpeningObservation(
        now=now, status="idle", messages=(), children=((sid, 0),), seats={sid: SeatView("idle")}
    )
    d = opening.step(rnd, obs, conf)
    (prompt,) = [c for c in d.commands if isinstance(c, PromptSeat)]
    rnd = d.round
    seat_msgs = [
        user_message(prompt.message_id, prompt.text, prompt.marker, sid),
        step(prompt.message_id, "tool-calls", ["error"]),
    ]
    obs = OpeningObservation(
        now=now + 1_000,
        status="idle",
        messages=(),
        children=((sid, 0),),
        seats={
            sid: SeatView(
                status="idle",
                messages=tuple(v1_wire.message_view(m, sid, SIGNER) for m in seat_msgs),
                found=True,
                accepted=True,
            )
        },
    )
    d = opening.step(rnd, obs, conf)
    settled = [c for c in d.commands if isinstance(c, SeatSettled)]
    assert len(settled) == 1, (d.commands, d.wake_at, TIMEOUT_S)
    assert [t.tool_name for t in settled[0].entry.tool_calls] == ["read"]
