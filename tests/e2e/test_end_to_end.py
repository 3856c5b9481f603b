"""A roundtable end to end on the real OpenCode server with the scripted LLM.

The phases of docs/behaviour.md, the orchestrator's real tool path, what each model saw, and
the result reaching S1 exactly once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from roundtabled.core.card import CARD_FOOTER
from roundtabled.core.state import CONCLUDED_SUFFIX, DELIMITER_TEXT, META_HEADER, OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text, tool_call
from roundtabled.offline.scripted_llm import content_text

from .conftest import RT, SEAT_MODELS, roundtable_config
from .edge_helpers import ask_build

pytestmark = pytest.mark.both_majors  # also under --opencode-major 2 (tests/conftest.py)


def seat_requests(rt: RT, session: str) -> list[Any]:
    return [r for r in rt.llm.requests_for(session=session) if r.kind in ("turn", "tool-followup")]


async def test_basic_two_agents_one_round_default_observer(rt: RT) -> None:
    """Scenario 1: S2 is a child of S1, agents in order, observer summary is the result, the
    delimiter and the CONCLUDED title."""
    s1 = await rt.new_parent()
    rt.llm.script(Text(text="PM opening: ship the payments module behind a flag."), agent="pm")
    rt.llm.script(
        Text(text="DEV reply: a modular monolith keeps the blast radius small."), agent="dev"
    )
    rt.llm.script(Text(text="SUMMARY: flag-gated modular monolith."), agent=OBSERVER_AGENT)
    s2 = await rt.start(
        agents=["pm", "dev"], prompt="What architecture for payments?", parentSessionID=s1
    )
    result = await rt.result(s2)
    assert result["sessionID"] == s2
    assert "SUMMARY: flag-gated modular monolith." in result["summary"]
    await rt.finalized(s2)

    info = await rt.session(s2)
    assert info["parentID"] == s1
    assert info["title"] == "(Roundtable) - What architecture for payments?" + CONCLUDED_SUFFIX

    said = await rt.transcript(s2)
    answers = [m for m in said if m.role == "assistant"]
    assert [m.agent for m in answers] == ["pm", "dev", OBSERVER_AGENT]
    await rt.wait_idle(s2)
    said = await rt.transcript(s2)
    if rt.major == 1:
        assert DELIMITER_TEXT in said[-1].text
    else:  # 2.x posts no delimiter: every message there is answered (docs/design.md)
        assert all(DELIMITER_TEXT not in m.text for m in said)
    # The model requests: pm, dev, then the observer, nothing else.
    kinds = [(r.agent, r.kind) for r in rt.llm.requests_for(session=s2)]
    assert kinds == [("pm", "turn"), ("dev", "turn"), (OBSERVER_AGENT, "turn")]


async def test_explicit_observer_three_agents_two_rounds(rt: RT) -> None:
    """Scenario 2: 3 agents × 2 rounds with observer rv: the observer turn runs as rv."""
    s1 = await rt.new_parent()
    s2 = await rt.start(
        agents=["pm", "dev", "rv"],
        prompt="Should we migrate to microservices?",
        rounds=2,
        observer="rv",
        parentSessionID=s1,
    )
    result = await rt.result(s2)
    reqs = [r for r in rt.llm.requests_for(session=s2) if r.kind == "turn"]
    assert [r.agent for r in reqs] == ["pm", "dev", "rv", "pm", "dev", "rv", "rv"]
    observer_req = reqs[-1]
    assert "Your role: rv" in observer_req.last_user_text
    assert result["summary"].strip() == observer_req.reply_text.strip()


async def test_builtin_observer_prompt_used(rt: RT) -> None:
    """Scenario 3: same debate without observer → the built-in five-section prompt, run by the
    hidden tool-less observer agent."""
    s1 = await rt.new_parent()
    s2 = await rt.start(
        agents=["pm", "dev", "rv"],
        prompt="Should we migrate to microservices?",
        rounds=2,
        parentSessionID=s1,
    )
    await rt.result(s2)
    obs = rt.llm.requests_for(session=s2, agent=OBSERVER_AGENT)
    assert len(obs) == 1
    prompt = obs[0].last_user_text
    for section in (
        "Executive summary",
        "Key points",
        "Decisions or convergences",
        "Remaining open questions",
        "Suggested next steps",
    ):
        assert section in prompt
    assert obs[0].tools == []  # the built-in observer cannot run tools
    assert obs[0].model == "orchestrator-1" or obs[0].model  # the server's default model


async def test_unknown_agent_error_lists_available_no_session_created(rt: RT) -> None:
    """Scenario 15: an unknown agent → ``Error:`` naming it and listing the available agents;
    no session is created."""
    body: dict[str, Any] = {"agents": ["pm", "ghost"], "prompt": "x", "directory": rt.directory}
    if rt.major == 2:  # a start on 2.x names its parent
        body["parentSessionID"] = await rt.new_parent()
    before = await rt.sessions()
    status, data = await rt.api("POST", "/v1/roundtables", body)
    assert status == 400
    assert data["error"].startswith("Error:")
    assert "'ghost'" in data["error"] and "Available agents:" in data["error"]
    for name in ("pm", "dev", "rv"):
        assert name in data["error"]
    assert data["field"] == "agents"
    assert await rt.sessions() == before


async def test_requests_carry_topic_attribution_models_and_never_the_state(rt: RT) -> None:
    """What each model saw: the topic and who spoke since its last turn; never a state block;
    each seat on its own configured model; old turn prompts hidden (bounded bytes)."""
    s1 = await rt.new_parent()
    topic = "Which ORM should we use for the billing service?"
    s2 = await rt.start(agents=["pm", "dev", "rv"], prompt=topic, rounds=2, parentSessionID=s1)
    await rt.result(s2)
    reqs = [r for r in rt.llm.requests_for(session=s2) if r.kind == "turn"]
    seat_reqs = reqs[:-1]
    assert [r.agent for r in seat_reqs] == ["pm", "dev", "rv"] * 2
    for r in reqs:
        whole = json.dumps(r.messages) + r.system
        assert META_HEADER not in whole and "ROUNDTABLE META" not in whole
        assert CARD_FOOTER not in whole  # nor the state card
    for i, r in enumerate(seat_reqs):
        assert topic in r.last_user_text
        assert r.agent is not None and r.model == SEAT_MODELS[r.agent]
        assert f"Current agent: {r.agent}" in r.last_user_text
        assert f"Round {i // 3 + 1}/2" in r.last_user_text
        if i > 0:
            prev = seat_reqs[i - 1]
            assert f"{prev.agent} (round {(i - 1) // 3 + 1})" in r.last_user_text
        # Only the opening prompt and the current prompt are visible to the model.
        user_msgs = [m for m in r.messages if m["role"] == "user"]
        assert len(user_msgs) == (1 if i == 0 else 2)
    # Round 2 prompts are not larger than round 1 prompts (no growth with the round number).
    sizes = [len(r.last_user_text.replace(topic, "")) for r in seat_reqs]
    assert max(sizes[3:]) <= max(sizes[:3]) + 200
    if rt.major == 1:
        # The handoffs were decided from the event mirror (no read of S2 before the prompt; the
        # hiding PATCH sent beside the prompt still reached the server before the model
        # request). The 2.x shell reads each turn's outcome: it keeps no such mirror.
        assert rt.daemon.engine.metrics.fast_handoffs >= 4, rt.daemon.engine.metrics.fast_handoffs


async def test_result_reaches_s1_exactly_once_when_nobody_waits(rt: RT) -> None:
    """The result lands in S1 once: as a noReply message when no tool call waits for it (2.x: a
    synthetic message parked in S1's inbox until its next turn), and no extra model turn in
    S1."""
    s1 = await rt.new_parent()
    s2 = await rt.start(agents=["pm", "dev"], prompt="Pick a queue", parentSessionID=s1)
    result = await rt.result(s2)
    # Delivered, the worker retired and S1 idle: a second delivery or a model turn in S1
    # would have happened by now.
    await rt.settled(s2)
    said = await rt.transcript(s1, parked=True)
    assert len(said) == 1, said
    assert result["summary"] in said[0].text
    assert not rt.llm.requests_for(session=s1)


async def test_available_agents_through_the_real_tool(rt: RT) -> None:
    """Scenario 16: the orchestrator's model calls ``available_agents``; OpenCode runs the shim,
    which asks the daemon."""
    s1 = await rt.new_parent()
    rt.llm.script(tool_call("available_agents"), Text(text="I know the agents now."), agent="build")
    await ask_build(rt, s1, "Who can debate?")
    follow = await rt.llm.wait_for_requests(1, within=30, session=s1, kind="tool-followup")
    tool_msgs = [m for m in follow[0].messages if m["role"] == "tool"]
    assert tool_msgs
    content = content_text(tool_msgs[-1]["content"])
    assert content.startswith("Available agents:"), content
    for name in ("pm", "dev", "rv", "build"):
        assert name in content
    assert OBSERVER_AGENT not in content  # hidden


async def test_orchestrator_runs_a_roundtable_through_the_tool(rt: RT) -> None:
    """The real path: build's model calls ``roundtable``; the debate runs; the tool result (JSON
    with sessionID and summary) reaches build's next request; nothing else is posted in S1."""
    s1 = await rt.new_parent()
    rt.llm.script(Text(text="SUMMARY-VIA-TOOL: consensus reached."), agent=OBSERVER_AGENT)
    rt.llm.script(
        tool_call(
            "roundtable", {"agents": ["pm", "dev"], "prompt": "Monorepo or polyrepo?", "rounds": 1}
        ),
        Text(text="The roundtable recommends a monorepo."),
        agent="build",
    )
    await ask_build(rt, s1, "Convene a roundtable on repo layout.")
    follow = await rt.llm.wait_for_requests(1, within=60, session=s1, kind="tool-followup")
    tool_msgs = [m for m in follow[0].messages if m["role"] == "tool"]
    payload = json.loads(content_text(tool_msgs[-1]["content"]))
    assert "SUMMARY-VIA-TOOL: consensus reached." in payload["summary"]
    s2 = payload["sessionID"]
    info = await rt.session(s2)
    assert info["parentID"] == s1
    await rt.settled(s2)
    # Exactly once: the tool result, and no extra noReply message in S1.
    said = await rt.transcript(s1, parked=True)
    assert len([m for m in said if m.role == "user"]) == 1, said
    assert sum("SUMMARY-VIA-TOOL" in m for m in await rt.stored(s1)) == 1


async def test_each_seat_runs_on_its_own_model(rt_factory: Any, scripted_llm: Any) -> None:
    """Two seats on different scripted model ids and the observer on a third."""
    cfg = roundtable_config(
        scripted_llm, extra_agents={OBSERVER_AGENT: {"model": "scripted/observer-1"}}
    )
    rt = await rt_factory(cfg)
    s2 = await rt.start(agents=["dev", "pm"], prompt="Tabs or spaces?")
    await rt.result(s2)
    reqs = [r for r in rt.llm.requests_for(session=s2) if r.kind == "turn"]
    assert [(r.agent, r.model) for r in reqs] == [
        ("dev", "debater-2"),
        ("pm", "debater-1"),
        (OBSERVER_AGENT, "observer-1"),
    ]
