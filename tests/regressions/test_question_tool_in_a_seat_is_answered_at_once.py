"""Regression: the ``question`` tool in a seat.

Field failure: a seat whose agent may use OpenCode's ``question`` tool (a primary agent, or
``permission.question: allow``) asked the user a question; nobody is at a roundtable to answer, so
the seat stayed busy until the turn timeout and the debate stalled. Proves: the question is
answered with a rejection that tells the model no human is at the table, the seat's turn ends
within 5 s of the question being raised (the fault: the turn timeout), and the next seat speaks.
"""

from __future__ import annotations

from typing import Any

from roundtabled.errors import TransportError
from roundtabled.offline.scripted_actions import Text, tool_call
from roundtabled.offline.scripted_llm import ScriptedLLM
from tests.e2e.conftest import roundtable_config
from tests.e2e.edge_helpers import EventLog, wait_for

from .conftest import seat_turns

QUESTION_ARGS = {
    "questions": [
        {
            "question": "Which database should we pick?",
            "header": "Database",
            "options": [
                {"label": "Postgres", "description": "relational"},
                {"label": "Mongo", "description": "documents"},
            ],
        }
    ]
}


async def test_a_seat_calling_question_gets_no_human_answer_and_the_next_seat_speaks(
    rt_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """Failing input: pm is a *primary* agent with ``permission: {"*": "deny", "question":
    "allow"}``; ``agents=["pm","dev"]``, 1 round, ``turnTimeout=120``; pm's model calls
    ``question`` with one question, then (after the tool result) says a sentence."""
    cfg = roundtable_config(
        scripted_llm,
        extra_agents={"pm": {"mode": "primary", "permission": {"*": "deny", "question": "allow"}}},
    )
    rt = await rt_factory(cfg)
    rt.llm.script(
        tool_call("question", QUESTION_ARGS),
        Text(text="PM: with nobody to ask, I pick Postgres."),
        agent="pm",
    )
    rt.llm.script(Text(text="DEV: Postgres it is."), agent="dev")
    async with EventLog(rt) as events:
        s2 = await rt.start(agents=["pm", "dev"], prompt="Pick a database", turnTimeout=120)
        asked = await wait_for(lambda: events.of_type("question.asked"), 60, "question.asked")
        t_asked = asked[0][0]
        # the pm turn ends (its tool-followup is served) and dev is prompted within 5 s
        await rt.llm.wait_for_requests(1, within=30, session=s2, agent="dev")
        dev_req = rt.llm.requests_for(session=s2, agent="dev")[0]
        assert dev_req.t_mono - t_asked < 5.0, dev_req.t_mono - t_asked
        await rt.result(s2)
    pm_follow = rt.llm.requests_for(session=s2, agent="pm", kind="tool-followup")
    assert len(pm_follow) == 1
    tool_msgs = [m for m in pm_follow[0].messages if m["role"] == "tool"]
    answer = str(tool_msgs[-1]["content"])
    assert "no human" in answer.lower(), answer
    assert seat_turns(rt, s2)[:2] == ["pm", "dev"]
    # nothing left pending on the server
    pending = await rt.oc("GET", "/question", params={"directory": rt.directory})
    assert pending == []


async def test_a_rejected_question_ends_the_turn_and_the_debate_moves_on(
    rt_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """Same failing input, but the server refuses the answer so the daemon falls back to
    rejecting the question: OpenCode then ends pm's turn right after the tool step (last step
    ``finish: "tool-calls"``, no follow-up request). That turn is over — dev is prompted within
    5 s of the question instead of waiting for the 120 s turn timeout."""
    cfg = roundtable_config(
        scripted_llm,
        extra_agents={"pm": {"mode": "primary", "permission": {"*": "deny", "question": "allow"}}},
    )
    rt = await rt_factory(cfg)

    async def refuse(*args: Any, **kwargs: Any) -> None:
        raise TransportError("HTTP 400: scripted refusal", status=400, retryable=False)

    rt.daemon.engine.client.answer_question = refuse
    rt.llm.script(tool_call("question", QUESTION_ARGS), agent="pm")
    rt.llm.script(Text(text="DEV: I will decide then: Postgres."), agent="dev")
    async with EventLog(rt) as events:
        s2 = await rt.start(agents=["pm", "dev"], prompt="Pick a database", turnTimeout=120)
        asked = await wait_for(lambda: events.of_type("question.asked"), 60, "question.asked")
        await wait_for(lambda: events.of_type("question.rejected"), 10, "question.rejected")
        await rt.llm.wait_for_requests(1, within=30, session=s2, agent="dev")
        dev_req = rt.llm.requests_for(session=s2, agent="dev")[0]
        assert dev_req.t_mono - asked[0][0] < 5.0, dev_req.t_mono - asked[0][0]
        result = await rt.result(s2)
    assert rt.llm.requests_for(session=s2, agent="pm", kind="tool-followup") == []
    assert seat_turns(rt, s2)[:2] == ["pm", "dev"]
    assert result["endReason"] == "completed", result
