"""The protocols on the real OpenCode 2.1.2 server, run by the 2.x shell (engine/v2run.py and
engine/v2_opening.py), with the scripted model (docs/deliberation.md, "Protocols"; what the 2.x
shell does: docs/design.md, "The 2.x shell").

``vote`` and ``adaptive``: every seat answers once in its own child session of S2, seeing only
the topic; what follows is the protocol's (the observer alone, or round 2 in S2 with every
opening in view). ``council``: the opening, then every seat ranks the others' answers,
anonymised, in its own session (a prompt of its own: 2.x answers a prompt sent with a used id
with the first admission), and the observer chairs. Independence is asserted on the scripted
model's recorded requests: no seat's request holds another seat's answer before it answered.
A daemon killed during council's ranking resumes it once.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from bench.env import control_call
from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.core.validation import parse_request
from roundtabled.offline.scripted_actions import Text
from tests.e2e.test_v2_roundtable import Env, env
from tests.fakes.daemon_proc import DaemonProc

__all__ = ["env"]  # the fixture, imported: one 2.x server for this module too

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]

AGENTS = ["pm", "dev", "rv"]
TOPIC = "Split the monolith?"


def secret(agent: str) -> str:
    return f"V2-SECRET-OF-{agent.upper()}"


def answer(agent: str, label: str, conf: int) -> Text:
    # An answer that signs itself: council's ranking prompts must hide the name.
    return Text(
        text=f"As {agent}: {secret(agent)} I weighed it.\n"
        f"Position: {label} — {agent}'s view (confidence {conf}/10)"
    )


def text_of(req: Any) -> str:
    return json.dumps(req.messages, ensure_ascii=False)


def last_user_text(req: Any) -> str:
    users = [m for m in req.messages if m.get("role") == "user"]
    return json.dumps(users[-1], ensure_ascii=False)


async def run(env: Env, **body: Any) -> tuple[str, dict[str, Any], int]:
    """Start ``body`` (the three seats, the topic, a new S1) after the caller's scripts and the
    observer's; returns S2's id, the result and where the model's request log stood before."""
    env.llm.script(Text(text="SUMMARY: keep the monolith."), agent=OBSERVER_AGENT)
    s1 = await env.parent()
    since = len(env.llm.requests)
    req = parse_request({"agents": AGENTS, "prompt": TOPIC, "parentSessionID": s1, **body})
    state = await env.runner.start(req)
    result = await env.runner.wait_result(state.session_id, 150)
    assert result is not None, "no result within 150 s"
    assert await env.runner.finalized(state.session_id, 60)
    return state.session_id, result, since


async def seat_sessions(env: Env, s2: str) -> dict[str, str]:
    """Each seat's own session (agent → id): S2's children."""
    kids = await env.port.client.children(s2)
    out = {}
    for c in kids:
        meta = (c.metadata or {}).get("roundtabledOpening")
        assert isinstance(meta, dict), c.metadata
        out[AGENTS[int(meta["seat"])]] = c.id
    assert sorted(out) == sorted(AGENTS) and len(kids) == len(AGENTS)
    return out


def turns(env: Env, since: int, session: str) -> list[Any]:
    return [r for r in env.llm.requests[since:] if r.kind == "turn" and r.session_id == session]


def assert_independent_openings(env: Env, since: int, sessions: dict[str, str]) -> None:
    """Each seat's first request is in its own session, as itself, on the topic, with no other
    seat's answer in it."""
    for agent, sid in sessions.items():
        opening = turns(env, since, sid)[0]
        assert opening.agent == agent
        text = text_of(opening)
        assert TOPIC in text
        for other in AGENTS:
            if other != agent:
                assert secret(other) not in text, f"{agent}'s opening saw {other}'s answer"


