"""Regression: one extra round turned a unanimous decision into "none".

Field failure (a real local model): a 3-seat debate ended with every seat on one position;
after ``extend`` by one round, pm's extra answer had no ``Position:`` line and the verdict read
``pm (no position stated) … changed? yes, round 2`` with no decision left, for that reason
alone.

Proves, on the real ``opencode serve`` with the scripted model: after the extension pm keeps its
position from round 2 (``carried``, with that round), the tally is still unanimous and the
ledger's decision is kept; a note says pm stated no position in the extension.
"""

from __future__ import annotations

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from tests.e2e.conftest import RT

AGENTS = ["pm", "dev", "rv"]


def said(agent: str, rnd: int, label: str) -> Text:
    return Text(text=f"{agent} argues round {rnd}.\nPosition: {label} — reasons (confidence 8/10)")


async def test_an_extra_round_without_a_position_keeps_the_decision(rt: RT) -> None:
    """Exact failing input: pm, dev, rv × 2 rounds, all "keep the monolith"; the observer writes
    prose without verdict JSON (the ledger decides); extend by 1 round in which pm writes no
    Position line."""
    rt.llm.script(
        said("pm", 1, "keep the monolith"),
        said("pm", 2, "keep the monolith"),
        Text(text="I have nothing to add beyond what I said."),
        agent="pm",
    )
    for agent in ("dev", "rv"):
        rt.llm.script(*(said(agent, r, "keep the monolith") for r in (1, 2, 3)), agent=agent)
    rt.llm.script(Text(text="SUMMARY one."), Text(text="SUMMARY two."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=AGENTS, prompt="Split the monolith?", rounds=2)
    first = (await rt.result(s2))["result"]["verdict"]
    assert first["tallyConsensus"] == "unanimous" and first["decision"] == "keep the monolith"
    await rt.finalized(s2)
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {"sessionID": s2, "directory": rt.directory, "prompt": "Debate more", "rounds": 1},
    )
    assert status == 200, data
    result = (await rt.result(s2))["result"]
    await rt.finalized(s2)
    verdict = result["verdict"]
    assert verdict["tallyConsensus"] == "unanimous"
    assert verdict["decision"] == "keep the monolith"
    pm = next(p for p in verdict["positions"] if p["agent"] == "pm")
    assert (pm["label"], pm["round"], pm.get("carried")) == ("keep the monolith", 2, True)
    assert pm["changes"] == []
    assert any(
        n.startswith("pm stated no position in the extension (from round 3)")
        for n in result["status"]["notes"]
    )
