"""The protocols on the real server with the scripted LLM (docs/deliberation.md, "Protocols").

``vote``: every seat answers once in its own session, in parallel, seeing only the topic; no seat
turn runs in the roundtable's session, the observer consolidates, and the result counts the
answers by stance, confidence-weighted only when every seat stated a confidence, a failed seat
named. ``adaptive``: the same opening; it stops there when the leading stance's weighted share
reaches the threshold, else round 2 runs in the roundtable's session with every opening in view.
Independence is asserted on the scripted model's recorded requests: no seat's request carries
another seat's answer. A field a protocol does not use is refused in one line; the dry run prices
each protocol.
"""

from __future__ import annotations

import json
from typing import Any

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import HttpError, Text

from .conftest import RT
from .test_verdict import VERDICT, verdict_reply

AGENTS = ["pm", "dev", "rv"]


def secret(agent: str) -> str:
    return f"ANSWER-SECRET-OF-{agent.upper()}"


def answer(agent: str, label: str, conf: int | None) -> Text:
    c = f" (confidence {conf}/10)" if conf is not None else ""
    return Text(text=f"{secret(agent)} I weighed it.\nPosition: {label} — {agent}'s view{c}")


def text_of(req: Any) -> str:
    return json.dumps(req.messages)


async def seat_sessions(rt: RT, s2: str) -> dict[str, str]:
    """Each seat's own session (agent → id) among the roundtable's children."""
    kids = await rt.oc("GET", f"/session/{s2}/children")
    return {
        AGENTS[int(c["metadata"]["roundtabledOpening"]["seat"])]: str(c["id"])
        for c in kids
        if "roundtabledOpening" in (c.get("metadata") or {})
    }


async def run(rt: RT, **body: Any) -> tuple[str, dict[str, Any]]:
    rt.llm.script(verdict_reply("Summary.", VERDICT), agent=OBSERVER_AGENT)
    s1 = await rt.new_parent()
    s2 = await rt.start(agents=AGENTS, prompt="Split the monolith?", parentSessionID=s1, **body)
    payload = await rt.result(s2, timeout=120)
    await rt.finalized(s2)
    return s2, payload["result"]


def assert_independent(rt: RT, sessions: dict[str, str]) -> None:
    """Each seat answered once, in its own session, and its request held no other seat's text."""
    assert sorted(sessions) == sorted(AGENTS)
    for agent, sid in sessions.items():
        [req] = rt.llm.requests_for(session=sid, kind="turn")
        assert req.agent == agent
        text = text_of(req)
        assert "Split the monolith?" in text
        for other in AGENTS:
            if other != agent:
                assert secret(other) not in text, f"{agent}'s answer saw {other}'s"


async def test_a_vote_counts_independent_answers_weighted_by_confidence(rt: RT) -> None:
    rt.llm.script(answer("pm", "keep the monolith", 8), agent="pm")
    rt.llm.script(answer("dev", "split now", 6), agent="dev")
    rt.llm.script(answer("rv", "Keep the monolith", 4), agent="rv")
    s2, result = await run(rt, protocol="vote")
    assert_independent(rt, await seat_sessions(rt, s2))
    # No debate: the only model request in the roundtable's session is the observer's.
    assert [r.agent for r in rt.llm.requests_for(session=s2, kind="turn")] == [OBSERVER_AGENT]
    observer = rt.llm.requests_for(session=s2, kind="turn")[0]
    for a in AGENTS:
        assert secret(a) in text_of(observer)  # it reads every answer
    assert "Protocol vote: every seat answered on its own" in text_of(observer)  # not a debate
    proto = result["verdict"]["protocol"]
    assert proto["name"] == "vote"
    count = proto["count"]
    assert count["weighted"] is True and count["degraded"] == []
    assert [(s["stance"].lower(), sorted(s["seats"]), s["share"]) for s in count["stances"]] == [
        ("keep the monolith", ["pm", "rv"], 0.666667),
        ("split now", ["dev"], 0.333333),
    ]
    assert count["leader"] == count["stances"][0]["stance"]
    assert sorted(count["stances"][0]["labels"]) == ["Keep the monolith", "keep the monolith"]
    assert result["status"]["endReason"] == "completed"
    assert result["status"]["roundsCompleted"] == 1
    # What deliberation changed: one round, so the opening is the final.
    d = result["verdict"]["deliberation"]
    assert d["rounds"] == 1 and d["opening"] == "independent"
    leader = count["leader"]
    assert f"Protocol: vote — “{leader}” 2 of 3" in json.dumps(result, ensure_ascii=False)


