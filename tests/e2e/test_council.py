"""``council`` on the real server with the scripted LLM (docs/deliberation.md, "Protocols"):
every seat answers in its own session seeing only the topic; then every seat ranks the others'
answers in that same session, anonymised — asserted on the scripted model's recorded requests:
no ranking prompt names another seat or carries the ranking seat's own answer, no seat saw another's
answer before answering or another's ranking before ranking —; the rankings are recorded in the
roundtable's session; the observer, as chair, runs once and is given the aggregate rank; the
result carries ``verdict.protocol.council`` (the aggregate rank per answer and each seat's
reasons) and names a seat whose ranking did not count."""

from __future__ import annotations

import json
from typing import Any

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text

from .conftest import RT
from .test_verdict import VERDICT, verdict_reply

AGENTS = ["pm", "dev", "rv"]


def secret(agent: str) -> str:
    return f"COUNCIL-SECRET-OF-{agent.upper()}"


def answer(agent: str, label: str) -> Text:
    # An answer that signs itself: the ranking prompts must hide the name.
    return Text(
        text=f"As {agent}: {secret(agent)} I weighed it.\n"
        f"Position: {label} — {agent}'s view (confidence 7/10)"
    )


def text_of(req: Any) -> str:
    return json.dumps(req.messages)


def last_user_text(req: Any) -> str:
    users = [m for m in req.messages if m.get("role") == "user"]
    return json.dumps(users[-1])


async def test_a_council_answers_ranks_anonymised_and_the_chair_decides(rt: RT) -> None:
    rt.llm.script(answer("pm", "keep the monolith"), agent="pm")
    rt.llm.script(answer("dev", "split now"), agent="dev")
    rt.llm.script(answer("rv", "keep the monolith"), agent="rv")
    # Each seat's lineup starts after its own place: pm sees dev, rv (A, B); dev sees rv, pm;
    # rv sees pm, dev. dev gives no ranking.
    rt.llm.script(Text(text="Rank 1: Answer B — thorough\nRank 2: Answer A — thin"), agent="pm")
    rt.llm.script(Text(text="They are all fine."), agent="dev")
    rt.llm.script(Text(text="Rank 1: Answer A — clear\nRank 2: Answer B — rushed"), agent="rv")
    rt.llm.script(verdict_reply("Summary.", VERDICT), agent=OBSERVER_AGENT)
    s1 = await rt.new_parent()
    s2 = await rt.start(
        agents=AGENTS, prompt="Split the monolith?", parentSessionID=s1, protocol="council"
    )
    payload = await rt.result(s2, timeout=120)
    await rt.finalized(s2)
    result = payload["result"]
    kids = await rt.oc("GET", f"/session/{s2}/children")
    sessions = {
        AGENTS[int(c["metadata"]["roundtabledOpening"]["seat"])]: str(c["id"])
        for c in kids
        if "roundtabledOpening" in (c.get("metadata") or {})
    }
    assert sorted(sessions) == sorted(AGENTS)  # one session per seat, both rounds in it
    for agent, sid in sessions.items():
        reqs = rt.llm.requests_for(session=sid, kind="turn")
        assert [r.agent for r in reqs] == [agent, agent], f"{agent}: {len(reqs)} requests"
        opening, ranking = reqs
        others = [a for a in AGENTS if a != agent]
        for other in others:  # independence: nobody's answer before its own
            assert secret(other) not in text_of(opening)
        prompt = last_user_text(ranking)
        for other in others:
            assert secret(other) in prompt  # it ranks the others' answers…
            assert f"As {other}" not in prompt and f'"{other}' not in prompt  # …anonymised
            assert f" {other} " not in prompt and f"{other}'s" not in prompt
        assert secret(agent) not in prompt  # not its own in the prompt (its session has it)
    # No debate turn in the roundtable's session: the chair alone, who reads the aggregate rank.
    s2_reqs = rt.llm.requests_for(session=s2, kind="turn")
    assert [r.agent for r in s2_reqs] == [OBSERVER_AGENT]
    chair = text_of(s2_reqs[0])
    assert "You chair a council" in chair and "Aggregate rank" in chair
    c = result["verdict"]["protocol"]["council"]
    assert result["verdict"]["protocol"]["name"] == "council" and c["ran"] is True
    ranks = {r["author"]: r for r in c["aggregate"]}
    # pm ranked rv 1st, dev 2nd; rv ranked pm 1st, dev 2nd; dev's ranking did not count.
    assert ranks["dev"]["meanRank"] == 2.0 and ranks["rv"]["meanRank"] == 1.0
    assert ranks["pm"]["meanRank"] == 1.0
    assert [(g["by"], g["rank"], g["reason"]) for g in ranks["rv"]["ranks"]] == [
        ("pm", 1, "thorough")
    ]
    assert [d["agent"] for d in c["degraded"]] == ["dev"]
    assert c["aggregate"][-1]["author"] == "dev"
    # The rankings are recorded in S2 (attributed), after the openings.
    msgs = await rt.messages(s2)
    visible = json.dumps(msgs, ensure_ascii=False)
    for a in AGENTS:
        assert f"── {a} · ranking ──" in visible
    assert "Protocol: council — " in payload["text"]
    assert result["verdict"]["deliberation"]["rounds"] == 1
