"""Failed turns: timeouts and aborts, provider errors, ``session.error``, unknown models, retries,
a seat that asks the model again (no finish reason). Each failure is recorded in the turn's entry
and the debate goes on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from roundtabled.errors import TransportError
from roundtabled.offline.scripted_actions import Hang, HttpError, Text

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]


async def test_a_hung_seat_is_aborted_at_the_turn_timeout_and_the_next_seat_speaks(
    harness: H,
) -> None:
    h = await harness()
    h.fake.script(Hang(max_seconds=3600), agent="pm")
    s2 = await h.start(turnTimeout=300)
    started = h.fake.times_of("prompt_async", s2)[0]
    await h.result(s2)
    aborts = h.fake.times_of("abort", s2)
    assert len(aborts) == 1
    assert aborts[0] - started == 300_000
    assert h.prompted_agents(s2) == ["pm", "dev", "roundtable-observer"]
    pm = h.entries(s2)[0]
    assert (pm.agent, pm.has_error, pm.cut_off, pm.error) == (
        "pm",
        True,
        True,
        "timed out after 300 s",
    )
    assert h.errors(s2) == ["pm (round 1): timed out after 300 s"]


async def test_the_engine_default_turn_timeout_applies_without_a_per_call_one(harness: H) -> None:
    h = await harness(turn_timeout=42)
    h.fake.script(Hang(max_seconds=3600), agent="dev")
    s2 = await h.start()
    await h.result(s2)
    _, dev_at, _ = h.fake.times_of("prompt_async", s2)
    (abort_at,) = h.fake.times_of("abort", s2)
    assert abort_at - dev_at == 42_000
    assert h.entries(s2)[1].error == "timed out after 42 s"


async def test_the_partial_text_of_an_aborted_reply_is_kept_as_cut_off(harness: H) -> None:
    h = await harness()
    words = "one two three four five six seven eight nine ten " * 4
    h.fake.script(Text(text=words, chunk_size=10, chunk_delay=5.0), agent="pm")
    s2 = await h.start(turnTimeout=30)
    await h.result(s2)
    pm = h.entries(s2)[0]
    assert pm.cut_off and pm.has_error
    assert pm.response == words[:60]  # 6 chunks of 10 characters in 30 s
    assert len(h.fake.calls_of("abort", s2)) == 1


async def test_a_provider_error_is_recorded_and_not_reprompted(harness: H) -> None:
    h = await harness()
    h.fake.script(HttpError(status=400, message="context too long"), agent="pm")
    s2 = await h.start()
    await h.result(s2)
    assert h.prompted_agents(s2) == ["pm", "dev", "roundtable-observer"]
    pm = h.entries(s2)[0]
    assert (pm.has_error, pm.cut_off, pm.error) == (True, False, "APIError: context too long")
    assert h.fake.calls_of("abort", s2) == []


async def test_a_retried_rate_limit_ends_in_the_reply_without_an_abort(harness: H) -> None:
    h = await harness()
    h.fake.script(
        HttpError(status=429, message="slow down", retry_after=3), Text(text="PM: ok"), agent="pm"
    )
    s2 = await h.start()
    await h.result(s2)
    pm = h.entries(s2)[0]
    assert (pm.response, pm.has_error) == ("PM: ok", False)
    assert len(h.fake.requests_for(session=s2, agent="pm")) == 2
    assert h.prompted_agents(s2).count("pm") == 1
    assert h.fake.calls_of("abort", s2) == []


async def test_a_seat_whose_model_is_missing_fails_with_no_reply_and_the_debate_goes_on(
    harness: H,
) -> None:
    """Gotcha: an agent configured with a model the providers lack: ``session.error`` twice, idle,
    no reply. The engine records the failure with the server's message after its error grace
    instead of waiting for the turn timeout, once although the error comes twice."""
    h = await harness()
    h.fake.agent_models["pm"] = "missing-model"
    s2 = await h.start(turnTimeout=300)
    await h.result(s2)
    assert h.fake.status_sequence(s2)[:5] == [
        "busy",
        "error:UnknownError",
        "idle",
        "idle!",
        "error:UnknownError",
    ]
    pm = h.entries(s2)[0]
    assert (pm.has_error, pm.response) == (True, "")
    assert (pm.error or "").startswith("UnknownError: Model not found: "), pm.error
    assert h.errors(s2) == [f"pm (round 1): {pm.error}"]
    dev_at = h.fake.times_of("prompt_async", s2)[1]
    pm_at = h.fake.times_of("prompt_async", s2)[0]
    assert dev_at - pm_at < 10_000  # the error grace, not the 300 s timeout
    assert h.fake.requests_for(session=s2, agent="pm") == []


async def test_every_seat_failing_ends_the_debate_as_all_failed(harness: H) -> None:
    h = await harness()
    h.fake.script(*[HttpError(status=400, message="down")] * 4, agent=None)
    s2 = await h.start(rounds=2)
    result = await h.result(s2)
    assert result["endReason"] == "all-failed"
    assert [e.agent for e in h.entries(s2) if e.kind == "turn"] == ["pm", "dev"]


async def test_an_empty_finish_reason_calls_the_model_again_until_it_stops(harness: H) -> None:
    h = await harness()
    h.fake.script(Text(text="", finish_reason=""), Text(text="PM: now I stop."), agent="pm")
    s2 = await h.start()
    await h.result(s2)
    assert [r.agent for r in h.fake.requests_for(session=s2)][:3] == ["pm", "pm", "dev"]
    assert h.entries(s2)[0].response == "PM: now I stop."
    assert h.prompted_agents(s2).count("pm") == 1


async def test_a_session_error_event_alone_never_ends_a_running_turn(harness: H) -> None:
    """A ``session.error`` while the seat still streams (e.g. a retried provider hiccup):
    the turn ends only with its reply."""
    h = await harness()
    h.fake.script(Text(text="PM: slow but sure.", first_byte_delay=20), agent="pm")
    s2 = await h.start()
    await h.clock.advance(5)
    h.fake.emit("session.error", {"sessionID": s2, "error": {"name": "APIError", "data": {}}})
    await h.clock.advance(5)
    assert h.prompted_agents(s2) == ["pm"]
    await h.result(s2)
    pm = h.entries(s2)[0]
    assert (pm.response, pm.has_error) == ("PM: slow but sure.", False)


async def test_a_prompt_the_server_never_stores_is_sent_again_with_the_same_id(harness: H) -> None:
    """The POST of turn 2 fails: the machine re-prompts with the same message id once the
    message is found absent (never a duplicate turn)."""
    h = await harness()
    s2 = await h.start()
    h.fake.fail_next("prompt_async", TransportError("connection reset", retryable=True))
    await h.result(s2)
    bodies = h.prompts(s2)
    assert [b["agent"] for b in bodies] == ["pm", "dev", "dev", "roundtable-observer"]
    assert bodies[1]["messageID"] == bodies[2]["messageID"]
    stored = [m for m in await h.messages(s2) if m["info"]["id"] == bodies[1]["messageID"]]
    assert len(stored) == 1
    assert [e.agent for e in h.entries(s2)] == ["pm", "dev", "roundtable-observer"]