async def test_a_vote_on_2x_counts_independent_answers_and_only_the_observer_runs_in_s2(
    env: Env,
) -> None:
    env.llm.script(answer("pm", "keep the monolith", 8), agent="pm")
    env.llm.script(answer("dev", "split now", 6), agent="dev")
    env.llm.script(answer("rv", "Keep the monolith", 4), agent="rv")
    s2, result, since = await run(env, protocol="vote")
    assert result["endReason"] == "completed", result
    sessions = await seat_sessions(env, s2)
    assert_independent_openings(env, since, sessions)
    for sid in sessions.values():
        assert len(turns(env, since, sid)) == 1  # one answer per seat
    # no debate: the observer alone in S2, after every seat, reading every answer
    [observer] = turns(env, since, s2)
    assert observer.agent == OBSERVER_AGENT
    assert all(secret(a) in text_of(observer) for a in AGENTS)
    assert env.llm.requests.index(observer) > max(
        env.llm.requests.index(turns(env, since, sid)[0]) for sid in sessions.values()
    )
    proto = result["result"]["verdict"]["protocol"]
    assert proto["name"] == "vote"
    count = proto["count"]
    assert count["weighted"] is True and count["degraded"] == []
    assert [(s["stance"].lower(), sorted(s["seats"]), s["share"]) for s in count["stances"]] == [
        ("keep the monolith", ["pm", "rv"], 0.666667),
        ("split now", ["dev"], 0.333333),
    ]
    assert result["result"]["status"]["roundsCompleted"] == 1


async def test_adaptive_on_2x_debates_an_opening_below_the_threshold_with_every_opening_seen(
    env: Env,
) -> None:
    env.llm.script(answer("pm", "keep the monolith", 9), agent="pm")
    env.llm.script(answer("dev", "split now", 9), agent="dev")
    env.llm.script(answer("rv", "keep the monolith", 3), agent="rv")
    for a in AGENTS:
        env.llm.script(
            Text(text=f"Round 2 by {a}.\nPosition: keep the monolith — {a} (confidence 8/10)"),
            agent=a,
        )
    s2, result, since = await run(env, protocol="adaptive", rounds=2, adaptiveThreshold=0.8)
    assert result["endReason"] == "completed", result
    sessions = await seat_sessions(env, s2)
    assert_independent_openings(env, since, sessions)
    # round 2 in S2, in seat order, every seat seeing every opening; then the observer
    s2_reqs = turns(env, since, s2)
    assert [r.agent for r in s2_reqs] == [*AGENTS, OBSERVER_AGENT]
    for r in s2_reqs[:3]:
        for a in AGENTS:
            assert secret(a) in text_of(r), f"{r.agent} did not see {a}'s opening"
    proto = result["result"]["verdict"]["protocol"]
    assert proto["name"] == "adaptive"
    adaptive = proto["adaptive"]
    assert adaptive["stopped"] is False
    assert adaptive["share"] == 0.571429 and adaptive["threshold"] == 0.8
    assert result["result"]["status"]["roundsCompleted"] == 2


async def test_a_council_on_2x_ranks_anonymised_in_each_seat_s_session_and_the_chair_decides(
    env: Env,
) -> None:
    env.llm.script(answer("pm", "keep the monolith", 7), agent="pm")
    env.llm.script(answer("dev", "split now", 7), agent="dev")
    env.llm.script(answer("rv", "keep the monolith", 7), agent="rv")
    # Each seat's lineup starts after its own place: pm sees dev, rv (A, B); dev sees rv, pm;
    # rv sees pm, dev. dev gives no ranking.
    env.llm.script(Text(text="Rank 1: Answer B — thorough\nRank 2: Answer A — thin"), agent="pm")
    env.llm.script(Text(text="They are all fine."), agent="dev")
    env.llm.script(Text(text="Rank 1: Answer A — clear\nRank 2: Answer B — rushed"), agent="rv")
    s2, result, since = await run(env, protocol="council")
    assert result["endReason"] == "completed", result
    sessions = await seat_sessions(env, s2)
    assert_independent_openings(env, since, sessions)
    openings = [turns(env, since, sid)[0] for sid in sessions.values()]
    last_opening = max(env.llm.requests.index(r) for r in openings)
    for agent, sid in sessions.items():
        reqs = turns(env, since, sid)
        # both rounds in the seat's own session: the ranking is a turn of its own
        assert [r.agent for r in reqs] == [agent, agent], f"{agent}: {len(reqs)} requests"
        ranking = reqs[1]
        assert env.llm.requests.index(ranking) > last_opening  # every answer was in
        prompt = last_user_text(ranking)
        others = [a for a in AGENTS if a != agent]
        for other in others:
            assert secret(other) in prompt  # it ranks the others' answers…
            assert f"As {other}" not in prompt and f"{other}'s" not in prompt  # …anonymised
            assert f" {other} " not in prompt
        assert secret(agent) not in prompt  # not its own in the prompt (its session has it)
        for ranked in ("thorough", "all fine", "clear"):  # no seat's ranking in view
            assert ranked not in text_of(ranking)
    # the chair alone in S2, reading the aggregate rank and the rankings recorded there
    [chair] = turns(env, since, s2)
    assert chair.agent == OBSERVER_AGENT
    assert "Aggregate rank" in text_of(chair)
    for a in AGENTS:
        assert f"── {a} · ranking ──" in text_of(chair)
    proto = result["result"]["verdict"]["protocol"]
    assert proto["name"] == "council"
    c = proto["council"]
    assert c["ran"] is True
    ranks = {r["author"]: r for r in c["aggregate"]}
    # pm ranked rv 1st, dev 2nd; rv ranked pm 1st, dev 2nd; dev's ranking did not count.
    assert ranks["dev"]["meanRank"] == 2.0 and ranks["rv"]["meanRank"] == 1.0
    assert ranks["pm"]["meanRank"] == 1.0
    assert [d["agent"] for d in c["degraded"]] == ["dev"]


