"""Field failure (a real debate on Qwen2.5-Coder 0.5B through llama.cpp, seats ``seat-a``,
``seat-b``, ``seat-c``): each seat closed with its speaker's name as the label, the final line led
by "Therefore,"::

    **Position: Agent B — Will we split payments out into a separate microservice now?**
    ...
    Therefore, **Position: Agent B — Will we split payments out into a separate microservice
    now?** — **9/10**          (one line in the reply: ``reply()`` below)

The result read "consensus majority · decision: Agent B", seat-a "changed its position (from
“Agent A” to “Agent B”)", and no confidence: the "Therefore," line was not read (only the bold
line before it, without the score). Now a role-and-letter label ("Agent B", "Seat 2") names the
speaker, not a stance, and a closing line after a concluding word is read with its score."""

from __future__ import annotations

from typing import Any

from roundtabled.core.positions import parse_position
from roundtabled.core.result import build_result
from roundtabled.core.stances import no_stance_reason
from roundtabled.core.state import EndReason, HistoryEntry, Phase, RoundtableState, VerdictRecord

SEATS = ["seat-a", "seat-b", "seat-c"]
QUESTION = "Will we split payments out into a separate microservice now?"


def reply(letter: str) -> str:
    return (
        f"**Position: Agent {letter} — {QUESTION}**\n\nGiven the financial impact …\n\n"
        f"Therefore, **Position: Agent {letter} — {QUESTION}** — **9/10**"
    )


def test_the_concluding_line_is_read_with_its_score() -> None:
    pos = parse_position(reply("B"))
    assert pos is not None and (pos.label, pos.confidence) == ("Agent B", 0.9)


def test_agent_b_names_a_speaker_not_a_stance() -> None:
    for label in ("Agent B", "**Agent A**", "Seat 2"):
        assert no_stance_reason(label, seats=SEATS) == "a speaker's name", label
    for label in ("Option B", "Plan A", "agent-based design"):
        assert no_stance_reason(label, seats=SEATS) is None, label


def test_the_debate_has_no_decision_and_no_change_of_position() -> None:
    history = [
        HistoryEntry.model_validate(
            {"agent": a, "round": r, "response": reply(x), "kind": "turn", "finish": "stop"}
        )
        for r, a, x in [
            (1, "seat-a", "A"),
            (1, "seat-b", "B"),
            (1, "seat-c", "C"),
            (2, "seat-a", "B"),
        ]
    ]
    data: dict[str, Any] = {
        "session_id": "ses_speakernamelabel0001",
        "title": "Split payments?",
        "agents": SEATS,
        "total_rounds": 3,
        "current_round": 2,
        "prompt": "Should we split payments out into a separate microservice now?",
        "phase": Phase.DONE,
        "end_reason": EndReason.REPETITION,
        "history": history,
        "summary": "",
        "verdict": VerdictRecord(error="no fenced block", fallback=True, repair_asked=True),
    }
    result = build_result(RoundtableState.model_validate(data))
    assert result.verdict.decision is None, result.verdict
    assert all(p.stance is None and p.changes == [] for p in result.verdict.positions)
    assert not any("changed its position" in n for n in result.status.notes), result.status.notes
