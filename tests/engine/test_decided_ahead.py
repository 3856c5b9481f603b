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


async def test_a_part_that_arrives_after_the_decision_taken_ahead_voids_it(harness: H) -> None:
    """dev's text part reaches the daemon only after the decision was taken at its reply's
    completion event (the server publishes them independently), before the idle: that decision
    saw no text; at the idle the turn has changed, so it is decided again, on dev's words."""
    h = await harness()
    h.fake.script(Text(text="DEV: ship it behind a flag."), agent="dev")
    dev_messages: set[str] = set()
    part: list[Json] = []  # dev's text part, held back (its newest copy)
    after: list[Json] = []  # what followed dev's completion, held back with it
    flow = {"held": False, "passing": False}

    def hold(event: Json) -> list[Json]:
        props = event["properties"]
        if flow["passing"]:
            return [event]
        if flow["held"]:
            after.append(event)
            return []
        if event["type"] == "message.updated":
            info = props["info"]
            if info.get("role") == "assistant" and info.get("agent") == "dev":
                dev_messages.add(info["id"])
                flow["held"] = bool((info.get("time") or {}).get("completed"))
        if event["type"] == "message.part.updated":
            p = props.get("part") or {}
            if p.get("type") == "text" and p.get("messageID") in dev_messages:
                part[:] = [event]
                return []
        return [event]

    handoff = h.engine.worker.handoff
    decide_now = handoff._decide_ahead_now

    def then_release(table: Any, mirror: Any) -> None:
        decide_now(table, mirror)
        if flow["held"] and not flow["passing"]:
            assert table.ahead is not None  # taken without dev's text
            flow["passing"] = True
            for e in [*part, *after]:
                h.fake.emit(e["type"], e["properties"])

    handoff._decide_ahead_now = then_release  # type: ignore[method-assign]
    h.fake.event_filter = hold
    s2 = await h.start(agents=["pm", "dev", "rv"])
    await h.result(s2)
    assert flow["passing"]
    assert h.prompted_agents(s2) == ["pm", "dev", "rv", "roundtable-observer"]
    assert h.handoffs() == (3, 0)
    assert [e.response for e in h.entries(s2)][1] == "DEV: ship it behind a flag."
    # Every handoff but dev → rv used the decision taken ahead.
    assert h.engine.metrics.ahead_decisions == 3