async def test_a_daemon_killed_during_council_s_ranking_on_2x_resumes_it_once(
    env: Env, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`kill -9` while pm's ranking runs in its session: the restarted daemon takes the ranking
    round up from S2's metadata (its own prompt ids, derived again alike); no opening and no
    ranking is asked twice, no seat session is created twice, the chair runs once, the council's
    ranking counts."""
    dp = DaemonProc(
        tmp_path_factory.mktemp("v2councilkill"),
        env.server.url,
        env.directory,
        password=str(env.server.password),
    )
    s1 = await env.parent()
    since = len(env.llm.requests)
    pms = len(env.llm.requests_for(agent="pm"))
    labels = ("keep the monolith", "split now", "keep the monolith")
    for a, label in zip(AGENTS, labels, strict=True):
        env.llm.script(answer(a, label, 7), agent=a)
    env.llm.script(
        Text(text="Rank 1: Answer B — thorough\nRank 2: Answer A — thin", first_byte_delay=3.0),
        agent="pm",
    )
    env.llm.script(Text(text="Rank 1: Answer B — sound\nRank 2: Answer A — bold"), agent="dev")
    env.llm.script(Text(text="Rank 1: Answer A — clear\nRank 2: Answer B — rushed"), agent="rv")
    env.llm.script(Text(text="SUMMARY: resumed."), agent=OBSERVER_AGENT)
    async with aiohttp.ClientSession() as http:
        try:
            await dp.start(http)

            async def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
                return await control_call(http, dp.url, dp.token, method, path, body, timeout=60)

            status, made = await call(
                "POST",
                "/v1/roundtables",
                {"agents": AGENTS, "prompt": TOPIC, "parentSessionID": s1, "protocol": "council"},
            )
            assert status == 200, made
            s2 = made["sessionID"]
            await env.llm.wait_for_requests(pms + 2, 60, agent="pm")  # pm's ranking runs
            dp.proc.kill()
            await dp.proc.wait()
            await dp.start(http)
            result: dict[str, Any] = {}
            for _ in range(6):
                status, result = await call("GET", f"/v1/roundtables/{s2}/result?wait=20")
                assert status == 200, result
                if result.get("done"):
                    break
            assert result.get("done"), (result, dp.log()[-3000:])
            assert result["endReason"] == "completed", result
        finally:
            dp.kill_all()
    sessions = await seat_sessions(env, s2)  # three children: none created twice
    for agent, sid in sessions.items():
        assert [r.agent for r in turns(env, since, sid)] == [agent, agent], agent
    assert [r.agent for r in turns(env, since, s2)] == [OBSERVER_AGENT]
    c = result["result"]["verdict"]["protocol"]["council"]
    assert c["ran"] is True and c["degraded"] == []
    ranks = {r["author"]: r["meanRank"] for r in c["aggregate"]}
    # pm: rv 1st, dev 2nd; dev: pm 1st, rv 2nd; rv: pm 1st, dev 2nd
    assert ranks == {"pm": 1.0, "rv": 1.5, "dev": 2.0}
