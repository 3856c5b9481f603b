"""The start's toast ("Roundtable started: …") waits until turn 1 has reached the model: it is
sent at the first step answering turn 1's prompt, not beside turn 1's start on the server (one
event loop serves both there). Exactly once per start: also when turn 1 never reaches the model
(the worker's first pass sends it, before the turn's failure toast); a daemon restarted before
it was sent says "resumed" instead, never "started" (docs/design.md, "The path of one
roundtable")."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from roundtabled.offline.scripted_actions import Text
from tests.fakes.fake_opencode import FakeSession

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]
STARTED = "Roundtable started: "


def slow_turn_start(h: Harness, delay: float) -> None:
    """The server starts each session's first turn ``delay`` s after storing its prompt (the
    real one takes tens of milliseconds to reach the model)."""
    fake = h.fake
    real = fake._start
    started: set[str] = set()

    def start(s: FakeSession) -> None:
        sid = s.info["id"]
        if sid in started:
            real(s)
            return
        started.add(sid)
        asyncio.get_running_loop().call_later(delay, real, s)

    fake._start = start  # type: ignore[method-assign]


def toasts(h: Harness) -> list[str]:
    return [str(t["message"]) for t in h.fake.toasts]


async def test_the_start_toast_waits_for_turn_one_s_first_step(harness: H) -> None:
    h = await harness()
    slow_turn_start(h, 0.5)
    seen: list[list[dict[str, Any]]] = []
    real_toast = h.fake.toast

    async def toast(message: str, **kw: Any) -> None:
        if message.startswith(STARTED):
            seen.append(await h.messages(s2))
        await real_toast(message, **kw)

    h.fake.toast = toast  # type: ignore[method-assign]
    s2 = await h.start(title="Wait")
    turn1 = h.prompts(s2)[0]["messageID"]
    await h.clock.advance(0.3)
    assert toasts(h) == []  # the server has not started turn 1 yet
    await h.until(lambda: toasts(h))
    (msgs,) = seen
    assert any(
        m["info"]["role"] == "assistant" and m["info"].get("parentID") == turn1 for m in msgs
    ), msgs
    await h.finalized(s2)
    assert [t for t in toasts(h) if t.startswith(STARTED)] == ["Roundtable started: Wait"]


async def test_a_turn_one_that_never_reaches_the_model_still_gets_the_toast_first(
    harness: H,
) -> None:
    """pm's model is missing: the server reports an error and stores no reply; the worker's
    first pass (woken by the error) sends the start's toast, then the turn's failure toast."""
    h = await harness()
    h.fake.agent_models["pm"] = "missing-model"
    s2 = await h.start(title="Missing")
    await h.finalized(s2)
    shown = toasts(h)
    assert shown[0] == "Roundtable started: Missing", shown
    assert [t for t in shown if t.startswith(STARTED)] == ["Roundtable started: Missing"]
    assert shown[1] == "PM failed on Round 1. Skipping to DEV.", shown


async def test_a_daemon_restarted_before_turn_one_reached_the_model_says_resumed(
    harness: H,
) -> None:
    h = await harness()
    h.fake.script(Text(text="PM answers."), agent="pm")
    slow_turn_start(h, 5.0)
    s2 = await h.start(title="Restarted")
    await h.clock.advance(1.0)  # a toast due at once would have gone out by now
    await h.restart(graceful=False)
    await h.finalized(s2)
    shown = toasts(h)
    assert [t for t in shown if t.startswith(STARTED)] == [], shown
    assert shown.count("Roundtable resumed after a restart: Restarted") == 1, shown
    assert h.prompted_agents(s2) == ["pm", "dev", "roundtable-observer"]
