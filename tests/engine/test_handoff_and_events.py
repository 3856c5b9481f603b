"""Handoffs (fast, from the event mirror, and from a read) and the event stream as hints only:
lost, duplicated, stale and forged events, reconnects."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from roundtabled.offline.scripted_actions import Text, tool_call
from roundtabled.opencode import events as ev

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]
ORDER = ["pm", "dev", "roundtable-observer"]


async def test_with_every_event_delivered_each_handoff_is_fast(harness: H) -> None:
    h = await harness()
    s2 = await h.start(agents=["pm", "dev", "rv"])
    await h.result(s2)
    assert h.prompted_agents(s2) == ["pm", "dev", "rv", "roundtable-observer"]
    assert h.handoffs() == (3, 0)


async def test_with_every_event_lost_the_resync_reads_drive_the_debate(harness: H) -> None:
    h = await harness(resync_period=15)
    h.fake.event_filter = lambda e: [e] if e["type"] == "server.connected" else []
    s2 = await h.start()
    await h.result(s2)
    assert h.prompted_agents(s2) == ORDER
    fast, read = h.handoffs()
    assert (fast, read) == (0, 2)
    t = h.fake.times_of("prompt_async", s2)
    assert [t[1] - t[0], t[2] - t[1]] == [15_000, 15_000]


async def test_every_event_twice_still_gives_exactly_one_prompt_per_turn(harness: H) -> None:
    h = await harness()
    h.fake.event_filter = lambda e: [e, e]
    s2 = await h.start(agents=["pm", "dev", "rv"], rounds=2)
    await h.result(s2)
    assert h.prompted_agents(s2) == ["pm", "dev", "rv"] * 2 + ["roundtable-observer"]
    assert len(h.fake.requests_for(session=s2)) == 7


async def test_a_stale_idle_during_a_turn_never_hands_off_early(harness: H) -> None:
    h = await harness()
    h.fake.script(Text(text="PM: thinking slowly.", first_byte_delay=30), agent="pm")
    s2 = await h.start()
    await h.clock.advance(5)
    h.fake.emit("session.status", {"sessionID": s2, "status": {"type": "idle"}})
    h.fake.emit("session.idle", {"sessionID": s2})
    await h.clock.advance(10)
    assert h.prompted_agents(s2) == ["pm"]
    await h.result(s2)
    assert h.prompted_agents(s2) == ORDER
    assert h.entries(s2)[0].response == "PM: thinking slowly."


async def test_the_idle_between_two_steps_of_a_tool_turn_never_hands_off(harness: H) -> None:
    h = await harness()
    h.fake.script(tool_call("probe", {"q": 1}), Text(text="PM: after the tool."), agent="pm")
    s2 = await h.start()
    await h.result(s2)
    assert [(r.agent, r.kind) for r in h.fake.requests_for(session=s2)] == [
        ("pm", "turn"),
        ("pm", "tool-followup"),
        ("dev", "turn"),
        ("roundtable-observer", "turn"),
    ]
    pm = h.entries(s2)[0]
    assert pm.response == "PM: after the tool."
    assert [t.tool_name for t in pm.tool_calls] == ["probe"]


async def test_a_forged_completed_reply_event_does_not_end_the_turn(harness: H) -> None:
    """An event is a hint: a ``message.updated`` of a completed assistant reply that is not in
    S2 makes the engine read, and the read shows the turn still running."""
    h = await harness()
    h.fake.script(Text(text="PM: real reply.", first_byte_delay=20), agent="pm")
    s2 = await h.start()
    pm_prompt = h.prompts(s2)[0]["messageID"]
    await h.clock.advance(2)
    h.fake.emit(
        "message.updated",
        {
            "sessionID": s2,
            "info": {
                "id": "msg_ffffffffffffforgedforged00",
                "sessionID": s2,
                "role": "assistant",
                "parentID": pm_prompt,
                "finish": "stop",
                "time": {"created": 1, "completed": 2},
            },
        },
    )
    h.fake.emit("session.idle", {"sessionID": s2})
    await h.clock.advance(5)
    assert h.prompted_agents(s2) == ["pm"]
    await h.result(s2)
    assert h.entries(s2)[0].response == "PM: real reply."


async def test_events_lost_during_a_disconnect_are_made_up_by_the_resync_on_reconnect(
    harness: H,
) -> None:
    h = await harness(resync_period=600)
    h.fake.script(Text(text="PM: done while you were away.", first_byte_delay=5), agent="pm")
    s2 = await h.start()
    h.fake.disconnect()
    await h.clock.advance(10)  # pm finished; its events are lost
    assert h.prompted_agents(s2) == ["pm"]
    await h.reconnect()
    await h.until(lambda: len(h.prompts(s2)) == 2, within=5)
    await h.result(s2)
    assert h.prompted_agents(s2) == ORDER


async def test_unknown_and_malformed_events_are_ignored(harness: H) -> None:
    h = await harness()
    s2 = await h.start()
    weird: list[dict[str, Any]] = [
        {"type": "plugin.added", "properties": {"name": "x"}},
        {"type": "session.idle", "properties": {"sessionID": 42}},
        {"type": "session.status", "properties": {"sessionID": s2, "status": "idle"}},
        {"type": "message.updated", "properties": {"sessionID": s2, "info": "nope"}},
        {"type": "message.part.updated", "properties": {"sessionID": s2, "part": None}},
        {"type": "session.error", "properties": {"error": {"name": "UnknownError"}}},
        {"type": "session.deleted", "properties": {"sessionID": "ses_unknown00000001"}},
    ]
    for e in weird:
        h.fake.emit(e["type"], e["properties"])
    engine = h.engine
    engine.on_event(ev.Event("session.idle", None, None, {}, None))
    await h.result(s2)
    assert h.prompted_agents(s2) == ORDER
    assert h.fake.subscriber_errors == []


async def test_a_person_typing_into_s2_mid_turn_joins_the_history_and_no_turn_is_lost(
    harness: H,
) -> None:
    h = await harness()
    h.fake.script(Text(text="PM: first.", first_byte_delay=5), agent="pm")
    s2 = await h.start()
    await h.clock.advance(1)
    await h.fake.post_no_reply(
        s2, [{"type": "text", "text": "Consider the cost too."}], message_id=h.fake_id()
    )
    await h.result(s2)
    kinds = [e.kind for e in h.entries(s2)]
    assert kinds.count("user") == 1
    assert [e.agent for e in h.entries(s2) if e.kind == "turn"] == ["pm", "dev"]
    (note,) = [e for e in h.entries(s2) if e.kind == "user"]
    assert note.response == "Consider the cost too."
    assert h.prompted_agents(s2).count("pm") == 1
