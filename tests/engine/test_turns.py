"""Turns: start, order, exactly one prompt per turn, what each prompt carries, the state block."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from roundtabled.errors import ValidationFailed
from roundtabled.offline.scripted_actions import Text
from roundtabled.opencode.v1_wire import is_state_part

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]
SEAT_MODEL = {"pm": "debater-1", "dev": "debater-2", "rv": "debater-3"}


def visible(body: dict[str, object]) -> list[str]:
    parts = body["parts"]
    assert isinstance(parts, list)
    return [p["text"] for p in parts if not p.get("ignored")]


async def test_two_seats_one_round_run_pm_dev_then_the_observer(harness: H) -> None:
    h = await harness()
    s2 = await h.start()
    result = await h.result(s2)
    assert h.prompted_agents(s2) == ["pm", "dev", "roundtable-observer"]
    assert h.replies_by(s2) == ["pm", "dev", "roundtable-observer"]
    assert (result["done"], result["endReason"], result["phase"]) == (True, "completed", "done")


async def test_three_seats_two_rounds_take_turns_in_seat_order(harness: H) -> None:
    h = await harness()
    s2 = await h.start(agents=["pm", "dev", "rv"], rounds=2)
    await h.result(s2)
    assert h.prompted_agents(s2) == ["pm", "dev", "rv", "pm", "dev", "rv", "roundtable-observer"]
    assert [e.agent for e in h.entries(s2)] == h.prompted_agents(s2)
    assert [e.round for e in h.entries(s2)][:6] == [1, 1, 1, 2, 2, 2]
    assert h.status(s2)["turns"] == 6  # type: ignore[index]


async def test_start_returns_once_turn_one_is_sent_carrying_the_state_block(harness: H) -> None:
    """One write into S2 before turn 1: its prompt, whose message is the state block too (no
    noReply message of its own, docs/design.md "State format")."""
    h = await harness()
    before = len(h.fake.calls)
    s2 = await h.start()
    methods = [m for m, _ in h.fake.calls[before:] if m not in ("toast",)]
    assert methods == ["agents", "config", "create_session", "prompt_async"]
    assert h.prompted_agents(s2) == ["pm"]
    assert h.status(s2)["phase"] == "active"  # type: ignore[index]
    (body,) = h.prompts(s2)
    index = (await h.fake.get_session(s2))["metadata"]["roundtabled"]
    assert body["messageID"] == index["stateMessageID"]
    assert [p.get("id") for p in body["parts"] if is_state_part(p)] == [index["statePartID"]]


async def test_every_prompt_names_its_agent_and_its_seat_model(harness: H) -> None:
    h = await harness()
    s2 = await h.start(agents=["pm", "dev", "rv"])
    await h.result(s2)
    models = [(b["agent"], b["model"]["modelID"]) for b in h.prompts(s2)]  # type: ignore[index]
    assert models == [
        ("pm", "debater-1"),
        ("dev", "debater-2"),
        ("rv", "debater-3"),
        ("roundtable-observer", "orchestrator-1"),
    ]
    assert [r.model for r in h.fake.requests_for(session=s2)] == [m for _, m in models]


async def test_every_prompt_has_one_visible_text_and_one_signed_ignored_label(harness: H) -> None:
    h = await harness()
    s2 = await h.start()
    await h.result(s2)
    for i, body in enumerate(h.prompts(s2)):
        parts = body["parts"]
        if i == 0:  # turn 1's message is the state block too: its part goes first
            block, *parts = parts
            assert is_state_part(block) and block["ignored"] is True
        assert len(parts) == 2
        assert not parts[0].get("ignored")
        assert parts[1]["ignored"] is True
        assert "roundtabled" in parts[1]["metadata"]
    labels = [b["parts"][-1]["text"] for b in h.prompts(s2)]
    assert labels == [
        "── pm · round 1 ──",
        "── dev · round 1 ──",
        "── observer · roundtable-observer ──",
    ]


async def test_message_ids_are_chosen_by_the_daemon_and_each_prompt_is_stored_once(
    harness: H,
) -> None:
    h = await harness()
    s2 = await h.start(rounds=2)
    await h.result(s2)
    chosen = [b["messageID"] for b in h.prompts(s2)]
    assert len(set(chosen)) == 5
    stored = [m["info"]["id"] for m in await h.messages(s2) if m["info"]["role"] == "user"]
    for mid in chosen:
        assert stored.count(mid) == 1


async def test_the_topic_is_in_every_seat_prompt_and_the_previous_reply_in_the_next(
    harness: H,
) -> None:
    h = await harness()
    h.fake.script(Text(text="PM: ship it on Friday."), agent="pm")
    s2 = await h.start(prompt="Ship the search feature?")
    await h.result(s2)
    pm, dev, _ = (visible(b)[0] for b in h.prompts(s2))
    assert "Ship the search feature?" in pm and "Ship the search feature?" in dev
    assert "PM: ship it on Friday." not in pm
    assert "PM: ship it on Friday." in dev


async def test_an_earlier_turn_prompt_is_hidden_from_the_next_models(harness: H) -> None:
    """hide_past_prompts: after its turn a seat's prompt is marked ignored, so the next model
    sees only the opening prompt and its own (the engine's three prompts, the state block
    never)."""
    h = await harness()
    s2 = await h.start(agents=["pm", "dev", "rv"])
    await h.result(s2)
    reqs = h.fake.requests_for(session=s2)
    seen_users = [sum(1 for m in r.messages if m["role"] == "user") for r in reqs]
    assert seen_users == [1, 2, 2, 2]
    assert all("ROUNDTABLE META" not in str(r.messages) for r in reqs)


async def test_hiding_the_previous_prompt_lands_before_the_next_prompt(harness: H) -> None:
    h = await harness()
    s2 = await h.start(agents=["pm", "dev", "rv"])
    await h.result(s2)
    bodies = h.prompts(s2)
    dev_prompt = bodies[1]["messageID"]
    order = [
        (m, a[1] if m == "update_part" else a[1]["agent"])
        for m, a in h.fake.calls
        if m in ("update_part", "prompt_async") and a[0] == s2
    ]
    hide = order.index(("update_part", dev_prompt))
    assert order[hide + 1] == ("prompt_async", "rv")


async def test_the_state_block_is_one_part_of_turn_one_s_prompt_updated_in_place(
    harness: H,
) -> None:
    h = await harness()
    s2 = await h.start(rounds=2)
    await h.finalized(s2)
    blocks = [m for m in await h.messages(s2) if any(is_state_part(p) for p in m["parts"])]
    assert len(blocks) == 1
    assert blocks[0]["info"]["id"] == h.prompts(s2)[0]["messageID"]  # turn 1's prompt
    (part,) = [p for p in blocks[0]["parts"] if is_state_part(p)]
    assert part["ignored"] is True
    assert len(h.fake.calls_of("post_no_reply", s2)) == 1  # the delimiter only
    state_id = blocks[0]["info"]["id"]
    writes = [a for a in h.fake.calls_of("update_part", s2) if a[1] == state_id]
    assert len(writes) >= 2 and all(a[2]["id"] == part["id"] for a in writes)


async def test_s2_is_a_child_of_s1_with_the_title_and_the_scan_index(harness: H) -> None:
    h = await harness()
    s1 = await h.parent()
    s2 = await h.start(parentSessionID=s1, title="Search feature")
    info = await h.fake.get_session(s2)
    assert (info["parentID"], info["title"]) == (s1, "Search feature")
    assert info["metadata"]["roundtabled"]["phase"] == "active"
    assert info["metadata"]["roundtabled"]["finalized"] is False


async def test_unknown_seat_is_refused_naming_the_available_agents(harness: H) -> None:
    h = await harness()
    with pytest.raises(ValidationFailed) as err:
        await h.start(agents=["pm", "nobody"])
    assert err.value.field == "agents"
    assert "pm" in str(err.value) and "dev" in str(err.value)
    assert h.fake.calls_of("create_session") == []
    assert h.fake.calls_of("prompt_async") == []


async def test_a_missing_parent_session_is_refused(harness: H) -> None:
    h = await harness()
    with pytest.raises(ValidationFailed) as err:
        await h.start(parentSessionID="ses_doesnotexist1234")
    assert err.value.field == "parentSessionID"
    assert h.fake.calls_of("prompt_async") == []


async def test_parallel_roundtables_do_not_mix_turns(harness: H) -> None:
    h = await harness()
    a = await h.start(prompt="Topic A")
    b = await h.start(agents=["dev", "rv"], prompt="Topic B", rounds=2)
    await h.result(a)
    await h.result(b)
    assert h.prompted_agents(a) == ["pm", "dev", "roundtable-observer"]
    assert h.prompted_agents(b) == ["dev", "rv", "dev", "rv", "roundtable-observer"]
    assert all("Topic A" in visible(x)[0] for x in h.prompts(a)[:2])
    assert all("Topic B" in visible(x)[0] for x in h.prompts(b)[:4])
