"""What deliberation changed, from a roundtable's state to the words a person reads
(roundtabled/core/verdict.py ``deliberation_of`` / ``deliberation_line``; docs/result.md,
"deliberation").

Proves: the opening positions are round 1's (the independent opening round's too), a seat's
later rounds never enter the opening tally; a seat that moved is named with its round and reason;
a seat without a Position line at the opening is said as unknown; a side-bound seat is in neither
tally; one round says "none (one round)"; the line reaches the CLI's verdict block, the text S1
receives, the state card and the markdown export, and the result JSON carries the field.
"""

from __future__ import annotations

from typing import Any

from roundtabled.cli.verdict import render_verdict
from roundtabled.core.card import MAX_CARD_LINES, MAX_LINE_CHARS, state_card
from roundtabled.core.result import build_result, delivery_text
from roundtabled.core.state import (
    EndReason,
    HistoryEntry,
    Options,
    Phase,
    RoundtableState,
)
from roundtabled.core.verdict import deliberation_line
from roundtabled.service import export

AGENTS = ["pm", "dev", "qa"]


def turn(agent: str, rnd: int, label: str | None, conf: int = 7, why: str = "") -> HistoryEntry:
    text = (f"Changed: {why}\n" if why else "") + "Argument."
    if label is not None:
        text += f"\nPosition: {label} — because (confidence {conf}/10)"
    return HistoryEntry.model_validate(
        {"agent": agent, "round": rnd, "response": text, "kind": "turn", "finish": "stop"}
    )


def state(rounds: list[dict[str, str | None]], **kw: Any) -> RoundtableState:
    """A finished debate: ``rounds[r][agent]`` is the label ``agent`` stated in round r + 1."""
    history = [
        turn(a, r + 1, labels[a], why="dev's estimate" if r == 1 and a == "dev" else "")
        for r, labels in enumerate(rounds)
        for a in AGENTS
        if a in labels
    ]
    data: dict[str, Any] = {
        "session_id": "ses_changed",
        "title": "Split?",
        "agents": AGENTS,
        "total_rounds": len(rounds),
        "prompt": "Split the monolith into services?",
        "phase": Phase.DONE,
        "end_reason": EndReason.COMPLETED,
        "history": history,
        "summary": "",
        **kw,
    }
    return RoundtableState.model_validate(data)


FLIP = [
    {"pm": "split now", "dev": "split now", "qa": "modular monolith"},
    {"pm": "split now", "dev": "modular monolith", "qa": "modular monolith"},
]
KEEP = [
    {"pm": "modular monolith", "dev": "split now", "qa": "modular monolith"},
    {"pm": "modular monolith", "dev": "Modular monolith first", "qa": "modular monolith"},
]


def test_a_flip_is_said_first_and_the_mover_named_with_round_and_reason() -> None:
    result = build_result(state(FLIP))
    d = result.verdict.deliberation
    assert d.majority_changed is True
    assert [t.model_dump() for t in d.opening_tally] == [
        {"label": "split now", "seats": ["pm", "dev"], "weight": 1.4, "labels": ["split now"]},
        {
            "label": "modular monolith",
            "seats": ["qa"],
            "weight": 0.7,
            "labels": ["modular monolith"],
        },
    ]
    assert [t.label for t in d.final_tally] == [t.label for t in result.verdict.tally]
    assert [m.dump() for m in d.moved] == [
        {
            "agent": "dev",
            "from": "split now",
            "to": "modular monolith",
            "round": 2,
            "why": "dev's estimate",
        }
    ]
    assert deliberation_line(result.verdict.dump()) == (
        "Deliberation: the majority changed — opening “split now” (2 of 3, weighted 0.67) → final "
        "“modular monolith” (2 of 3, weighted 0.67); dev moved from “split now” in round 2."
    )


def test_an_unchanged_majority_is_said_last_and_a_rephrasing_is_no_move() -> None:
    d = build_result(state(KEEP)).verdict.deliberation
    assert d.majority_changed is False
    assert [(m.agent, m.from_, m.to) for m in d.moved] == [("dev", "split now", "modular monolith")]
    line = deliberation_line(build_result(state(KEEP)).verdict.dump())
    assert line is not None and line.startswith("Deliberation: opening majority “modular")
    assert line.endswith("; the majority did not change.")
    assert "(3 of 3, weighted 1.00)" in line


def test_the_opening_is_round_one_only_and_an_unstated_opening_stays_unknown() -> None:
    rounds = [
        {"pm": "ship", "dev": None, "qa": "wait"},
        {"pm": "ship", "dev": "ship", "qa": "ship"},
        {"pm": "ship", "dev": "ship", "qa": "ship"},
    ]
    d = build_result(state(rounds)).verdict.deliberation
    assert d.unstated_at_opening == ["dev"]
    assert d.opening_majority.kind == "unknown" and d.majority_changed is None
    assert [t.seats for t in d.opening_tally] == [["pm"], ["qa"]]
    assert [m.agent for m in d.moved] == ["qa"]  # dev had no opening stance: it did not move
    line = deliberation_line(build_result(state(rounds)).verdict.dump())
    assert line == (
        "Deliberation: whether the majority changed is unknown — opening unknown (1 of 3 seats "
        "stated no position) → final “ship” (3 of 3, weighted 1.00); qa moved from “wait” in "
        "round 2; dev stated no position at the opening (unknown)."
    )


