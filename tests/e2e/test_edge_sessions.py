"""Deleted sessions, a person in S2, the conclusion and compaction on the real server with the
scripted LLM (docs/behaviour.md).

Proves:
- S2 deleted mid-debate: phase ``aborted``; S1 receives the exact interruption header and
  the partial history — as a noReply when S1 is idle, as the tool result when the ``roundtable``
  tool is waiting —; a toast; the daemon forgets it; late events of the deleted session change
  nothing (one message in S1, no further model request);
- S1 deleted: the turn streaming in S2 is aborted (the scripted LLM sees the disconnect),
  nothing else is prompted;
- a person writing in S2 during a turn: the message and the server's reply to it enter the
  history attributed to the user, the next seat is prompted only once S2 is idle again, and every
  seat speaks exactly once;
- after the conclusion the daemon ignores S2: a conversation there never changes the
  result already in S1;
- ``POST /session/{S2}/summarize`` mid-debate: the state survives and the debate completes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from roundtabled.core.result import INTERRUPTION_HEADER
from roundtabled.core.state import OBSERVER_AGENT, EndReason, Phase
from roundtabled.offline.scripted_actions import Hang, Text, tool_call

from .conftest import RT
from .edge_helpers import Toasts, ask_build, memory_state, stored_state, turn_agents, wait_for


def visible_text(msg: dict[str, Any]) -> str:
    return "\n".join(
        str(p.get("text") or "")
        for p in msg["parts"]
        if p.get("type") == "text" and not p.get("ignored")
    )


# ------------------------------------------------------------------------------------------------
# 4. S2 deleted (docs/behaviour.md, 'S2 deleted')
# ------------------------------------------------------------------------------------------------


async def test_s2_deleted_mid_turn_sends_partial_history_to_idle_s1_and_stops(rt: RT) -> None:
    s1 = await rt.new_parent()
    rt.llm.script(Text(text="PM: partial history survives."), agent="pm")
    rt.llm.script(Hang(max_seconds=120), agent="dev")
    async with Toasts(rt) as toasts:
        s2 = await rt.start(agents=["pm", "dev"], prompt="Delete me?", parentSessionID=s1)
        dev = (await rt.llm.wait_for_requests(1, within=30, session=s2, agent="dev"))[0]
        await rt.oc("DELETE", f"/session/{s2}")
        await toasts.wait_for("Roundtable interrupted")
        result = await rt.result(s2)
    assert result["phase"] == Phase.ABORTED.value
    assert result["endReason"] == EndReason.SESSION_DELETED.value
    assert result["text"].startswith(INTERRUPTION_HEADER)
    assert "PM: partial history survives." in result["text"]
    # The hanging turn was aborted (a deleted busy session keeps streaming otherwise).
    await wait_for(lambda: dev.disconnected, 10, "the dev stream to be aborted")
    msgs = await wait_for_messages(rt, s1, 1)
    assert visible_text(msgs[0]).startswith(INTERRUPTION_HEADER)
    assert "PM: partial history survives." in visible_text(msgs[0])
    # State cleared; late events of the deleted session change nothing.
    await wait_for(lambda: s2 not in rt.daemon.engine.tables, 10, "the daemon to forget S2")
    n_requests = len(rt.llm.requests)
    # A late event of the deleted S2 (an abort fires its idle): dispatched to a daemon that
    # holds no worker for S2, it can change nothing.
    await rt.drained_after(s2, lambda: rt.oc("POST", f"/session/{s2}/abort"))
    assert len(await rt.messages(s1)) == 1
    assert len(rt.llm.requests) == n_requests
    assert turn_agents(rt, s2) == ["pm", "dev"]


async def test_s2_deleted_while_the_tool_waits_returns_the_interruption_as_tool_result(
    rt: RT,
) -> None:
    s1 = await rt.new_parent()
    rt.llm.script(Text(text="PM says the tool path works."), agent="pm")
    rt.llm.script(Hang(max_seconds=120), agent="dev")
    rt.llm.script(
        tool_call("roundtable", {"agents": ["pm", "dev"], "prompt": "Interrupted topic"}),
        Text(text="The roundtable was interrupted."),
        agent="build",
    )
    await ask_build(rt, s1, "Convene a roundtable.")
    dev = (await rt.llm.wait_for_requests(1, within=60, agent="dev"))[0]
    assert dev.session_id is not None
    await rt.oc("DELETE", f"/session/{dev.session_id}")
    follow = await rt.llm.wait_for_requests(1, within=60, session=s1, kind="tool-followup")
    tool_msgs = [m for m in follow[0].messages if m["role"] == "tool"]
    payload = json.loads(str(tool_msgs[-1]["content"]))
    assert payload["sessionID"] == dev.session_id
    assert payload["summary"].startswith(INTERRUPTION_HEADER)
    assert "PM says the tool path works." in payload["summary"]
    await rt.wait_idle(s1, timeout=30)
    # Phase 4 complete: the delivery is recorded, no second one can follow.
    await rt.finalized(dev.session_id)
    msgs = await rt.messages(s1)
    # Exactly once: only through the tool, no extra noReply in S1.
    assert sum(INTERRUPTION_HEADER in json.dumps(m, ensure_ascii=False) for m in msgs) == 1


async def wait_for_messages(rt: RT, session: str, n: int, timeout: float = 20) -> list[Any]:
    found: list[Any] = []

    async def poll() -> bool:
        nonlocal found
        found = await rt.messages(session)
        return len(found) >= n

    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if await poll():
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"{session} has {len(found)} message(s), expected {n}")


# ------------------------------------------------------------------------------------------------
# 5. S1 deleted (docs/behaviour.md, 'S1 deleted')
# ------------------------------------------------------------------------------------------------


async def test_s1_deleted_aborts_the_streaming_turn_in_s2_and_clears_state(rt: RT) -> None:
    s1 = await rt.new_parent()
    rt.llm.script(Hang(max_seconds=120), agent="pm")
    s2 = await rt.start(agents=["pm", "dev"], prompt="Parent gone?", parentSessionID=s1)
    pm = (await rt.llm.wait_for_requests(1, within=30, session=s2, agent="pm"))[0]
    await rt.oc("DELETE", f"/session/{s1}")
    await wait_for(lambda: pm.disconnected, 10, "the pm stream in S2 to be aborted")
    result = await rt.result(s2)
    assert result["phase"] == Phase.ABORTED.value
    assert result["endReason"] == EndReason.PARENT_DELETED.value
    await wait_for(lambda: s2 not in rt.daemon.engine.tables, 10, "the daemon to forget S2")
    await rt.drained_after(s2, lambda: rt.oc("POST", f"/session/{s2}/abort"))
    assert turn_agents(rt, s2) == ["pm"]  # nothing else was prompted


# ------------------------------------------------------------------------------------------------
# 6. A person writes in S2 during the debate (docs/behaviour.md, 'A person writes in S2')
# ------------------------------------------------------------------------------------------------


async def test_user_message_in_s2_during_a_turn_joins_history_and_no_turn_is_lost(rt: RT) -> None:
    s1 = await rt.new_parent()
    pm_text = "PM speaks slowly about the rollout plan and its many phases. " * 3
    rt.llm.script(Text(text=pm_text, chunk_size=12, chunk_delay=0.15), agent="pm")
    # The reply to the person takes a while: S2 stays busy after pm's turn has completed.
    rt.llm.script(
        Text(text="BUILD answers the person: costs matter.", chunk_size=8, chunk_delay=0.3),
        agent="build",
    )
    rt.llm.script(Text(text="DEV takes the person's point on costs."), agent="dev")
    rt.llm.script(Text(text="SUMMARY with the user's remark."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Rollout?", parentSessionID=s1)
    await rt.llm.wait_for_requests(1, within=30, session=s2, agent="pm")
    # The person types in S2 (the TUI sends a normal prompt with the default agent).
    await ask_build(rt, s2, "PERSON: please consider the costs too.")
    result = await rt.result(s2)
    assert turn_agents(rt, s2) == ["pm", "build", "dev", OBSERVER_AGENT]
    # dev was prompted only after the interjection's reply finished (never while busy).
    build_req = rt.llm.requests_for(session=s2, agent="build")[0]
    dev_req = rt.llm.requests_for(session=s2, agent="dev")[0]
    assert build_req.finished_at is not None and dev_req.t_mono >= build_req.finished_at
    assert "the user (a person at the table) wrote" in dev_req.last_user_text
    assert "PERSON: please consider the costs too." in dev_req.last_user_text
    # dev's own turn is its own reply, not merged with the user's message.
    hist = [(e.kind, e.agent) for e in memory_state(rt, s2).history]
    assert hist == [
        ("turn", "pm"),
        ("user", "user"),
        ("interjection", "build"),
        ("turn", "dev"),
        ("observer", OBSERVER_AGENT),
    ]
    interjection = memory_state(rt, s2).history[2]
    assert interjection.response == "BUILD answers the person: costs matter."
    turns = {e.agent: e.response for e in memory_state(rt, s2).seat_turns()}
    assert turns["dev"] == "DEV takes the person's point on costs."
    assert turns["pm"] == pm_text
    obs_prompt = rt.llm.requests_for(session=s2, agent=OBSERVER_AGENT)[0].last_user_text
    assert "── the user ──" in obs_prompt
    assert "SUMMARY with the user's remark." in result["summary"]


# ------------------------------------------------------------------------------------------------
# 7. After the conclusion (docs/behaviour.md, 'After the conclusion')
# ------------------------------------------------------------------------------------------------


async def test_messages_in_s2_after_the_conclusion_never_change_the_result(rt: RT) -> None:
    s1 = await rt.new_parent()
    rt.llm.script(Text(text="FINAL SUMMARY."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Done?", parentSessionID=s1)
    result = await rt.result(s2)
    await rt.finalized(s2)
    await wait_for_messages(rt, s1, 1)
    s1_before = await rt.messages(s1)
    stored_before = await stored_state(rt, s2)
    n_turns = len(turn_agents(rt, s2))
    rt.llm.script(Text(text="BUILD chats after the end."), agent="build")
    await ask_build(rt, s2, "Now that it is over, what about X?")
    await rt.llm.wait_for_requests(1, within=30, session=s2, agent="build")
    await rt.wait_idle(s2)
    await rt.drained_after(s2, lambda: rt.oc("POST", f"/session/{s2}/abort"))
    assert len(turn_agents(rt, s2)) == n_turns + 1  # only the person's conversation
    s1_after = await rt.messages(s1)
    assert [m["info"]["id"] for m in s1_after] == [m["info"]["id"] for m in s1_before]
    assert await stored_state(rt, s2) == stored_before
    status, again = await rt.api("GET", f"/v1/roundtables/{s2}/result", params={"wait": "0"})
    assert status == 200 and again["summary"] == result["summary"] == "FINAL SUMMARY."


# ------------------------------------------------------------------------------------------------
# 9. Compaction (docs/behaviour.md, 'Compaction')
# ------------------------------------------------------------------------------------------------


async def test_compaction_mid_debate_keeps_the_state_and_the_debate_completes(rt: RT) -> None:
    s1 = await rt.new_parent()
    rt.llm.script(Text(text="PM r1."), Text(text="PM r2 after compaction."), agent="pm")
    rt.llm.script(Text(text="DEV r1, slow.", chunk_size=2, chunk_delay=0.2), agent="dev")
    rt.llm.script(Text(text="COMPACTED SUMMARY OF S2."), agent="compaction")
    s2 = await rt.start(agents=["pm", "dev"], prompt="Compact?", rounds=2, parentSessionID=s1)
    await rt.llm.wait_for_requests(1, within=30, session=s2, agent="dev")
    await rt.oc(
        "POST",
        f"/session/{s2}/summarize",
        {"providerID": "scripted", "modelID": "orchestrator-1"},
    )
    result = await rt.result(s2)
    agents = turn_agents(rt, s2)
    assert [a for a in agents if a != "compaction"] == ["pm", "dev", "pm", "dev", OBSERVER_AGENT]
    assert rt.llm.requests_for(session=s2, kind="compaction"), "no compaction happened"
    assert result["endReason"] == "completed"
    state = memory_state(rt, s2)
    # The compaction is nobody's turn: only the four seat turns and the observer.
    assert [(e.kind, e.agent, e.round) for e in state.history] == [
        ("turn", "pm", 1),
        ("turn", "dev", 1),
        ("turn", "pm", 2),
        ("turn", "dev", 2),
        ("observer", OBSERVER_AGENT, 2),
    ]
    stored = await stored_state(rt, s2)
    assert stored.phase == Phase.DONE and len(stored.seat_turns()) == 4
