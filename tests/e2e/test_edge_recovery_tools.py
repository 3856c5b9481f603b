"""Restart recovery and tools on the real server with the scripted LLM (docs/behaviour.md).

Proves:
- restart recovery: after a kill -9 of the daemon, every active
  roundtable is resumed from the exact turn — a turn answered while the daemon was down is not
  re-prompted, a turn still running is waited for, not duplicated — and a toast says what was
  resumed; a roundtable whose parent is gone is aborted (its running turn too) and marked so;
- permission prompts of a seat: ``reject`` (the default) answers reject with a message and the
  debate goes on; ``allow-once`` lets the tool run; ``ask`` toasts the user and waits, bounded by
  the turn timeout; per call (``permissionPolicy``) and per daemon (``permission_policy``);
- a tool's output reaches the next debater: the next model request carries it, and the
  history entry has the ToolCallSummary with a preview of at most 500 characters.
"""

from __future__ import annotations

import asyncio
from typing import Any

from roundtabled.core.state import (
    META_KEY,
    OBSERVER_AGENT,
    TOOL_OUTPUT_PREVIEW_MAX,
    EndReason,
    Phase,
)
from roundtabled.offline.scripted_actions import Hang, Text, tool_call

from .conftest import RT, roundtable_config
from .edge_helpers import Toasts, memory_state, stored_state, turn_agents, wait_for, write_state

# ------------------------------------------------------------------------------------------------
# 11. Restart recovery (docs/behaviour.md, 'Restart')
# ------------------------------------------------------------------------------------------------


async def test_restart_resumes_every_roundtable_from_the_exact_turn_once(rt: RT) -> None:
    """Table A's turn is still running when the daemon comes back (waited for); table B's turn was
    answered while the daemon was down (not re-prompted). Each seat speaks exactly once."""
    rt.llm.script(Text(text="RV answers late.", first_byte_delay=8), agent="rv")
    rt.llm.script(Text(text="PM answers while the daemon is dead.", first_byte_delay=1), agent="pm")
    s1 = await rt.new_parent()
    a = await rt.start(agents=["rv", "dev"], prompt="Table A", parentSessionID=s1)
    b = await rt.start(agents=["pm", "dev"], prompt="Table B", parentSessionID=s1)
    rv = (await rt.llm.wait_for_requests(1, within=30, session=a, agent="rv"))[0]
    pm = (await rt.llm.wait_for_requests(1, within=30, session=b, agent="pm"))[0]
    await rt.kill_daemon()
    await wait_for(lambda: pm.finished_at is not None, 20, "B's pm turn to finish")
    await rt.wait_idle(b)
    assert rv.finished_at is None, "A's turn must still run when the daemon comes back"
    async with Toasts(rt) as toasts:
        await rt._launch()
        await toasts.wait_for("resumed after a restart: (Roundtable) - Table A")
        await toasts.wait_for("resumed after a restart: (Roundtable) - Table B")
        result_a, result_b = await asyncio.gather(rt.result(a), rt.result(b))
    assert turn_agents(rt, a) == ["rv", "dev", OBSERVER_AGENT]
    assert turn_agents(rt, b) == ["pm", "dev", OBSERVER_AGENT]
    assert memory_state(rt, a).seat_turns()[0].response == "RV answers late."
    assert memory_state(rt, b).seat_turns()[0].response == "PM answers while the daemon is dead."
    assert result_a["endReason"] == result_b["endReason"] == "completed"
    # One prompt message per turn in S2 (nothing re-sent).
    for s2 in (a, b):
        users = [m for m in await rt.messages(s2) if m["info"]["role"] == "user"]
        prompts = [
            m
            for m in users
            if any(
                (p.get("metadata") or {}).get(META_KEY, {}).get("kind") in ("turn", "observer")
                for p in m["parts"]
            )
        ]
        assert len(prompts) == 3, s2


async def test_restart_aborts_a_roundtable_whose_parent_is_gone(rt: RT) -> None:
    rt.llm.script(Hang(max_seconds=120), agent="pm")
    s1 = await rt.new_parent()
    s2 = await rt.start(agents=["pm", "dev"], prompt="Orphan", parentSessionID=s1)
    pm = (await rt.llm.wait_for_requests(1, within=30, session=s2, agent="pm"))[0]
    await rt.kill_daemon()
    # The parent recorded in the state no longer exists (deleting S1 itself would delete S2 too).
    state = await stored_state(rt, s2)
    await write_state(
        rt, state.model_copy(update={"parent_session_id": "ses_0parentwasdeleted0000000"})
    )
    await rt._launch()
    await wait_for(lambda: pm.disconnected, 20, "the orphan's running turn to be aborted")
    stored = await stored_state(rt, s2)
    assert stored.phase == Phase.ABORTED and stored.end_reason == EndReason.PARENT_DELETED
    info = await rt.session(s2)
    assert info["metadata"][META_KEY]["phase"] == "aborted"
    await rt.settled(s2)
    assert turn_agents(rt, s2) == ["pm"]


# ------------------------------------------------------------------------------------------------
# 12. Permission prompts in S2
# ------------------------------------------------------------------------------------------------

SECRET = "SECRET-NOTE-CONTENT-4711"


def read_config(llm: Any, **kw: Any) -> dict[str, Any]:
    """pm may use ``read`` but must ask; everything else denied."""
    return roundtable_config(
        llm, extra_agents={"pm": {"permission": {"*": "deny", "read": "ask"}}}, **kw
    )