def test_the_independent_opening_round_is_the_opening() -> None:
    st = state(FLIP, options=Options(opening="independent"))
    d = build_result(st).verdict.deliberation
    assert d.opening == "independent" and d.majority_changed is True


def test_a_sided_seat_is_in_neither_tally() -> None:
    st = state(FLIP, options=Options(sides={"pm": "for"}))
    d = build_result(st).verdict.deliberation
    for t in [*d.opening_tally, *d.final_tally]:
        assert "pm" not in t.seats
    assert d.opening_majority.counted == 2
    # dev and qa: 1 – 1 at the opening (a tie), 2 of 2 at the end.
    assert d.opening_majority.kind == "tied" and d.final_majority.stance == "modular monolith"
    assert d.majority_changed is True


def test_one_round_says_no_deliberation() -> None:
    st = state(FLIP[:1])
    assert deliberation_line(build_result(st).verdict.dump()) == "Deliberation: none (one round)"


def test_the_line_reaches_the_cli_s1_text_the_card_and_the_markdown_export() -> None:
    st = state(FLIP)
    result = build_result(st)
    line = deliberation_line(result.verdict.dump())
    assert line is not None
    block = render_verdict(result.dump(), tty=False).splitlines()
    decision = next(i for i, text in enumerate(block) if text.startswith("decision: "))
    assert block[decision + 1] == line
    assert line in delivery_text(st).splitlines()
    data = export.to_data(st)
    assert data["verdict"]["deliberation"]["majorityChanged"] is True
    md = export.to_markdown(data)
    assert "**Deliberation:** the majority changed — opening “split now”" in md
    card = state_card(st).splitlines()
    # The card's lines are short: the weighted shares are left out there.
    assert deliberation_line(result.verdict.dump(), weights=False) in card
    assert len(card) <= MAX_CARD_LINES


def test_the_card_counts_movers_when_naming_them_would_be_cut() -> None:
    agents = [f"seat-{c}" for c in "abcdefg"]
    open_, final = "split the billing service now", "keep one modular monolith for now"
    history = [
        HistoryEntry.model_validate(
            {
                "agent": a,
                "round": r,
                "response": f"Argument.\nPosition: {open_ if r == 1 else final} — because",
                "kind": "turn",
                "finish": "stop",
            }
        )
        for r in (1, 2)
        for a in agents
    ]
    st = state([], agents=agents, history=history, total_rounds=2)
    full = deliberation_line(build_result(st).verdict.dump())
    assert full is not None and len(full) > MAX_LINE_CHARS
    card = state_card(st).splitlines()
    said = [line for line in card if line.startswith("Deliberation:")]
    assert said == [
        "Deliberation: the majority changed — opening “split the billing service now” (7 of 7) → "
        "final “keep one modular monolith for now” (7 of 7); 7 seats moved."
    ]


def test_a_seat_moving_away_from_the_majority_is_said_with_where_it_went() -> None:
    rounds = [
        {"pm": "ship", "dev": "ship", "qa": "ship"},
        {"pm": "ship", "dev": "wait a quarter", "qa": "ship"},
    ]
    line = deliberation_line(build_result(state(rounds)).verdict.dump())
    assert line == (
        "Deliberation: opening majority “ship” (3 of 3, weighted 1.00) → final “ship” (2 of 3, "
        "weighted 0.67); dev moved from “ship” to “wait a quarter” in round 2; the majority did "
        "not change."
    )


def test_a_tie_is_named_with_its_stances() -> None:
    st = state(
        [{"pm": "ship", "dev": "wait"}, {"pm": "ship", "dev": "ship"}],
        agents=["pm", "dev"],
    )
    line = deliberation_line(build_result(st).verdict.dump())
    assert line == (
        "Deliberation: the tie was broken — opening a tie between “ship” and “wait” (1 of 2 "
        "each) → final majority “ship” (2 of 2, weighted 1.00); dev moved from “wait” in round 2."
    )


def test_a_majority_that_formed_or_was_lost_is_said_so_not_as_a_changed_majority() -> None:
    tie = state(
        [{"pm": "ship", "dev": "wait"}, {"pm": "ship", "dev": "ship"}], agents=["pm", "dev"]
    )
    v = build_result(tie).verdict.dump()
    # No majority and no tie (e.g. 2, 1 and 1 of 4 seats): the contract's ``none``.
    v["deliberation"]["openingMajority"]["kind"] = "none"
    formed = deliberation_line(v)
    assert formed is not None
    assert formed.startswith("Deliberation: a majority formed — opening no majority (largest 1"), (
        formed
    )
    lost = deliberation_line(
        build_result(
            state(
                [
                    {"pm": "ship", "dev": "ship", "qa": "wait"},
                    {"pm": "ship", "dev": "hire first", "qa": "wait"},
                ]
            )
        ).verdict.dump()
    )
    assert lost is not None
    assert lost.startswith("Deliberation: the majority was lost — opening majority “ship”"), lost
    neither = deliberation_line(
        build_result(
            state(
                [
                    {"pm": "ship", "dev": "hire first", "qa": "wait"},
                    {"pm": "wait", "dev": "hire first", "qa": "ship"},
                ]
            )
        ).verdict.dump()
    )
    assert neither is not None and neither.endswith("; no majority at either end."), neither
