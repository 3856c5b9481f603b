"""Stances on the real server with the scripted LLM: seats that agree in different words share
one stance, see the stances on the table from round 2 and converge (docs/deliberation.md,
"Stances")."""

from __future__ import annotations

from roundtabled.core.prompts import CLOSING_LINE
from roundtabled.core.state import OBSERVER_AGENT, EndReason
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import default_text

from .conftest import RT

AGENTS = ["pm", "dev", "rv"]

# The same stance in each seat's own words, and different words again in round 2.
WORDS = {
    "pm": ["modular monolith", "**Modular monolith.**"],
    "dev": ["Modular monolith first", "go with a modular monolith"],
    "rv": ["a modular monolith, for now", "The modular monolith for the time being"],
}


def said(agent: str, rnd: int, label: str) -> Text:
    return Text(
        text=default_text(agent, label, rnd) + f"\nPosition: {label} — {agent}'s reasons "
        "(confidence 7/10)"
    )


async def test_seats_agreeing_in_different_words_converge_on_one_stance(rt: RT) -> None:
    for agent, labels in WORDS.items():
        rt.llm.script(*(said(agent, i + 1, lbl) for i, lbl in enumerate(labels)), agent=agent)
    s2 = await rt.start(
        agents=AGENTS, prompt="Split the payments monolith?", rounds=4, until="converged"
    )
    result = await rt.result(s2)
    await rt.finalized(s2)
    state = await rt.daemon.engine.load_state(s2)
    seat_requests = [
        r for r in rt.llm.requests_for(session=s2, kind="turn") if r.agent != OBSERVER_AGENT
    ]
    assert [r.agent for r in seat_requests] == AGENTS * 2  # rounds 3 and 4 never ran
    assert state.end_reason == EndReason.CONVERGED
    assert any(n.startswith("converged after round 2 of 4 (unchanged)") for n in state.notes)

    # Round 2's prompts list the stances on the table, the closing request last.
    round1, round2 = seat_requests[:3], seat_requests[3:]
    assert all("Stances on the table" not in r.last_user_text for r in round1)
    for r in round2:
        text = r.last_user_text
        block = text[text.index("Stances on the table") :].splitlines()
        # One stance held by all three, named by one of their labels (the latest ones).
        assert block[1].endswith("”: pm, dev, rv") and block[1].casefold().startswith(
            "- “modular monolith"
        )
        assert text.endswith(CLOSING_LINE)

    verdict = result["result"]["verdict"]
    assert [p["label"] for p in verdict["positions"]] == [w[1].strip("*.") for w in WORDS.values()]
    [stance] = {p["stance"] for p in verdict["positions"]}
    assert stance.casefold() == "modular monolith"
    assert verdict["tallyConsensus"] == "unanimous"
    assert [t["seats"] for t in verdict["tally"]] == [AGENTS]
    assert result["result"]["status"]["endReason"] == "converged"
