"""A fresh roundtable's state block rides in turn 1's prompt message (docs/design.md, "State
format", "Exactly once"): one ``prompt_async`` is the only write into S2 before turn 1, a restart
loads the state from that message, the patch mode's hiding leaves the block alone, a cancel
right after the start waits for the message to be stored, and a prompt the server never stored
takes the block along when it is sent again (or, once its turn is settled, the block gets a
message of its own)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from roundtabled.core import messages
from roundtabled.core.state import Phase
from roundtabled.errors import TransportError
from roundtabled.offline.scripted_actions import Text
from roundtabled.opencode import v1_wire
from roundtabled.opencode.v1_wire import is_state_part

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]
LOCKED = "Failed to execute statement"


def carries_block(body: dict[str, Any]) -> bool:
    return any(is_state_part(p) for p in body.get("parts") or [])


def blocks_of(msgs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """``(message id, part)`` of every state block part in S2."""
    return [(m["info"]["id"], p) for m in msgs for p in m["parts"] if is_state_part(p)]


async def test_after_a_start_s2_holds_one_user_message_turn_one_s_prompt_with_the_state(
    harness: H,
) -> None:
    """Before turn 1's reply S2 holds one user message: the prompt, carrying the signed state
    (turn 1's intent in it) as an ignored part; S2's index names that message and part."""
    h = await harness()
    h.fake.script(Text(text="PM: ship it.", first_byte_delay=5.0), agent="pm")
    s2 = await h.start()
    (body,) = h.prompts(s2)
    await h.until(lambda: h.fake.requests_for(session=s2))
    msgs = await h.messages(s2)
    before_reply = [m for m in msgs if m["info"]["role"] == "user"]
    assert len(before_reply) == 1 and msgs[0] is before_reply[0], msgs
    (prompt,) = before_reply
    assert prompt["info"]["id"] == body["messageID"]
    (block,) = [p for p in prompt["parts"] if is_state_part(p)]
    assert block["ignored"] is True
    view = v1_wire.message_view(prompt, s2, h.signer)
    assert isinstance(view, messages.UserView) and view.state_block
    assert view.marker is not None and (view.marker.agent, view.marker.round) == ("pm", 0)
    index = (await h.fake.get_session(s2))["metadata"]["roundtabled"]
    assert (index["stateMessageID"], index["statePartID"]) == (prompt["info"]["id"], block["id"])
    stored = await h.engine.store.load(s2)
    assert stored.pending is not None and stored.pending.message_id == prompt["info"]["id"]
    assert stored.pending.agent == "pm"
    assert h.fake.calls_of("post_no_reply", s2) == []


async def test_a_start_whose_one_post_failed_leaves_s2_without_a_roundtable(harness: H) -> None:
    """The POST carrying turn 1 and the state block fails: the start fails, as a failed write of
    the block did before, and S2 holds no block (as after a kill before that POST): nothing
    drives it, and the start-up scan reports and skips it."""
    h = await harness()
    h.fake.fail_next("prompt_async", TransportError("connection reset", retryable=True))
    with pytest.raises(TransportError):
        await h.start()
    (s2,) = [sid for sid, s in h.fake.sessions.items() if s.info.get("metadata")]
    assert s2 not in h.engine.tables and await h.messages(s2) == []
    assert not h.engine.store.riding(s2)
    counters = await h.engine.recover()
    assert (counters["resumed"], counters["skipped"]) == (0, 1)
    await h.restart(graceful=False)
    assert s2 not in h.engine.tables


async def test_a_restart_during_turn_one_loads_the_state_from_its_prompt_and_finishes(
    harness: H,
) -> None:
    h = await harness()
    h.fake.script(Text(text="PM: slow but sure.", first_byte_delay=30.0), agent="pm")
    s2 = await h.start()
    await h.until(lambda: h.fake.requests_for(session=s2))
    await h.restart(graceful=False)
    assert h.engine.tables[s2].state.pending is not None  # resumed from turn 1's prompt
    result = await h.result(s2)
    assert result["endReason"] == "completed"
    assert h.prompted_agents(s2) == ["pm", "dev", "roundtable-observer"]  # turn 1 not re-sent
    assert [e.response for e in h.entries(s2)][:1] == ["PM: slow but sure."]
    await h.finalized(s2)
    msgs = await h.messages(s2)
    ((mid, _),) = blocks_of(msgs)
    assert mid == h.prompts(s2)[0]["messageID"]
    assert (await h.engine.store.load(s2)).phase == Phase.DONE


async def test_the_patch_mode_hide_of_turn_one_leaves_the_state_part_readable(
    harness: H,
) -> None:
    """The patch mode hides a prompt by its visible parts (never turn 1's, which carries the
    topic, in a debate; here called on it directly, by the view and by the message id): the
    prompt's text is hidden, the state block stays as it was and still loads."""
    h = await harness()
    s2 = await h.start(rounds=2)
    await h.finalized(s2)
    turn1 = h.prompts(s2)[0]["messageID"]
    before = await h.fake.message(s2, turn1)
    (block,) = [p for p in before["parts"] if is_state_part(p)]
    state = await h.engine.store.load(s2)
    view = v1_wire.message_view(before, s2, h.signer)
    assert isinstance(view, messages.UserView) and [p.id for p in view.visible_parts]
    await h.engine.store.hide_all(s2, (view,))
    await h.engine.store.hide_message(s2, turn1)
    after = await h.fake.message(s2, turn1)
    assert v1_wire.visible_text_parts(after) == []
    assert [p for p in after["parts"] if is_state_part(p)] == [block]
    patched = {a[2]["id"] for a in h.fake.calls_of("update_part", s2) if a[1] == turn1}
    assert patched - {block["id"]} == {p.id for p in view.visible_parts}
    assert await h.engine.store.load(s2) == state


async def test_a_cancel_right_after_the_start_is_written_once_turn_one_s_prompt_is_stored(
    harness: H,
) -> None:
    """The server stores a prompt's message after it answered the POST: a cancel that comes in
    between writes the cancel into the block only once the message is stored (a PATCH before
    would find no message), still before the abort."""
    h = await harness()
    fake = h.fake
    real = fake.prompt_async
    later: list[asyncio.Future[None]] = []

    async def stored_later(session_id: str, body: dict[str, Any]) -> None:
        if carries_block(body):
            asyncio.get_running_loop().call_later(
                0.3, lambda: later.append(asyncio.ensure_future(real(session_id, body)))
            )
            return
        await real(session_id, body)

    fake.prompt_async = stored_later  # type: ignore[method-assign]
    s2 = await h.start()
    assert blocks_of(await h.messages(s2)) == []  # not stored yet
    before = len(fake.calls)
    await h.engine.cancel(s2, summarize=False, reason="user")
    calls = [(m, a) for m, a in fake.calls[before:] if a and a[0] == s2]
    methods = [m for m, _ in calls]
    assert methods.index("prompt_async") < methods.index("update_part") < methods.index("abort")
    ((_, block),) = blocks_of(await h.messages(s2))
    assert "cancelled" in str(block["metadata"])
    result = await h.result(s2)
    assert result["endReason"] == "cancelled"


def never_stored(h: Harness, times: int) -> list[str]:
    """The next ``times`` prompts carrying the state block are answered and never stored: the
    server's write waited 5 s for a database lock held elsewhere and failed (docs/opencode-
    server.md, "Swallowed prompts and a locked database"). Returns the ids they were sent with."""
    fake = h.fake
    real = fake.prompt_async
    sent: list[str] = []

    async def locked(session_id: str, body: dict[str, Any]) -> None:
        if len(sent) < times and carries_block(body):
            fake.calls.append(("prompt_async", (session_id, copy.deepcopy(body))))
            fake.call_times.append(fake.clock.now_ms())
            sent.append(str(body["messageID"]))
            asyncio.get_running_loop().call_later(
                5.0, fake._error, session_id, "UnknownError", LOCKED
            )
            return
        await real(session_id, body)

    fake.prompt_async = locked  # type: ignore[method-assign]
    return sent


async def test_turn_one_the_server_never_stored_is_sent_again_with_the_state_block(
    harness: H,
) -> None:
    h = await harness()
    sent = never_stored(h, times=1)
    s2 = await h.start()
    result = await h.result(s2)
    assert result["endReason"] == "completed"
    bodies = h.prompts(s2)
    assert [b["agent"] for b in bodies] == ["pm", "pm", "dev", "roundtable-observer"]
    assert sent == [bodies[0]["messageID"]] and bodies[1]["messageID"] == sent[0]
    assert carries_block(bodies[1])  # the re-sent prompt takes the block along
    assert not any(e.has_error for e in h.entries(s2))
    await h.finalized(s2)
    ((mid, _),) = blocks_of(await h.messages(s2))
    assert mid == sent[0]
    assert (await h.engine.store.load(s2)).phase == Phase.DONE


async def test_turn_one_never_stored_twice_leaves_the_block_a_message_of_its_own(
    harness: H,
) -> None:
    """Sent twice and never stored, turn 1 is recorded as failed; the block, never stored
    either, is written as a message of its own under its ids and the debate goes on."""
    h = await harness()
    sent = never_stored(h, times=2)
    s2 = await h.start()
    result = await h.result(s2)
    assert [b["agent"] for b in h.prompts(s2)] == ["pm", "pm", "dev", "roundtable-observer"]
    pm = h.entries(s2)[0]
    assert pm.has_error and LOCKED in (pm.error or ""), pm
    assert result["phase"] == "done"
    await h.finalized(s2)
    msgs = await h.messages(s2)
    ((mid, _),) = blocks_of(msgs)
    (own,) = [m for m in msgs if m["info"]["id"] == mid]
    assert mid == sent[0] and len(own["parts"]) == 1
    assert (await h.engine.store.load(s2)).phase == Phase.DONE


async def test_a_start_without_a_first_prompt_keeps_the_block_a_message_of_its_own(
    harness: H,
) -> None:
    """A start without a first prompt (the independent opening) keeps the block a message of
    its own, written before anything else."""
    h = await harness()
    s2 = await h.start(opening="independent")
    await h.result(s2)
    (posted,) = h.fake.calls_of("post_no_reply", s2)[:1]
    assert carries_block({"parts": posted[1]})
    assert not carries_block(h.prompts(s2)[0])
