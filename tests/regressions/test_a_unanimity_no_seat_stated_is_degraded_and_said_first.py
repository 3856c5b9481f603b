"""Field failure (a new user on the demo's second debate, OpenCode 1.18.33): the seats wrote no
``Position:`` line, and the observer's verdict JSON said ``unanimous``, confidence 0.8. The
result read ``degraded: false``, ``Status: completed``, "consensus unanimous, tally unknown ·
confidence 0.8", the positions "no stated position" — and the TUI showed ``Consensus:
unanimous.`` with no warning: a unanimity nobody stated read as a healthy result, and the
observer's own number as a measured confidence.

The exact input: the demo's observer reply (its prose and verdict JSON: ``unanimous``, 0.8)
after a debate whose seats answered without a ``Position:`` line. Now a consensus that the
seats' stated positions do not back is not taken: the result is degraded, its first lines say
"no seat stated a position: the observer's 'unanimous' is its own reading", the consensus is the
seats' count (unknown) and the confidence unknown; the S1 text, the CLI's verdict line and the
state card (the TUI) say the same. Built on the pure core, from the state such a run leaves.
"""

from __future__ import annotations

import json
from typing import Any

from roundtabled.cli.verdict import render_verdict
from roundtabled.core.card import state_card
from roundtabled.core.observer_flow import observer_step
from roundtabled.core.result import HEADER_TITLE, build_result, delivery_text, result_json
from roundtabled.core.state import EndReason, HistoryEntry, Phase, RoundtableState
from roundtabled.demo import OBSERVER_SUMMARY, VERDICT
from roundtabled.offline.orchestrator import relay_text

AGENTS = ["pm", "dev", "rv"]
SAID = "no seat stated a position: the observer's 'unanimous' is its own reading"
FILLER = "I think we should weigh the options carefully; there are trade-offs on both sides."


def turn(agent: str, rnd: int, text: str) -> HistoryEntry:
    return HistoryEntry.model_validate(
        {"agent": agent, "round": rnd, "response": text, "kind": "turn", "finish": "stop"}
    )


def debated() -> RoundtableState:
    """pm, dev and rv, two rounds without a ``Position:`` line, then the demo's observer reply
    recorded as the daemon records it (:func:`observer_step`)."""
    # The demo's observer reply: its prose, then the fenced verdict JSON.
    reply = f"{OBSERVER_SUMMARY}\n\n6. **Verdict**\n```json\n{json.dumps(VERDICT, indent=1)}\n```"
    entry = HistoryEntry.model_validate(
        {"agent": "roundtable-observer", "round": 2, "response": reply, "kind": "observer"}
    )
    data: dict[str, Any] = {
        "session_id": "ses_unstatedunanimity01",
        "title": "Split the payments monolith?",
        "agents": AGENTS,
        "total_rounds": 2,
        "current_round": 2,
        "prompt": "Split the payments monolith into microservices this year?",
        "phase": Phase.DONE,
        "end_reason": EndReason.COMPLETED,
        "history": [*(turn(a, r, FILLER) for r in (1, 2) for a in AGENTS), entry],
    }
    state = RoundtableState.model_validate(data)
    step = observer_step(state, entry)
    assert step.verdict.data is not None and step.verdict.data["consensus"] == "unanimous"
    return state.model_copy(update={"verdict": step.verdict, "summary": step.summary or ""})


def test_a_unanimity_no_seat_stated_is_degraded_said_first_and_its_confidence_unknown() -> None:
    state = debated()
    result = build_result(state)
    status, verdict = result.status, result.verdict
    assert status.end_reason == "completed" and status.degraded
    assert status.notes[0].startswith(SAID), status.notes
    header = result.summary.split("\n\n", 1)[0].splitlines()
    assert header[0] == HEADER_TITLE and header[1].startswith(f"- {SAID}")
    assert verdict.confidence is None  # not the observer's 0.8 shown as measured
    assert verdict.consensus == "unknown" and verdict.observer_consensus == "unanimous"
    assert verdict.decision == VERDICT["decision"]  # the observer's, said as its reading
    assert all(p.stance is None for p in verdict.positions)
    # What S1 (and `roundtabled start`) prints: degraded in the status line, the words first.
    text = delivery_text(state)
    assert "Status: completed, 2/2 rounds, DEGRADED" in text
    assert text.index(SAID) < text.index("Executive summary")
    assert "confidence 0.8" not in text and "consensus unanimous" not in text
    # The CLI's verdict line and the TUI's state card say the same.
    cli = render_verdict(result.dump(), tty=False)
    [line] = [x for x in cli.splitlines() if x.startswith("consensus:")]
    assert SAID in line and "confidence unknown" in line
    card = state_card(state)
    assert any(x.startswith("Consensus: ") and SAID in x for x in card.splitlines()), card
    assert "Result: DEGRADED" in card
    # The orchestrator's relay of the tool's output (what the TUI shows) warns and says no
    # unanimity.
    relay = relay_text(result_json(result))
    assert SAID in relay and "Consensus: unanimous" not in relay
