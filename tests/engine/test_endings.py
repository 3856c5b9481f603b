"""How a debate ends besides completing: repetition, a failed observer; and the shutdown flush of a
deferred state write, extending after a restart."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from roundtabled.offline.scripted_actions import HttpError, Text

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]


async def test_seats_repeating_themselves_end_the_debate_as_repetition(harness: H) -> None:
    h = await harness()
    same = "We should ship it now because the tests pass and the users are waiting for it."
    h.fake.script(*[Text(text=same)] * 6, agent="pm")
    h.fake.script(*[Text(text=same + " Indeed.")] * 6, agent="dev")
    s2 = await h.start(rounds=4)
    result = await h.result(s2)
    assert result["endReason"] == "repetition"
    seat_turns = [a for a in h.prompted_agents(s2) if a != "roundtable-observer"]
    assert seat_turns == ["pm", "dev", "pm"]  # pm's round-2 reply repeats round 1: stop
    assert h.prompted_agents(s2)[-1] == "roundtable-observer"


async def test_a_failed_observer_is_reported_as_such(harness: H) -> None:
    h = await harness()
    h.fake.script(HttpError(status=400, message="observer down"), agent="roundtable-observer")
    s2 = await h.start()
    result = await h.result(s2)
    assert result["endReason"] == "observer-failed"
    # Once: the failed turn (not again by the verdict step).
    assert h.errors(s2) == ["roundtable-observer (round 1): APIError: observer down"]
    assert h.prompted_agents(s2) == ["pm", "dev", "roundtable-observer"]


async def test_a_graceful_stop_writes_the_deferred_state_of_the_turn_in_flight(
    harness: H,
) -> None:
    h = await harness()
    h.fake.script(Text(text="DEV: slow.", first_byte_delay=60), agent="dev")
    s2 = await h.start()
    await h.until(lambda: len(h.prompts(s2)) == 2, within=30, step=0.001)
    dev_prompt = h.prompts(s2)[1]["messageID"]
    mark = len(h.fake.calls)
    await h.stop()
    writes = [a for m, a in h.fake.calls[mark:] if m == "update_part" and a[0] == s2]
    assert len(writes) == 1
    assert dev_prompt in writes[0][2]["text"] or dev_prompt in str(writes[0][2]["metadata"])


async def test_extend_after_a_restart_continues_from_the_stored_state(harness: H) -> None:
    h = await harness()
    h.fake.script(Text(text="PM: round one view."), agent="pm")
    s2 = await h.start()
    await h.finalized(s2)
    await h.restart()
    await h.extend(s2, prompt="And the cost?")
    result = await h.result(s2)
    assert result["endReason"] == "completed"
    assert h.prompted_agents(s2) == ["pm", "dev", "roundtable-observer"] * 2
    assert h.status(s2)["totalRounds"] == 2  # type: ignore[index]
