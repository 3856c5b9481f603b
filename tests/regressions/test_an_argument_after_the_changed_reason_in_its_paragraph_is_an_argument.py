"""Seen on the offline demo model: ``roundtabled start --agents pm,dev,rv --rounds 5 --context
recent "Should we rewrite the frontend in Svelte?"`` — pm changed its mind in round 3 and wrote
its ``Changed:`` reason and its argument in one paragraph, then the ``Position:`` line. The
result said ``status.seats[pm].notes = ["round 3: only the closing line, no argument"]`` (the
whole ``Changed:`` line was skipped as if it were the reason only), and the change's ``why`` was
the whole paragraph, argument included. The reason is the first sentence after ``Changed:``
(docs/result.md); what follows it on the line is argument."""

from __future__ import annotations

from roundtabled.core.positions import changes, parse_changed, parse_position
from roundtabled.core.state import HistoryEntry
from roundtabled.core.verdict import seat_statuses
from roundtabled.offline.panel import SeatPrompt, seat_reply
from tests.states import finished

TOPIC = "Should we rewrite the frontend in Svelte?"
AGENTS = ("pm", "dev", "rv")
REASON = "rv's argument convinced me (six weeks with a kill criterion settles it with evidence)."


def reply(agent: str, rnd: int) -> str:
    prompt = SeatPrompt(
        agent=agent, round=rnd, total=5, agents=AGENTS, topic=TOPIC, heard_others=rnd > 1
    )
    return seat_reply(prompt)


def turn(agent: str, rnd: int) -> HistoryEntry:
    return HistoryEntry.model_validate(
        {
            "agent": agent,
            "round": rnd,
            "response": reply(agent, rnd),
            "kind": "turn",
            "finish": "stop",
        }
    )


def test_the_offline_reply_has_the_reason_and_argument_in_one_paragraph() -> None:
    text = reply("pm", 3)
    assert text.startswith(f"Changed: {REASON} The roadmap has room"), text


def test_the_turn_is_not_only_its_closing_line() -> None:
    pos = parse_position(reply("pm", 3))
    assert pos is not None and pos.label == "a time-boxed pilot"
    assert pos.only_line is False


def test_the_reason_is_only_the_first_sentence() -> None:
    assert parse_changed(reply("pm", 3)) == REASON


def test_no_degradation_note_and_the_change_s_why_is_the_reason() -> None:
    history = [turn(a, r) for r in (1, 2, 3) for a in AGENTS]
    state = finished(history, agents=list(AGENTS), total_rounds=5, current_round=3)
    pm = next(s for s in seat_statuses(state) if s.agent == "pm")
    assert pm.notes == []
    (change,) = changes(state.history, "pm")
    assert (change.round, change.from_label, change.to_label, change.why) == (
        3,
        "wait for more data",
        "a time-boxed pilot",
        REASON,
    )


def test_a_changed_line_of_only_its_reason_is_still_no_argument() -> None:
    pos = parse_position("Changed: rv's audit point.\n\nPosition: keep it — audits (6/10)")
    assert pos is not None and pos.only_line is True