async def test_a_vote_with_an_unstated_confidence_and_a_failed_seat_says_unknown(rt: RT) -> None:
    rt.llm.script(answer("pm", "keep the monolith", 8), agent="pm")
    rt.llm.script(HttpError(status=400, message="dev provider exploded"), agent="dev")
    rt.llm.script(answer("rv", "keep the monolith", None), agent="rv")
    _, result = await run(rt, protocol="vote")
    count = result["verdict"]["protocol"]["count"]
    assert count["weighted"] is False
    assert [(s["stance"], s["seats"], s["share"]) for s in count["stances"]] == [
        ("keep the monolith", ["pm", "rv"], None)  # unknown, never a number
    ]
    [degraded] = count["degraded"]
    assert degraded["agent"] == "dev" and "dev provider exploded" in degraded["why"]
    assert result["status"]["degraded"] is True


async def test_adaptive_stops_at_an_opening_whose_leader_holds_the_threshold(rt: RT) -> None:
    for a, conf in zip(AGENTS, (8, 7, 9), strict=True):
        rt.llm.script(answer(a, "keep the monolith", conf), agent=a)
    s2, result = await run(rt, protocol="adaptive", rounds=3)
    assert_independent(rt, await seat_sessions(rt, s2))
    assert [r.agent for r in rt.llm.requests_for(session=s2, kind="turn")] == [OBSERVER_AGENT]
    adaptive = result["verdict"]["protocol"]["adaptive"]
    assert adaptive["stopped"] is True and adaptive["share"] == 1.0
    assert adaptive["threshold"] == 0.67
    assert result["status"]["endReason"] == "converged"
    assert any(n.startswith("adaptive: ") for n in result["status"]["notes"])


async def test_adaptive_debates_an_opening_below_the_threshold(rt: RT) -> None:
    rt.llm.script(answer("pm", "keep the monolith", 9), agent="pm")
    rt.llm.script(answer("dev", "split now", 9), agent="dev")
    rt.llm.script(answer("rv", "keep the monolith", 3), agent="rv")
    for a in AGENTS:
        rt.llm.script(Text(text=f"Round 2.\nPosition: keep the monolith — {a} (confidence 8/10)"))
    s2, result = await run(rt, protocol="adaptive", rounds=2, adaptiveThreshold=0.8)
    assert_independent(rt, await seat_sessions(rt, s2))
    s2_reqs = rt.llm.requests_for(session=s2, kind="turn")
    assert [r.agent for r in s2_reqs] == [*AGENTS, OBSERVER_AGENT]
    for r in s2_reqs[:3]:
        for a in AGENTS:
            assert secret(a) in text_of(r), f"{r.agent} did not see {a}'s opening"
    assert "Protocol adaptive: every seat first answered on its own" in text_of(s2_reqs[-1])
    adaptive = result["verdict"]["protocol"]["adaptive"]
    assert adaptive["stopped"] is False
    assert adaptive["share"] == 0.571429 and adaptive["threshold"] == 0.8
    assert "below the threshold 0.8: debated" in adaptive["why"]
    d = result["verdict"]["deliberation"]
    assert d["openingMajority"]["stance"] == "keep the monolith"
    assert result["status"]["roundsCompleted"] == 2


async def test_a_field_the_protocol_does_not_use_is_refused_and_the_dry_run_prices_each(
    rt: RT,
) -> None:
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {"agents": AGENTS, "prompt": "p", "protocol": "vote", "rounds": 2},
    )
    assert status == 400, data
    assert data["error"] == (
        "Error: rounds is not used by protocol 'vote' (every seat answers once); omit it"
    )
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {
            "agents": AGENTS,
            "prompt": "p",
            "protocol": "adaptive",
            "dryRun": True,
            "directory": rt.directory,
        },
    )
    assert status == 200, data
    plan = data["plan"]
    assert plan["protocol"] == "adaptive" and plan["rounds"] == 3
    assert set(plan["protocols"]) == {"debate", "vote", "adaptive", "council"}
    assert plan["protocols"]["vote"]["turns"] == 3
    assert "adaptive (this call): 3 seat turns" in data["text"]
