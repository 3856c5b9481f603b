"""The observer's one repair turn across restarts (docs/result.md, "The observer's verdict"):
asked exactly once, never again by a restarted daemon, whether it was killed while the repair
ran or right after the first reply."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from roundtabled.offline.scripted_actions import Text

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]
OBSERVER = "roundtable-observer"
BROKEN = 'Prose.\n```json\n{"decision": "ship", "consensus": "mostly"}\n```'
FIXED = json.dumps({"decision": "ship", "consensus": "majority", "confidence": 0.6})


def seat_replies(h: Harness) -> None:
    h.fake.script(Text(text="PM.\nPosition: ship — now (confidence 7/10)"), agent="pm")
    h.fake.script(Text(text="DEV.\nPosition: wait — later (confidence 6/10)"), agent="dev")


async def test_a_broken_verdict_gets_one_repair_and_the_repaired_verdict_counts(harness: H) -> None:
    h = await harness()
    seat_replies(h)
    h.fake.script(Text(text=BROKEN), Text(text=FIXED), agent=OBSERVER)
    s2 = await h.start()
    c = (await h.result(s2))["result"]
    assert h.prompted_agents(s2) == ["pm", "dev", OBSERVER, OBSERVER]
    repair = h.prompts(s2)[-1]
    text = " ".join(p.get("text", "") for p in repair["parts"] if not p.get("ignored"))
    assert text.startswith("Your verdict JSON was invalid: consensus")
    assert c["status"]["observer"] == "repaired"
    assert c["verdict"]["consensus"] == "majority" and c["summary"].endswith("Prose.")


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")  # kill -9
async def test_killed_while_the_repair_runs_the_repair_is_not_asked_again(harness: H) -> None:
    h = await harness()
    seat_replies(h)
    h.fake.script(Text(text=BROKEN), Text(text=FIXED, first_byte_delay=30), agent=OBSERVER)
    s2 = await h.start()
    await h.until(lambda: h.prompted_agents(s2).count(OBSERVER) == 2, within=120, step=0.01)
    await h.restart(graceful=False)
    c = (await h.result(s2))["result"]
    assert h.prompted_agents(s2) == ["pm", "dev", OBSERVER, OBSERVER]
    assert c["status"]["observer"] == "repaired"


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")  # kill -9
async def test_killed_after_a_failed_repair_falls_back_once(harness: H) -> None:
    h = await harness()
    seat_replies(h)
    h.fake.script(
        Text(text=BROKEN), Text(text="{still broken", first_byte_delay=30), agent=OBSERVER
    )
    s2 = await h.start()
    await h.until(lambda: h.prompted_agents(s2).count(OBSERVER) == 2, within=120, step=0.01)
    await h.restart(graceful=False)
    c = (await h.result(s2))["result"]
    assert h.prompted_agents(s2) == ["pm", "dev", OBSERVER, OBSERVER]
    assert c["status"]["observer"] == "fallback" and c["verdict"]["source"] == "ledger"
    assert c["verdict"]["tallyConsensus"] == "none"


def observer_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The visible text of each of the observer's answers in S2, as stored."""
    return [
        "".join(p.get("text", "") for p in m["parts"] if p.get("type") == "text")
        for m in messages
        if m["info"]["role"] == "assistant" and m["info"].get("agent") == OBSERVER
    ]


async def test_after_a_repair_s2_shows_the_repaired_verdict_in_words_not_the_json(
    harness: H,
) -> None:
    """Both the first reply's broken block and the repair reply (bare JSON) give way to the
    verdict as recorded; the repaired verdict stays in the result (docs/result.md)."""
    h = await harness()
    seat_replies(h)
    h.fake.script(Text(text=BROKEN), Text(text=FIXED), agent=OBSERVER)
    s2 = await h.start()
    c = (await h.result(s2))["result"]
    await h.finalized(s2)
    line = (
        "Verdict recorded by roundtabled — decision: ship; consensus: majority; confidence: 6/10."
    )
    assert observer_texts(await h.messages(s2)) == [f"Prose.\n\n{line}", line]
    assert (c["verdict"]["decision"], c["verdict"]["consensus"]) == ("ship", "majority")


async def test_after_a_failed_repair_s2_says_the_verdict_came_from_the_positions(
    harness: H,
) -> None:
    h = await harness()
    seat_replies(h)
    h.fake.script(Text(text=BROKEN), Text(text="{still broken"), agent=OBSERVER)
    s2 = await h.start()
    c = (await h.result(s2))["result"]
    await h.finalized(s2)
    first, repair = observer_texts(await h.messages(s2))
    assert first == (
        "Prose.\n\nVerdict block not used: roundtabled built the verdict from the seats' "
        "stated positions (the result says why)."
    )
    assert repair == "{still broken"  # no verdict block: left as it is
    assert c["verdict"]["source"] == "ledger"
