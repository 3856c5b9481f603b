"""Deletion of S2 / S1, cancel (with and without summary), extend, and the finalization steps
(delimiter, title, toast, scan index)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from roundtabled.core.state import CONCLUDED_SUFFIX, DELIMITER_TEXT
from roundtabled.errors import ValidationFailed
from roundtabled.offline.scripted_actions import Hang, Text

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]
WRITES = {"update_part", "update_session", "post_no_reply", "prompt_async"}


def delimiters(msgs: list[dict[str, object]]) -> list[dict[str, object]]:
    return [
        m
        for m in msgs
        if any(p.get("text") == DELIMITER_TEXT for p in m["parts"])  # type: ignore[attr-defined]
    ]


async def pm_mid_turn(h: Harness) -> tuple[str, str]:
    """A roundtable of a new S1 whose first seat (pm) hangs, 2 s into pm's turn: ``(s1, s2)``."""
    s1 = await h.parent()
    h.fake.script(Hang(max_seconds=3600), agent="pm")
    s2 = await h.start(parentSessionID=s1)
    await h.clock.advance(2)
    return s1, s2


async def test_deleting_s2_mid_turn_aborts_and_ends_it_without_more_prompts(harness: H) -> None:
    h = await harness()
    s1, s2 = await pm_mid_turn(h)
    mark = len(h.fake.calls)
    await h.fake.delete_session(s2)
    result = await h.result(s2)
    assert (result["phase"], result["endReason"]) == ("aborted", "session-deleted")
    assert (await h.finalized(s2))["delivered"] == "no-reply"
    assert h.prompted_agents(s2) == ["pm"]
    after = [m for m, a in h.fake.calls[mark:] if a and a[0] == s2]
    assert after.count("abort") == 1  # a deleted busy session keeps generating: abort it
    assert set(after) & WRITES == set()  # and never write to it again
    assert len(await h.no_reply_texts(s1)) == 1


async def test_deleting_s1_ends_the_roundtable_with_nothing_delivered(harness: H) -> None:
    h = await harness()
    s1, s2 = await pm_mid_turn(h)
    await h.fake.delete_session(s1)  # S2 goes with it
    result = await h.result(s2)
    assert (result["phase"], result["endReason"]) == ("aborted", "parent-deleted")
    status = await h.finalized(s2)
    assert status["delivered"] == "none"
    assert h.prompted_agents(s2) == ["pm"]
    assert h.fake.calls_of("post_no_reply", s1) == []


async def test_cancel_without_summary_stops_the_turn_and_never_asks_the_observer(
    harness: H,
) -> None:
    h = await harness()
    h.fake.script(Hang(max_seconds=3600), agent="pm")
    s2 = await h.start()
    await h.clock.advance(3)
    await h.engine.cancel(s2, summarize=False, reason="user")
    result = await h.result(s2)
    assert result["endReason"] == "cancelled"
    assert h.prompted_agents(s2) == ["pm"]
    (abort_at,) = h.fake.times_of("abort", s2)[:1]
    cancel_at = h.fake.times_of("prompt_async", s2)[0] + 3000
    assert abort_at - cancel_at < 2000  # stop must stop
    pm = h.entries(s2)[0]
    assert (pm.cut_off, pm.error) == (True, "cut off by the cancel")


async def test_cancel_with_summary_asks_the_observer_once(harness: H) -> None:
    h = await harness()
    h.fake.script(Hang(max_seconds=3600), agent="pm")
    h.fake.script(
        Text(text="OBSERVER: stopped early, here is the gist."), agent="roundtable-observer"
    )
    s2 = await h.start(rounds=2)
    await h.clock.advance(3)
    await h.engine.cancel(s2, summarize=True, reason="user")
    result = await h.result(s2)
    assert result["endReason"] == "cancelled"
    assert h.prompted_agents(s2) == ["pm", "roundtable-observer"]
    assert "OBSERVER: stopped early" in result["text"]


async def test_the_cancel_is_written_to_s2_before_the_abort(harness: H) -> None:
    h = await harness()
    h.fake.script(Hang(max_seconds=3600), agent="pm")
    s2 = await h.start()
    await h.clock.advance(1)
    before = len(h.fake.calls)
    await h.engine.cancel(s2, summarize=False, reason="user")
    methods = [m for m, a in h.fake.calls[before:] if a and a[0] == s2]
    assert methods.index("update_part") < methods.index("abort")


async def test_cancel_of_an_unknown_roundtable_names_the_field(harness: H) -> None:
    h = await harness()
    with pytest.raises(ValidationFailed) as err:
        await h.engine.cancel("ses_doesnotexist1234", summarize=False, reason="user")
    assert err.value.field == "sessionID"
    assert h.fake.calls_of("abort") == []