async def read_rt(rt_factory: Any, llm: Any, **daemon: Any) -> RT:
    rt: RT = await rt_factory(
        read_config(llm), files={"notes.txt": SECRET + "\n"}, daemon=daemon or None
    )
    rt.llm.script(
        tool_call("read", {"filePath": f"{rt.directory}/notes.txt"}),
        Text(text="PM read the notes."),
        agent="pm",
    )
    return rt


def pm_tool_parts(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        p
        for m in msgs
        if m["info"].get("agent") == "pm"
        for p in m["parts"]
        if p.get("type") == "tool"
    ]


async def test_permission_reject_is_the_default_and_the_debate_goes_on(
    rt_factory: Any, scripted_llm: Any
) -> None:
    rt = await read_rt(rt_factory, scripted_llm)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Read the notes?")
    result = await rt.result(s2)
    assert result["endReason"] == "completed"
    tools = pm_tool_parts(await rt.messages(s2))
    assert tools and tools[0]["state"]["status"] == "error"
    assert "permission" in tools[0]["state"]["error"].lower()
    agents = [a for a in turn_agents(rt, s2)]
    assert agents[-2:] == ["dev", OBSERVER_AGENT] and agents.count("dev") == 1
    dev_req = rt.llm.requests_for(session=s2, agent="dev")[0]
    assert SECRET not in str(dev_req.messages)
    pm = memory_state(rt, s2).seat_turns()[0]
    assert pm.tool_calls and pm.tool_calls[0].output_preview == "error"
    assert await rt.oc("GET", "/permission", params={"directory": rt.directory}) == []


async def test_permission_allow_once_per_call_lets_the_tool_run(
    rt_factory: Any, scripted_llm: Any
) -> None:
    rt = await read_rt(rt_factory, scripted_llm)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Read?", permissionPolicy="allow-once")
    await rt.result(s2)
    tools = pm_tool_parts(await rt.messages(s2))
    assert tools and tools[0]["state"]["status"] == "completed"
    assert SECRET in tools[0]["state"]["output"]
    assert turn_agents(rt, s2) == ["pm", "dev", OBSERVER_AGENT]


async def test_permission_allow_once_as_the_daemon_policy(
    rt_factory: Any, scripted_llm: Any
) -> None:
    rt = await read_rt(rt_factory, scripted_llm, permission_policy="allow-once")
    s2 = await rt.start(agents=["pm", "dev"], prompt="Read?")
    await rt.result(s2)
    tools = pm_tool_parts(await rt.messages(s2))
    assert tools and tools[0]["state"]["status"] == "completed"


async def test_permission_ask_toasts_and_waits_bounded_by_the_turn_timeout(
    rt_factory: Any, scripted_llm: Any
) -> None:
    rt = await read_rt(rt_factory, scripted_llm)
    async with Toasts(rt) as toasts:
        s2 = await rt.start(
            agents=["pm", "dev"], prompt="Ask?", permissionPolicy="ask", turnTimeout=8
        )
        toast = await toasts.wait_for("asks for permission", timeout=30)
        assert "read" in str(toast["message"])
        # The request waits for a person; the daemon did not answer it.
        pending = await rt.oc("GET", "/permission", params={"directory": rt.directory})
        assert [p["sessionID"] for p in pending] == [s2]
        assert memory_state(rt, s2).pending is not None
        assert not rt.llm.requests_for(session=s2, agent="dev")
        result = await rt.result(s2, timeout=60)
    pm = memory_state(rt, s2).seat_turns()[0]
    assert pm.cut_off  # bounded by the turn timeout
    assert turn_agents(rt, s2)[-2:] == ["dev", OBSERVER_AGENT]
    assert result["endReason"] == "completed"


# ------------------------------------------------------------------------------------------------
# 13. Tool outputs reach the next debater (docs/behaviour.md, 'What each seat sees')
# ------------------------------------------------------------------------------------------------


async def test_tool_output_reaches_the_next_debater_with_a_500_char_preview(
    rt_factory: Any, scripted_llm: Any
) -> None:
    long_file = SECRET + "\n" + "\n".join(f"line {i:04d} of the design notes" for i in range(80))
    cfg = roundtable_config(
        scripted_llm, extra_agents={"dev": {"permission": {"*": "deny", "read": "allow"}}}
    )
    rt: RT = await rt_factory(cfg, files={"design.txt": long_file})
    rt.llm.script(
        tool_call("read", {"filePath": f"{rt.directory}/design.txt"}),
        Text(text="DEV: the design notes say we are fine."),
        agent="dev",
    )
    s2 = await rt.start(agents=["dev", "pm"], prompt="What do the notes say?")
    await rt.result(s2)
    dev = memory_state(rt, s2).seat_turns()[0]
    assert [t.tool_name for t in dev.tool_calls] == ["read"]
    preview = dev.tool_calls[0].output_preview
    assert SECRET in preview and len(preview) <= TOOL_OUTPUT_PREVIEW_MAX
    pm_req = rt.llm.requests_for(session=s2, agent="pm")[0]
    seen = str(pm_req.messages)
    assert SECRET in seen and "line 0079" in seen  # natively, the whole output
    obs_prompt = rt.llm.requests_for(session=s2, agent=OBSERVER_AGENT)[0].last_user_text
    assert "[tool read]" in obs_prompt and SECRET in obs_prompt
    stored = await stored_state(rt, s2)
    assert stored.seat_turns()[0].tool_calls[0].output_preview == preview
