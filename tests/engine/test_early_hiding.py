"""The early hiding of a finished turn's prompt
(:meth:`roundtabled.engine.handoff.Handoff.hide_early`): started when the turn's final step
completes, awaited by the handoff, and never while the server may still call the model for the same
turn (a ``tool-calls`` or ``unknown`` step)."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable

from roundtabled.offline.scripted_actions import Text, tool_call

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]


def user_messages_per_request(h: Harness, s2: str) -> list[tuple[str, str, int]]:
    """``(agent, kind, user messages the model saw)`` of every model request in ``s2``."""
    return [
        (r.agent, r.kind, sum(1 for m in r.messages if m["role"] == "user"))
        for r in h.fake.requests_for(session=s2)
    ]


async def test_each_seat_prompt_is_hidden_at_its_final_step_before_the_next_prompt(
    harness: H,
) -> None:
    h = await harness()
    s2 = await h.start(agents=["pm", "dev", "rv"])
    await h.result(s2)
    assert h.prompted_agents(s2) == ["pm", "dev", "rv", "roundtable-observer"]
    # dev's and rv's prompts (not the opening pm's, which carries the topic) were hidden early.
    assert h.engine.metrics.early_hides == 2
    # Each seat saw the opening prompt and its own, never an earlier seat's turn prompt.
    assert [n for a, _, n in user_messages_per_request(h, s2) if a != "roundtable-observer"] == [
        1,
        2,
        2,
    ]
    # Every hiding PATCH of a prompt came before the next prompt's POST.
    prompts = [a[1]["messageID"] for a in h.fake.calls_of("prompt_async", s2)]
    order = [(m, a) for m, a in h.fake.calls if a and a[0] == s2]
    for earlier, later in itertools.pairwise(prompts[1:]):
        hid = next(i for i, (m, a) in enumerate(order) if m == "update_part" and a[1] == earlier)
        sent = next(
            i
            for i, (m, a) in enumerate(order)
            if m == "prompt_async" and a[1]["messageID"] == later
        )
        assert hid < sent


async def test_a_step_that_calls_tools_or_ends_unknown_keeps_the_prompt_visible(
    harness: H,
) -> None:
    """After ``tool-calls`` and after ``unknown`` the server calls the model again for the same
    turn: the prompt is hidden only after that last step (which takes 2 s here) completed, and
    every request of the turn carries the seat's own prompt."""
    h = await harness()
    slow = {"chunk_size": 4, "chunk_delay": 0.5}
    h.fake.script(tool_call("probe", {"q": 1}), Text(text="DEV: after.", **slow), agent="dev")
    h.fake.script(Text(text="", finish_reason=""), Text(text="RV: I stop.", **slow), agent="rv")
    s2 = await h.start(agents=["pm", "dev", "rv"])
    await h.result(s2)
    seen = user_messages_per_request(h, s2)
    assert [(a, n) for a, _, n in seen if a in ("dev", "rv")] == [
        ("dev", 2),
        ("dev", 2),
        ("rv", 2),
        ("rv", 2),
    ]
    assert h.engine.metrics.early_hides == 2
    prompts = {a[1]["agent"]: a[1]["messageID"] for a in h.fake.calls_of("prompt_async", s2)}
    calls = list(zip(h.fake.calls, h.fake.call_times, strict=True))
    for agent in ("dev", "rv"):
        hid_at = next(t for (m, a), t in calls if m == "update_part" and a[1] == prompts[agent])
        last = [r for r in h.fake.requests_for(session=s2) if r.agent == agent][-1]
        assert hid_at >= last.at_ms + 1_000, (agent, hid_at, last.at_ms)


async def test_without_hiding_nothing_is_hidden_early(harness: H) -> None:
    h = await harness(hide_past_prompts=False)
    s2 = await h.start(agents=["pm", "dev", "rv"])
    await h.result(s2)
    assert h.engine.metrics.early_hides == 0
    # Every part written is the state block's: no prompt was hidden at all.
    written = h.fake.calls_of("update_part", s2)
    assert written and all(a[2].get("metadata", {}).get("roundtabled") for a in written)
