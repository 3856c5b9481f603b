"""Permission and question requests of seats, and what the engine reports (status, progress)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from roundtabled.errors import TransportError
from roundtabled.offline.scripted_actions import Text
from tests.fakes.fake_opencode import AskPermission, AskQuestion

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]
ORDER = ["pm", "dev", "roundtable-observer"]


@pytest.mark.parametrize(
    ("ask", "reply", "words", "response"),
    [
        pytest.param(
            AskPermission(),
            "reject",
            lambda message: message,  # the permission reply's message
            "PM: without the file, then.",
            id="permission",
        ),
        pytest.param(
            AskQuestion(),
            "answer",
            lambda answers: answers[0][0],  # the first question's answer
            "PM: I assume A.",
            id="question",
        ),
    ],
)
async def test_a_request_of_a_seat_is_answered_that_no_human_is_there_and_the_seat_reads_it(
    harness: H,
    ask: AskPermission | AskQuestion,
    reply: str,
    words: Callable[[Any], str],
    response: str,
) -> None:
    """Policy reject for a permission, an answer for a question: the reply carries a message,
    so the server calls the seat's model again with it as the tool's feedback (contract test of
    the fake); the seat answers without the tool and the next seat speaks."""
    h = await harness()
    h.fake.script(ask, Text(text=response), agent="pm")
    s2 = await h.start()
    await h.result(s2)
    ((_, kind, answer),) = h.fake.answered_requests
    assert kind == reply
    assert "No human is at this roundtable" in words(answer)
    (follow,) = h.fake.requests_for(session=s2, agent="pm", kind="tool-followup")
    tool_msgs = [m["content"] for m in follow.messages if m["role"] == "tool"]
    assert "No human is at this roundtable" in tool_msgs[-1]
    assert h.entries(s2)[0].response == response
    assert h.prompted_agents(s2) == ORDER


async def test_allow_once_lets_the_tool_run_and_the_seat_continue(harness: H) -> None:
    h = await harness()
    h.fake.script(AskPermission(), Text(text="PM: read it."), agent="pm")
    s2 = await h.start(permissionPolicy="allow-once")
    await h.result(s2)
    assert [reply for _, reply, _ in h.fake.answered_requests] == ["once"]
    assert h.entries(s2)[0].response == "PM: read it."
    assert len(h.fake.requests_for(session=s2, agent="pm", kind="tool-followup")) == 1


async def test_policy_ask_leaves_the_request_to_a_person_and_warns(harness: H) -> None:
    h = await harness()
    h.fake.script(AskPermission(permission="external_directory"), agent="pm")
    s2 = await h.start(permissionPolicy="ask", turnTimeout=60)
    await h.clock.advance(5)
    assert h.fake.answered_requests == []
    warnings = [t["message"] for t in h.fake.toasts if t["variant"] == "warning"]
    assert len(warnings) == 1 and "external_directory" in warnings[0]
    await h.result(s2)
    assert h.entries(s2)[0].error == "timed out after 60 s"


async def test_a_refused_answer_falls_back_to_rejecting_the_question(harness: H) -> None:
    h = await harness()
    h.fake.fail_next("answer_question", TransportError("HTTP 400", status=400, retryable=False))
    h.fake.script(AskQuestion(), agent="pm")
    s2 = await h.start()
    await h.result(s2)
    assert [k for _, k, _ in h.fake.answered_requests] == ["reject"]
    assert h.prompted_agents(s2) == ORDER


async def test_a_request_of_a_session_that_is_no_roundtable_is_left_alone(harness: H) -> None:
    h = await harness()
    other = await h.parent("someone else's session")
    h.fake.emit(
        "permission.asked",
        {"id": "per_foreign0001", "sessionID": other, "permission": "bash", "patterns": ["*"]},
    )
    await h.clock.advance(1)
    assert h.fake.calls_of("reply_permission") == []


async def test_a_request_whose_event_was_lost_is_answered_by_the_sweep_on_reconnect(
    harness: H,
) -> None:
    h = await harness()
    h.fake.event_filter = lambda e: [] if e["type"] == "permission.asked" else [e]
    h.fake.script(AskPermission(), agent="pm")
    s2 = await h.start()
    await h.until(lambda: h.fake.pending_requests, within=5)
    await h.clock.advance(2)
    assert h.fake.answered_requests == []
    await h.reconnect()
    await h.result(s2)
    assert [reply for _, reply, _ in h.fake.answered_requests] == ["reject"]
    assert h.prompted_agents(s2) == ORDER


async def test_status_reports_round_agent_and_errors_while_running(harness: H) -> None:
    h = await harness()
    h.fake.script(Text(text="DEV: slow.", first_byte_delay=30), agent="dev")
    s2 = await h.start(agents=["pm", "dev"], rounds=2)
    await h.until(lambda: h.status(s2)["agent"] == "dev", within=10)  # type: ignore[index]
    st = h.status(s2)
    assert st is not None
    assert (st["phase"], st["round"], st["totalRounds"], st["turns"]) == ("active", 1, 2, 1)
    assert st["errors"] == [] and st["finalized"] is False
    assert list(h.engine.tables) == [s2] and not h.engine.recent


async def test_a_subscriber_sees_prompts_turns_and_done_in_order(harness: H) -> None:
    h = await harness()
    h.fake.script(Text(text="PM: a.", first_byte_delay=1), agent="pm")
    s2 = await h.start()
    q = h.engine.subscribe(s2)
    await h.result(s2)
    items = []
    while not q.empty():
        items.append(q.get_nowait())
    kinds = [(i["type"], i.get("agent") or (i.get("entry") or {}).get("agent")) for i in items]
    assert kinds[0] == ("turn", "pm")
    assert ("prompt", "dev") in kinds and ("prompt", "roundtable-observer") in kinds
    assert kinds.index(("prompt", "dev")) < kinds.index(("turn", "dev"))
    assert kinds[-1][0] == "done"
    assert [k for k in kinds if k[0] == "turn"] == [
        ("turn", "pm"),
        ("turn", "dev"),
        ("turn", "roundtable-observer"),
    ]


async def test_wait_result_returns_none_before_the_end(harness: H) -> None:
    h = await harness()
    h.fake.script(Text(text="PM: slow.", first_byte_delay=100), agent="pm")
    s2 = await h.start()
    assert await h.engine.wait_result(s2, 50) is None
    assert (await h.result(s2))["endReason"] == "completed"