async def test_finalization_posts_one_delimiter_sets_the_title_once_and_toasts(harness: H) -> None:
    h = await harness()
    s2 = await h.start(title="Search")
    await h.finalized(s2)
    msgs = await h.messages(s2)
    assert len(delimiters(msgs)) == 1
    assert delimiters(msgs)[0] is msgs[-1]
    info = await h.fake.get_session(s2)
    assert info["title"] == "Search" + CONCLUDED_SUFFIX
    assert info["metadata"]["roundtabled"]["phase"] == "done"
    assert info["metadata"]["roundtabled"]["finalized"] is True
    assert [(t["message"], t["variant"]) for t in h.fake.toasts] == [
        ("Roundtable started: Search", "info"),
        # progress: dev's turn came within 2 s of pm's (throttled, dropped); the phase change
        ("pm · round 1/1 done — 1 of 2 turns", "info"),
        ("Debate over after round 1/1: the observer consolidates — Search", "info"),
        ("Roundtable concluded: Search", "success"),
    ]


async def test_progress_toasts_can_be_turned_off(harness: H) -> None:
    h = await harness(progress_toasts=False)
    s2 = await h.start(title="Quiet")
    await h.finalized(s2)
    assert [t["message"] for t in h.fake.toasts] == [
        "Roundtable started: Quiet",
        "Roundtable concluded: Quiet",
    ]


async def test_the_delimiter_waits_while_s2_is_busy(harness: H) -> None:
    h = await harness()
    s2 = await h.start()
    await h.result(s2)
    h.fake.set_busy(s2)  # a person's turn in S2 right after the conclusion
    await h.clock.advance(10)
    assert delimiters(await h.messages(s2)) == []
    h.fake.set_busy(s2, False)
    await h.finalized(s2)
    assert len(delimiters(await h.messages(s2))) == 1


async def test_extend_runs_more_rounds_on_the_same_seats_and_one_new_delimiter(harness: H) -> None:
    h = await harness()
    s2 = await h.start(title="Search")
    await h.finalized(s2)
    await h.extend(s2, prompt="Now consider the cost", rounds=1)
    await h.finalized(s2)
    assert h.prompted_agents(s2) == ["pm", "dev", "roundtable-observer"] * 2
    msgs = await h.messages(s2)
    marks = delimiters(msgs)
    assert len(marks) == 2
    hidden = [p.get("ignored") for p in marks[0]["parts"] if p.get("text") == DELIMITER_TEXT]
    assert hidden == [True]
    info = await h.fake.get_session(s2)
    assert info["title"] == "Search" + CONCLUDED_SUFFIX
    assert h.status(s2)["totalRounds"] == 2  # type: ignore[index]


async def test_extend_of_an_active_roundtable_is_refused(harness: H) -> None:
    h = await harness()
    h.fake.script(Hang(max_seconds=3600), agent="pm")
    s2 = await h.start()
    with pytest.raises(ValidationFailed) as err:
        await h.extend(s2)
    assert err.value.field == "sessionID" and "still active" in str(err.value)


async def test_extend_with_other_agents_is_refused_naming_the_seats(harness: H) -> None:
    h = await harness()
    s2 = await h.start()
    await h.finalized(s2)
    with pytest.raises(ValidationFailed) as err:
        await h.extend(s2, agents=["pm", "rv"])
    assert err.value.field == "agents" and "pm, dev" in str(err.value)
    assert h.prompted_agents(s2) == ["pm", "dev", "roundtable-observer"]


async def test_extend_of_a_session_that_is_no_roundtable_is_refused(harness: H) -> None:
    h = await harness()
    plain = await h.parent("just a session")
    with pytest.raises(ValidationFailed) as err:
        await h.extend(plain)
    assert err.value.field == "sessionID"


async def test_a_progress_toast_per_finished_turn_at_most_one_per_2_s(harness: H) -> None:
    h = await harness()
    # pm answers at once (shown), dev 3 s later (shown), rv right after dev (within 2 s of
    # dev's toast: dropped); then the phase change and the end are always shown.
    h.fake.script(Text(text="pm quick"), agent="pm")
    h.fake.script(Text(text="dev slow", first_byte_delay=3.0), agent="dev")
    h.fake.script(Text(text="rv quick"), agent="rv")
    s2 = await h.start(agents=["pm", "dev", "rv"], title="Paced")
    await h.finalized(s2)
    assert [t["message"] for t in h.fake.toasts if "done —" in t["message"]] == [
        "pm · round 1/1 done — 1 of 3 turns",
        "dev · round 1/1 done — 2 of 3 turns",
    ]
    assert [t["message"] for t in h.fake.toasts][-2:] == [
        "Debate over after round 1/1: the observer consolidates — Paced",
        "Roundtable concluded: Paced",
    ]
    info = await h.fake.get_session(s2)
    assert info["title"] == "Paced" + CONCLUDED_SUFFIX  # the title stays (only the suffix)
