"""Regression "extend after restart keeps the history".

Field failure: a roundtable concluded, the daemon was restarted (nothing in memory), and the user
extended it. The new daemon rebuilt the state from S2 but lost the round-1 history: the round-2
prompts said nobody had spoken, the second summary covered round 2 only, the title got a second
`` · CONCLUDED`` and S1 received the old result again.

Proves, on the real ``opencode serve`` with the scripted model: after the restart the extension's
round-2 turns run in the original seat order, each request carries the round-1 contributions (in
its attribution block where the seat has not heard them yet, and as the conversation), the second
summary covers rounds 1–2, S1 receives exactly one new result, and the title ends with a single
`` · CONCLUDED``.
"""

from __future__ import annotations

from typing import Any

from roundtabled.core.state import CONCLUDED_SUFFIX
from roundtabled.offline.scripted_actions import Text
from tests.e2e.edge_helpers import memory_state
from tests.fakes.daemon_proc import text_of

AGENTS = ["pm", "dev", "rv"]
R1 = {
    a: f"{a.upper()} round one: the cost concern is {i}0k per month."
    for i, a in enumerate(AGENTS, 1)
}
R2 = {
    a: f"{a.upper()} round two: we cut the cost by {i} engineers." for i, a in enumerate(AGENTS, 1)
}


async def test_extend_after_a_daemon_restart_keeps_the_round_1_history(rt_factory: Any) -> None:
    """Exact failing input: agents pm, dev, rv × 1 round, observer rv; conclude; restart the
    daemon; extend with ``"Continue: address the cost concern"`` (1 more round)."""
    rt = await rt_factory()
    for a in AGENTS:
        rt.llm.script(Text(text=R1[a]), Text(text=R2[a]), agent=a)
    # rv's third request is its second observer turn; its first (after round 1) comes in between.
    s1 = await rt.new_parent()
    s2 = await rt.start(
        agents=AGENTS,
        prompt="Should we move to a cheaper cloud?",
        rounds=1,
        observer="rv",
        parentSessionID=s1,
    )
    first = await rt.result(s2)
    await rt.finalized(s2)
    assert len(await rt.messages(s1)) == 1
    n_before = len(rt.llm.requests_for(session=s2, kind="turn"))
    await rt.restart_daemon()
    assert s2 not in rt.daemon.engine.tables and s2 not in rt.daemon.engine.recent
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {
            "sessionID": s2,
            "directory": rt.directory,
            "prompt": "Continue: address the cost concern",
            "rounds": 1,
        },
    )
    assert status == 200, data
    second = await rt.result(s2)
    await rt.finalized(s2)
    reqs = rt.llm.requests_for(session=s2, kind="turn")[n_before:]
    assert [r.agent for r in reqs] == [*AGENTS, "rv"], [r.agent for r in reqs]
    turns, summary = reqs[:3], reqs[3]
    for req in turns:
        convo = "\n".join(str(m.get("content")) for m in req.messages)
        for a in AGENTS:
            assert R1[a] in convo, f"{req.agent}'s round-2 request lacks {a}'s round-1 reply"
        assert "Round 2/2" in req.last_user_text
        assert "address the cost concern" in req.last_user_text
    # Attribution: each seat is told who spoke since its own round-1 turn.
    assert f"- dev (round 1): “{R1['dev']}”" in turns[0].last_user_text
    assert f"- rv (round 1): “{R1['rv']}”" in turns[0].last_user_text
    assert f"- rv (round 1): “{R1['rv']}”" in turns[1].last_user_text
    assert f"- pm (round 2): “{R2['pm']}”" in turns[1].last_user_text
    assert f"- pm (round 2): “{R2['pm']}”" in turns[2].last_user_text
    assert f"- dev (round 2): “{R2['dev']}”" in turns[2].last_user_text
    # The second summary covers rounds 1–2.
    for a in AGENTS:
        assert f"── {a} · round 1 ──" in summary.last_user_text, a
        assert f"── {a} · round 2 ──" in summary.last_user_text, a
        assert R1[a] in summary.last_user_text and R2[a] in summary.last_user_text
    state = memory_state(rt, s2)
    assert [(e.agent, e.round) for e in state.seat_turns()] == [
        (a, r) for r in (1, 2) for a in AGENTS
    ]
    # S1: exactly one new result (the extension's), the first one untouched.
    await rt.settled(s2)
    msgs = await rt.messages(s1)
    assert len(msgs) == 2, [text_of(m)[:80] for m in msgs]
    assert first["summary"] in text_of(msgs[0])
    assert second["summary"] in text_of(msgs[1]) and second["summary"] != first["summary"]
    title = str((await rt.session(s2))["title"])
    assert title.endswith(CONCLUDED_SUFFIX) and title.count(CONCLUDED_SUFFIX.strip()) == 1, title
