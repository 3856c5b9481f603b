"""The handoff's decision taken at the pending turn's final step, before its idle
(:meth:`roundtabled.engine.handoff.Handoff.decide_ahead`): used at the idle only when no message
or part of the turn changed in between, so it is always the decision a read at the idle would
give."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from roundtabled.offline.scripted_actions import Text

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]
Json = dict[str, Any]


async def test_each_handoff_of_a_plain_debate_uses_the_decision_taken_ahead(harness: H) -> None:
    h = await harness()
    s2 = await h.start(agents=["pm", "dev", "rv"])
    await h.result(s2)
    assert h.prompted_agents(s2) == ["pm", "dev", "rv", "roundtable-observer"]
    assert h.handoffs() == (3, 0)
    # pm → dev, dev → rv, rv → the observer, and the observer's turn → the end.
    assert h.engine.metrics.ahead_decisions == 4


async def test_a_part_that_arrives_after_the_final_step_voids_the_decision_taken_ahead(
    harness: H,
) -> None:
    """dev's text part reaches the daemon only after its reply's completion event (the server
    publishes them independently): the decision taken at the completion saw no text; at the idle
    the turn has changed, so it is decided again, on dev's words."""
    h = await harness()
    h.fake.script(Text(text="DEV: ship it behind a flag."), agent="dev")
    held: list[Json] = []
    dev_messages: set[str] = set()

    def late_text(event: Json) -> list[Json]:
        props = event["properties"]
        if event["type"] == "message.updated":
            info = props["info"]
            if info.get("role") == "assistant" and info.get("agent") == "dev":
                dev_messages.add(info["id"])
                if (info.get("time") or {}).get("completed") and held:
                    out = [event, *held]
                    held.clear()
                    return out
        if event["type"] == "message.part.updated":
            part = props.get("part") or {}
            if part.get("type") == "text" and part.get("messageID") in dev_messages:
                held[:] = [event]  # only the newest copy of the part is passed on, late
                return []
        return [event]

    h.fake.event_filter = late_text
    s2 = await h.start(agents=["pm", "dev", "rv"])
    await h.result(s2)
    assert h.prompted_agents(s2) == ["pm", "dev", "rv", "roundtable-observer"]
    assert h.handoffs() == (3, 0)
    assert [e.response for e in h.entries(s2)][1] == "DEV: ship it behind a flag."
    # Every handoff but dev → rv used the decision taken ahead.
    assert h.engine.metrics.ahead_decisions == 3
