"""Delivery of the result to S1 exactly once (the waiting tool call or one noReply message), and
recovery after a restart (graceful or kill -9) over the same server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from roundtabled.core.state import DELIMITER_TEXT, META_KEY
from roundtabled.offline.scripted_actions import Text

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]
ORDER = ["pm", "dev", "roundtable-observer"]


async def test_without_a_waiting_tool_the_result_goes_to_idle_s1_as_one_no_reply(
    harness: H,
) -> None:
    h = await harness()
    s1 = await h.parent()
    s2 = await h.start(parentSessionID=s1)
    result = await h.result(s2)
    status = await h.finalized(s2)
    assert status["delivered"] == "no-reply"
    assert await h.no_reply_texts(s1) == [result["text"]]
    (posted,) = h.fake.calls_of("post_no_reply", s1)
    assert posted[1][1]["ignored"] is True and "roundtabled" in posted[1][1]["metadata"]
    assert h.fake.calls_of("prompt_async", s1) == []


async def test_delivery_waits_while_s1_is_busy(harness: H) -> None:
    h = await harness()
    s1 = await h.parent()
    h.fake.set_busy(s1)
    s2 = await h.start(parentSessionID=s1)
    await h.result(s2)
    await h.clock.advance(30)
    assert h.fake.calls_of("post_no_reply", s1) == []
    h.fake.set_busy(s1, False)
    await h.finalized(s2)
    assert len(h.fake.calls_of("post_no_reply", s1)) == 1


async def finished_for_a_tool(h: Harness, call_id: str) -> tuple[str, str, str]:
    """A roundtable started by tool call ``call_id`` (running) in a new S1, waited for until its
    result is ready: ``(s1, the tool call's message id, s2)``."""
    s1 = await h.parent()
    tool_msg = h.fake.add_tool_call(s1, call_id)
    s2 = await h.start(parentSessionID=s1, toolCallID=call_id, toolMessageID=tool_msg)
    await h.result(s2)
    return s1, tool_msg, s2


async def test_a_polling_tool_takes_the_result_and_nothing_is_posted_to_s1(harness: H) -> None:
    h = await harness()
    s1, tool_msg, s2 = await finished_for_a_tool(h, "call_rt_1")
    taken = h.engine.take_result(s2, tool_call_id="call_rt_1")
    assert taken is not None and taken["done"] is True and taken["deliveryMark"]
    # What the shim does with it: the result is the tool's output, the mark in its metadata.
    h.fake.set_tool_state(
        s1,
        tool_msg,
        "call_rt_1",
        "completed",
        output=taken["output"],
        metadata={"sessionID": s2, META_KEY: taken["deliveryMark"]},
    )
    status = await h.finalized(s2)
    assert status["delivered"] == "tool"
    assert h.fake.calls_of("post_no_reply", s1) == []


async def test_a_tool_call_that_took_the_result_but_ended_without_it_gets_the_fallback(
    harness: H,
) -> None:
    """Handed the result, the tool call ended with an error all the same (S1 aborted at that
    moment): S1 does not hold it, so it is posted as the fallback message, once."""
    h = await harness()
    s1, tool_msg, s2 = await finished_for_a_tool(h, "call_rt_4")
    assert h.engine.take_result(s2, tool_call_id="call_rt_4") is not None
    h.fake.set_tool_state(s1, tool_msg, "call_rt_4", "error", output="Error: roundtable cancelled")
    status = await h.finalized(s2)
    assert status["delivered"] == "no-reply"
    assert len(h.fake.calls_of("post_no_reply", s1)) == 1
    # A later poll of that tool call is told where the result went, never given it again.
    again = h.engine.take_result(s2, tool_call_id="call_rt_4")
    assert again is not None and again.get("postedAsMessage") and "deliveryMark" not in again


async def test_a_tool_call_that_ended_with_an_error_naming_s2_gets_the_fallback(
    harness: H,
) -> None:
    """The shim's own error texts may name S2 ("no roundtable 'ses_…' is known …", "lost
    contact … while roundtable ses_… runs"): no result for all that."""
    h = await harness()
    s1, tool_msg, s2 = await finished_for_a_tool(h, "call_rt_5")
    h.fake.set_tool_state(
        s1,
        tool_msg,
        "call_rt_5",
        "completed",
        output=f"Error: no roundtable '{s2}' is known to this daemon",
    )
    status = await h.finalized(s2)
    assert status["delivered"] == "no-reply"
    assert len(h.fake.calls_of("post_no_reply", s1)) == 1


async def test_a_tool_that_never_polls_gets_the_result_as_a_no_reply_after_the_grace(
    harness: H,
) -> None:
    h = await harness()
    s1, _, s2 = await finished_for_a_tool(h, "call_rt_2")
    released = h.clock.now_ms()
    await h.clock.advance(120)
    assert h.fake.calls_of("post_no_reply", s1) == []
    status = await h.finalized(s2, within=60)
    assert status["delivered"] == "no-reply"
    (at,) = h.fake.times_of("post_no_reply", s1)
    assert 130_000 <= at - released <= 132_000


async def test_a_tool_that_already_returned_the_result_counts_as_delivered(harness: H) -> None:
    h = await harness()
    s1, tool_msg, s2 = await finished_for_a_tool(h, "call_rt_3")
    h.fake.set_tool_state(s1, tool_msg, "call_rt_3", "completed", output=f"result of {s2}")
    status = await h.finalized(s2)
    assert status["delivered"] == "tool"
    assert h.fake.calls_of("post_no_reply", s1) == []


async def test_a_graceful_restart_mid_turn_resumes_without_a_second_prompt(harness: H) -> None:
    h = await harness()
    h.fake.script(Text(text="PM: long answer.", first_byte_delay=20), agent="pm")
    s2 = await h.start()
    await h.clock.advance(2)
    await h.restart()
    await h.result(s2)
    assert h.prompted_agents(s2) == ORDER
    assert [e.agent for e in h.entries(s2)] == ORDER
    assert h.entries(s2)[0].response == "PM: long answer."


async def test_recovery_asks_each_directory_once_whether_its_plugin_is_loaded(harness: H) -> None:
    """Three roundtables of one directory resumed together: one ``GET /config`` for the three
    (the answer is the instance's, not the roundtable's)."""
    h = await harness()
    for _ in range(3):
        h.fake.script(Text(text="PM: slowly.", first_byte_delay=20), agent="pm")
    started = [await h.start(prompt=f"Topic {i}?") for i in range(3)]
    await h.clock.advance(2)
    before = len(h.fake.calls_of("config"))
    await h.restart()
    assert len(h.fake.calls_of("config")) - before == 1
    for s2 in started:
        await h.result(s2)
        assert h.prompted_agents(s2) == ORDER


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")  # kill -9
async def test_a_kill_right_after_the_start_resumes_the_same_turn(harness: H) -> None:
    h = await harness()
    h.fake.script(Text(text="PM: first words.", first_byte_delay=10), agent="pm")
    s2 = await h.start()
    await h.restart(graceful=False)
    counters = await h.engine.recover()  # a second scan finds it adopted: skipped
    assert counters["skipped"] == 1
    await h.result(s2)
    assert h.prompted_agents(s2) == ORDER
    assert h.entries(s2)[0].response == "PM: first words."


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")  # kill -9
async def test_a_kill_after_a_fast_handoff_adopts_the_sent_prompt(harness: H) -> None:
    """Killed between the fast handoff's prompt and its deferred state write: the stored state
    still names pm's turn; recovery finds dev's prompt by its signed marker and adopts it."""
    h = await harness()
    h.fake.script(Text(text="DEV: slow.", first_byte_delay=60), agent="dev")
    s2 = await h.start()
    await h.until(lambda: len(h.prompts(s2)) == 2, within=30, step=0.001)
    await h.restart(graceful=False)
    await h.result(s2)
    assert h.prompted_agents(s2) == ORDER
    assert [e.agent for e in h.entries(s2)] == ORDER
    assert h.entries(s2)[1].response == "DEV: slow."


async def test_the_result_is_delivered_once_across_a_restart(harness: H) -> None:
    h = await harness()
    s1 = await h.parent()
    s2 = await h.start(parentSessionID=s1)
    await h.finalized(s2)
    await h.restart()
    await h.clock.advance(60)
    assert len(h.fake.calls_of("post_no_reply", s1)) == 1
    assert s2 not in h.engine.tables
    assert (await h.engine.stored_status(s2))["finalized"] is True  # type: ignore[index]


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")  # kill -9
async def test_a_kill_before_finalization_is_finished_by_the_next_daemon(harness: H) -> None:
    h = await harness()
    s1 = await h.parent()
    h.fake.set_busy(s1)  # holds the delivery back
    s2 = await h.start(parentSessionID=s1)
    await h.result(s2)
    await h.restart(graceful=False)
    h.fake.set_busy(s1, False)
    status = await h.finalized(s2)
    assert status["delivered"] == "no-reply"
    assert len(h.fake.calls_of("post_no_reply", s1)) == 1
    delimiters = [
        m for m in await h.messages(s2) if any(p.get("text") == DELIMITER_TEXT for p in m["parts"])
    ]
    assert len(delimiters) == 1


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")  # kill -9
async def test_recovery_aborts_a_roundtable_whose_parent_was_deleted_while_down(
    harness: H,
) -> None:
    h = await harness()
    s1 = await h.parent()
    h.fake.script(Text(text="PM: slow.", first_byte_delay=60), agent="pm")
    s2 = await h.start(parentSessionID=s1)
    await h.kill()
    h.fake.sessions[s1].deleted = True  # S1 gone (S2 kept: deleted by hand only S1's record)
    engine = await h.boot()
    assert s2 not in engine.tables
    assert len(h.fake.calls_of("abort", s2)) == 1
    info = await h.fake.get_session(s2)
    assert info["metadata"]["roundtabled"]["phase"] == "aborted"
    assert h.prompted_agents(s2) == ["pm"]


async def test_recovery_skips_a_concluded_and_finalized_roundtable(harness: H) -> None:
    h = await harness()
    s2 = await h.start()
    await h.finalized(s2)
    await h.restart()
    counters = await h.engine.recover()
    assert counters["resumed"] == 0
    assert s2 not in h.engine.tables
    assert h.prompted_agents(s2) == ORDER
