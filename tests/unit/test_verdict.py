"""The result contract built from a state (roundtabled/verdict.py, result.py, observer_verdict.py).

Covers: classification of each turn, the position ledger and its changes, the tally and its
consensus, the observer's verdict (validation, repair text, fallback), the honesty header and its
absence for a healthy debate, the digest of a failed observer and the size cap.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core.observer_verdict import (
    VERDICT_EXAMPLE,
    parse_reply,
    repair_prompt,
    verdict_schema,
)
from roundtabled.core.positions import parse_changed, unexplained_change
from roundtabled.core.result import (
    HEADER_TITLE,
    RESULT_MAX_BYTES,
    build_result,
    delivery_text,
    digest,
    result_json,
)
from roundtabled.core.state import (
    EndReason,
    HistoryEntry,
    Options,
    Phase,
    RoundtableState,
    Usage,
    VerdictRecord,
)
from roundtabled.core.verdict import (
    classify,
    ledger_verdict,
    positions,
    rounds_completed,
    tally,
    tally_consensus,
)

AGENTS = ["pm", "dev", "rv"]


def turn(agent: str, rnd: int, text: str, **kw: Any) -> HistoryEntry:
    return HistoryEntry.model_validate(
        {"agent": agent, "round": rnd, "response": text, "kind": "turn", "finish": "stop", **kw}
    )


def observer(text: str, **kw: Any) -> HistoryEntry:
    return HistoryEntry.model_validate(
        {"agent": "roundtable-observer", "round": 2, "response": text, "kind": "observer", **kw}
    )


SUMMARY = "1. Executive summary: the panel keeps the monolith."
"""The observer's summary of a hand-built state (its observer turn is added with it)."""


def state(history: list[HistoryEntry], **kw: Any) -> RoundtableState:
    data: dict[str, Any] = {
        "session_id": "ses_verdict",
        "title": "Split?",
        "agents": AGENTS,
        "total_rounds": 2,
        "prompt": "Split the monolith?",
        "phase": Phase.DONE,
        "end_reason": EndReason.COMPLETED,
        "history": history,
        "summary": SUMMARY,
    }
    data.update(kw)
    if data["summary"] and not any(e.kind == "observer" for e in data["history"]):
        data["history"] = [*data["history"], observer(str(data["summary"]))]
    return RoundtableState.model_validate(data)


def pos(label: str, conf: int) -> str:
    return f"Argument.\nPosition: {label} — because reasons (confidence {conf}/10)"


def one_round(pm: str, dev: str, rv: str, **kw: Any) -> RoundtableState:
    """A one-round debate in which pm, dev and rv replied ``pm``, ``dev`` and ``rv``, with no
    observer summary unless ``kw`` gives one; ``kw`` as :func:`state` takes it."""
    history = [turn("pm", 1, pm), turn("dev", 1, dev), turn("rv", 1, rv)]
    return state(history, **{"total_rounds": 1, "summary": "", **kw})


def healthy() -> list[HistoryEntry]:
    return [
        turn("pm", 1, pos("Modular monolith", 7)),
        turn("dev", 1, pos("split now", 6)),
        turn("rv", 1, pos("modular monolith", 8)),
        turn("pm", 2, pos("modular monolith", 8)),
        turn("dev", 2, "Changed: pm's cost numbers\n" + pos("Modular  Monolith", 6)),
        turn("rv", 2, pos("modular monolith.", 9)),
    ]


VALID = {
    "decision": "keep the monolith",
    "confidence": 0.8,
    "consensus": "unanimous",
    "agreements": ["one deploy unit"],
    "disagreements": [],
    "openQuestions": ["billing?"],
    "nextSteps": ["measure"],
}


# ── classification and seat status ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        (turn("pm", 1, "fine"), "answered"),
        (turn("pm", 1, "", has_error=True, error="APIError: boom"), "failed"),
        (turn("pm", 1, "  \n"), "empty"),
        (turn("pm", 1, "half a sent", finish="length"), "truncated"),
        (
            turn("pm", 1, "part", has_error=True, cut_off=True, error="timed out after 2 s"),
            "timedOut",
        ),
        (
            turn("pm", 1, "", has_error=True, cut_off=True, error="cut off by the cancel"),
            "cancelled",
        ),
    ],
)
def test_classify(entry: HistoryEntry, kind: str) -> None:
    assert classify(entry) == kind


def test_healthy_debate_positions_tally_and_no_header() -> None:
    result = build_result(state(healthy(), verdict=VerdictRecord(data=VALID)))
    assert not result.status.degraded
    assert result.status.notes == []
    assert result.summary == SUMMARY
    assert HEADER_TITLE not in result.summary
    assert result.status.rounds_completed == 2 and result.status.rounds_planned == 2
    assert [(s.agent, s.turns, s.answered) for s in result.status.seats] == [
        ("pm", 2, 2),
        ("dev", 2, 2),
        ("rv", 2, 2),
    ]
    v = result.verdict
    assert [(p.agent, p.label, p.confidence) for p in v.positions] == [
        ("pm", "modular monolith", 0.8),
        ("dev", "Modular  Monolith", 0.6),
        ("rv", "modular monolith", 0.9),  # a trailing period is punctuation, not the label
    ]
    assert {p.stance for p in v.positions} == {"modular monolith"}
    assert len(v.tally) == 1
    assert v.tally[0].seats == ["pm", "dev", "rv"] and v.tally[0].weight == pytest.approx(2.3)
    assert v.consensus == "unanimous" and v.tally_consensus == "unanimous"
    assert v.decision == "keep the monolith" and v.confidence == 0.8 and v.source == "observer"
    dev = v.positions[1]
    assert [(c.round, c.from_, c.to, c.why) for c in dev.changes] == [
        (2, "split now", "Modular  Monolith", "pm's cost numbers")
    ]
    assert result.status.observer == "ok"


def test_contract_field_names() -> None:
    data = build_result(state(healthy(), verdict=VerdictRecord(data=VALID))).dump()
    assert list(data) == [
        "version",
        "sessionID",
        "title",
        "status",
        "verdict",
        "summary",
        "usage",
        "transcript",
    ]
    assert set(data["status"]) >= {
        "endReason",
        "degraded",
        "roundsCompleted",
        "roundsPlanned",
        "seats",
        "notes",
    }
    assert set(data["status"]["seats"][0]) >= {
        "agent",
        "turns",
        "answered",
        "failed",
        "empty",
        "truncated",
        "timedOut",
        "notes",
    }
    assert set(data["verdict"]) >= {
        "decision",
        "confidence",
        "consensus",
        "positions",
        "tally",
        "agreements",
        "disagreements",
        "openQuestions",
        "nextSteps",
    }
    assert set(data["verdict"]["positions"][1]["changes"][0]) == {"round", "from", "to", "why"}
    assert set(data["usage"]) == {"input", "output", "cost", "unreportedTurns", "perAgent"}
    assert "export ses_verdict" in data["transcript"]


def test_no_closing_line_means_null_positions_said_not_guessed() -> None:
    history = [turn(a, r, f"{a} argues at length, round {r}.") for r in (1, 2) for a in AGENTS]
    result = build_result(state(history, verdict=VerdictRecord(data=VALID)))
    assert [p.label for p in result.verdict.positions] == [None, None, None]
    assert result.verdict.tally == [] and result.verdict.tally_consensus == "unknown"
    assert any(
        "pm stated no Position line" in n and "not guessed" in n for n in result.status.notes
    )
    assert all(s.no_position == 2 for s in result.status.seats)
    # A missing closing line is said, not a failure; but the observer's "unanimous" is then its
    # own reading, which no stated position backs: degraded, said first, confidence unknown.
    assert result.status.degraded and result.verdict.decision == VALID["decision"]
    assert result.status.notes[0].startswith(
        "no seat stated a position: the observer's 'unanimous' is its own reading"
    )
    assert result.verdict.confidence is None and result.verdict.consensus == "unknown"
    assert result.verdict.observer_consensus == "unanimous"
    # Without a consensus claim the observer's decision stands as it is: said, not degraded.
    unclaimed = {**VALID, "consensus": "split"}
    result = build_result(state(history, verdict=VerdictRecord(data=unclaimed)))
    assert not result.status.degraded and result.verdict.confidence == 0.8
    # Without the observer's decision nothing was decided at all: that is a degradation.
    undecided = build_result(state(history, verdict=VerdictRecord(error="none", fallback=True)))
    assert undecided.status.degraded and undecided.verdict.decision is None
    assert (
        "no seat stated a position in its last answer and the observer gave no usable verdict: "
        "there is no decision"
    ) in undecided.status.notes


def test_seat_failing_every_turn_is_degraded_header_first_and_never_agrees() -> None:
    history = [
        turn("pm", 1, pos("keep", 7)),
        turn("dev", 1, "", has_error=True, error="APIError: provider down", finish=None),
        turn("rv", 1, pos("keep", 8)),
        turn("pm", 2, pos("keep", 7)),
        turn("dev", 2, "", has_error=True, error="APIError: provider down", finish=None),
        turn("rv", 2, pos("keep", 8)),
    ]
    result = build_result(state(history, verdict=VerdictRecord(data=VALID)))
    s = result.status
    assert s.degraded
    dev = s.seats[1]
    assert (dev.turns, dev.answered, dev.failed) == (2, 0, 2)
    assert dev.notes == [
        "round 1: failed (APIError: provider down)",
        "round 2: failed (APIError: provider down)",
    ]
    assert "dev gave no usable answer in any round" in s.notes
    assert "dev failed in rounds 1, 2 (APIError: provider down)" in s.notes
    lines = result.summary.splitlines()
    assert lines[0] == HEADER_TITLE
    assert "- dev gave no usable answer in any round" in lines
    assert result.summary.index("dev gave no usable") < result.summary.index("Executive summary")
    # dev never counts toward agreement: unanimous lowered, confidence capped at 2/3.
    assert result.verdict.consensus == "majority"
    assert result.verdict.tally_consensus == "majority"
    assert result.verdict.positions[1].label is None
    assert result.verdict.confidence == pytest.approx(0.667, abs=1e-3)
    assert any("confidence capped" in n for n in s.notes)
    assert any("called the panel unanimous" in n for n in s.notes)


@pytest.mark.parametrize(
    ("entry", "seat_field", "note"),
    [
        (turn("dev", 1, ""), "empty", "dev gave an empty answer in round 1"),
        (
            turn("dev", 1, "Half of an answ", finish="length"),
            "truncated",
            "dev's answer was cut at the output limit (truncated) in round 1",
        ),
        (
            turn("dev", 1, "", has_error=True, cut_off=True, error="timed out after 2 s"),
            "timed_out",
            "dev timed out and was skipped in round 1",
        ),
        (
            turn("dev", 1, "p", has_error=True, cut_off=True, error="cut off by the cancel"),
            "cancelled",
            "dev was cut off by the cancel in round 1",
        ),
    ],
)
def test_each_degraded_turn_kind_is_counted_and_said(
    entry: HistoryEntry, seat_field: str, note: str
) -> None:
    history = [turn("pm", 1, pos("keep", 7)), entry, turn("rv", 1, pos("keep", 7))]
    result = build_result(state(history, total_rounds=1))
    assert getattr(result.status.seats[1], seat_field) == 1
    assert note in result.status.notes
    assert result.status.degraded
    assert result.summary.startswith(HEADER_TITLE + "\n")
    assert f"- {note}" in result.summary


def test_repetition_mid_debate_versus_after_the_last_round() -> None:
    mid = [turn("pm", 1, pos("a", 5)), turn("dev", 1, pos("b", 5)), turn("rv", 1, pos("a", 5))]
    mid.append(turn("pm", 2, pos("a", 5)))
    r = build_result(state(mid, total_rounds=3, end_reason=EndReason.REPETITION))
    assert (
        "the debate stopped in round 2 of 3 (after pm's turn): the agents started repeating "
        "themselves (repetition detected)" in r.status.notes
    )
    assert r.status.rounds_completed == 1 and r.status.degraded
    after = build_result(state(healthy(), end_reason=EndReason.REPETITION))
    words = " ".join(after.status.notes)
    assert "a loop (repetition detected) in the last round (2 of 2): all rounds ran" in words
    assert "stopped" not in words and "before all" not in words
    assert after.status.rounds_completed == 2


def test_cancel_and_skipped_turns() -> None:
    history = [turn("pm", 1, pos("a", 5))]
    st_ = state(
        history,
        total_rounds=2,
        end_reason=EndReason.CANCELLED,
        errors=["cancelled: the user pressed stop"],
        summary=None,
    )
    r = build_result(st_)
    assert (
        "the roundtable was cancelled in round 1 of 2 (after pm's turn) (the user pressed stop)"
        in (r.status.notes)
    )
    assert "dev never finished a turn (the debate stopped first)" in r.status.notes
    assert [s.skipped for s in r.status.seats] == [1, 2, 2]
    assert r.status.observer == "cancelled"
    assert "Digest (not a consolidation)" in r.summary


def test_observer_failed_gives_the_digest_as_summary() -> None:
    history = [*healthy(), observer("", has_error=True, error="APIError: observer down")]
    r = build_result(state(history, end_reason=EndReason.OBSERVER_FAILED, summary="(failed)"))
    assert r.status.observer == "failed" and r.status.degraded
    assert r.status.end_reason == "observer-failed"
    assert any(
        n.startswith("the observer failed (APIError: observer down)") for n in r.status.notes
    )
    assert "- pm (round 2): modular monolith — because reasons (confidence 8/10)" in r.summary
    assert r.summary.index(HEADER_TITLE) < r.summary.index("Digest")
    assert r.verdict.source == "ledger" and r.verdict.consensus == "unanimous"


def test_digest_never_invents_a_position() -> None:
    history = [
        turn("pm", 1, pos("keep", 7)),
        turn("dev", 1, "I think we should look at it again."),
        turn("rv", 1, "", has_error=True, error="boom"),
    ]
    text = digest(state(history, total_rounds=1))
    assert "- pm (round 1): keep — because reasons (confidence 7/10)" in text
    assert "- dev (round 1): no Position line; last words: “I think we should look" in text
    assert "- rv: gave no usable answer" in text


def test_every_seat_failed_observer_skipped_says_why() -> None:
    history = [turn(a, 1, "", has_error=True, error="down") for a in AGENTS]
    r = build_result(state(history, total_rounds=1, end_reason=EndReason.ALL_FAILED, summary=None))
    assert "the observer was not asked: no seat gave a usable answer" in r.status.notes
    assert r.status.observer == "skipped"
    assert r.verdict.confidence is None and r.verdict.consensus == "unknown"


# ── changes ─────────────────────────────────────────────────────────────────────────────────────


def test_change_reason_from_the_next_turn_and_unexplained_change() -> None:
    history = [turn("dev", 1, pos("split", 6)), turn("dev", 2, pos("keep", 6))]
    change = unexplained_change(history, "dev")
    assert change is not None and (change.round, change.from_label, change.to_label) == (
        2,
        "split",
        "keep",
    )
    history.append(turn("dev", 3, "**Changed:** the migration cost\n" + pos("keep", 7)))
    assert unexplained_change(history, "dev") is None
    st_ = state(history, agents=["dev", "pm"], total_rounds=3)
    (dev, _) = positions(st_)
    assert [(c.round, c.why) for c in dev.changes] == [(2, "the migration cost")]


def test_change_without_reason_is_noted() -> None:
    history = [turn("pm", 1, pos("a", 5)), turn("pm", 2, pos("b", 5))]
    r = build_result(state(history, agents=["pm", "dev"]))
    assert any("pm changed its position in round 2" in n and "without" in n for n in r.status.notes)


def test_parse_changed() -> None:
    assert parse_changed("Changed: the numbers\nrest") == "the numbers"
    assert parse_changed("  - *Changed:* rv's point  ") == "rv's point"
    assert parse_changed("nothing changed: really") is None
    assert parse_changed("no line") is None


# ── tally ───────────────────────────────────────────────────────────────────────────────────────


def test_tally_weights_and_consensus_kinds() -> None:
    def seats(*labels: tuple[str, str | None, float | None]) -> Any:
        from roundtabled.core.result_model import SeatPosition

        return [SeatPosition(agent=a, label=lab, confidence=c) for a, lab, c in labels]

    t = tally(seats(("a", "X", 0.5), ("b", " x ", None), ("c", "Y", 0.9)))
    assert [(i.label, i.seats, i.weight) for i in t] == [("X", ["a", "b"], 1.0), ("Y", ["c"], 0.9)]
    assert tally_consensus(t, 3) == "majority"
    assert tally_consensus(tally(seats(("a", "X", 1), ("b", "Y", 1), ("c", "Z", 1))), 3) == "none"
    assert (
        tally_consensus(tally(seats(("a", "X", 1), ("b", "X", 1), ("c", "Y", 1), ("d", "Y", 1))), 4)
        == "split"
    )
    assert tally_consensus(tally(seats(("a", "X", 1), ("b", None, None))), 2) == "unknown"
    assert tally_consensus([], 3) == "unknown"


_label = st.sampled_from(["keep", "Keep ", "split", "wait", None])


@settings(max_examples=200)
@given(st.lists(st.tuples(_label, st.none() | st.integers(0, 10)), min_size=2, max_size=6))
def test_tally_never_counts_a_seat_without_a_label(
    seats: list[tuple[str | None, int | None]],
) -> None:
    agents = [f"s{i}" for i in range(len(seats))]
    history = [
        turn(a, 1, pos(lab, c if c is not None else 5) if lab else "no line here")
        for a, (lab, c) in zip(agents, seats, strict=True)
    ]
    st_ = state(history, agents=agents, total_rounds=1)
    v = ledger_verdict(st_)
    counted = [s for item in v.tally for s in item.seats]
    assert sorted(counted) == sorted(a for a, (lab, _) in zip(agents, seats, strict=True) if lab)
    if v.consensus == "unanimous":
        assert all(lab is not None for lab, _ in seats)
    assert v.confidence is None or 0.0 <= v.confidence <= 1.0


# ── the observer's verdict ──────────────────────────────────────────────────────────────────────


def test_parse_reply_valid_fenced_block() -> None:
    text = (
        "1. **Executive summary** keep it.\n\n6. **Verdict**\n```json\n"
        + json.dumps(
            {**VALID, "disagreements": [{"point": "timing", "minority": ["RV"], "view": "now"}]}
        )
        + "\n```\n"
    )
    prose, verdict, error = parse_reply(text, AGENTS)
    assert error is None and verdict is not None
    assert prose == "1. **Executive summary** keep it."
    assert verdict.disagreements[0].minority == ["rv"]
    assert verdict.consensus == "unanimous"


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("Just prose, no verdict.", "no fenced ```json verdict block"),
        ('x\n```json\n{"decision": "a", \n```', "not valid JSON"),
        ('```json\n{"decision": "a", "consensus": "mostly"}\n```', "consensus"),
        ('```json\n{"consensus": "split"}\n```', "decision"),
        (
            '```json\n{"decision": null, "consensus": "split", "disagreements": '
            '[{"point": "p", "minority": ["bob"]}]}\n```',
            "'bob' is not a seat",
        ),
    ],
)
def test_parse_reply_errors_name_the_problem(reply: str, error: str) -> None:
    _, verdict, err = parse_reply(reply, AGENTS)
    assert verdict is None and err is not None and error in err


def test_repair_reply_is_bare_json_and_tenths_are_read() -> None:
    _, verdict, err = parse_reply(
        '{"decision": null, "consensus": "none", "confidence": 7}', AGENTS
    )
    assert err is None and verdict is not None and verdict.confidence == 0.7


def test_repair_prompt_names_the_error_and_asks_only_for_json() -> None:
    text = repair_prompt("consensus: Input should be 'unanimous'")
    assert text.startswith("Your verdict JSON was invalid: consensus: Input should be")
    assert "Reply with only the corrected JSON" in text


def test_schema_is_published_and_the_example_validates() -> None:
    schema = verdict_schema()
    assert set(schema["required"]) == {"decision", "consensus"}
    assert schema["properties"]["consensus"]["enum"] == ["unanimous", "majority", "split", "none"]
    assert "openQuestions" in schema["properties"] and "stances" in schema["properties"]


def test_the_shape_has_placeholders_only_and_a_copied_placeholder_is_unusable() -> None:
    # Every string value of the shape is a <placeholder>: nothing an observer could copy as a
    # decision that reads like one.
    def strings(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [x for v in node.values() for x in strings(v)]
        if isinstance(node, list):
            return [x for v in node for x in strings(v)]
        return []

    shape = json.loads(VERDICT_EXAMPLE.replace("<0.0 to 1.0>", "0.5"))
    values = strings(shape)
    assert len(values) >= 10 and all(re.fullmatch(r"<[^<>]+>", v) for v in values)
    copied = (
        VERDICT_EXAMPLE.replace("<0.0 to 1.0>", "0.6")
        .replace("<unanimous | majority | split | none>", "majority")
        .replace("<merge | split>", "merge")
    )
    reply = f"1. Executive summary: fine.\n```json\n{copied}\n```"
    _, verdict, error = parse_reply(reply, ["pm", "dev"])
    assert verdict is None and error is not None and "placeholder" in error
    filled = copied.replace('"<what the panel decided, or null>"', '"<keep it>"')
    assert parse_reply(f"```json\n{filled}\n```", ["pm"])[1] is None
    own = copied.replace('"<what the panel decided, or null>"', '"keep the monolith"').replace(
        '"<seat name>"', '"pm"'
    )
    _, verdict, error = parse_reply(f"```json\n{own}\n```", ["pm"])
    assert error is None and verdict is not None and verdict.decision == "keep the monolith"
    assert verdict.stances[0].action == "merge"


def test_fallback_verdict_from_the_ledger_is_noted() -> None:
    st_ = state(
        healthy(), verdict=VerdictRecord(error="no fenced block", repair_asked=True, fallback=True)
    )
    r = build_result(st_)
    assert r.status.observer == "fallback" and not r.status.degraded  # said, the debate ran
    assert any("the observer's verdict was unusable (no fenced block)" in n for n in r.status.notes)
    assert r.verdict.source == "ledger"
    assert r.verdict.decision == "modular monolith" and r.verdict.consensus == "unanimous"
    assert r.verdict.confidence == pytest.approx(round(2.3 / 3, 3))


def test_observer_and_tally_disagree_both_shown() -> None:
    data = {**VALID, "consensus": "split"}
    r = build_result(state(healthy(), verdict=VerdictRecord(data=data)))
    assert r.verdict.consensus == "split" and r.verdict.tally_consensus == "unanimous"
    assert any("disagree: both are shown" in n for n in r.status.notes)


def test_repaired_verdict_is_said_but_not_degraded() -> None:
    r = build_result(state(healthy(), verdict=VerdictRecord(data=VALID, repair_asked=True)))
    assert r.status.observer == "repaired" and not r.status.degraded
    assert any("corrected by one repair request" in n for n in r.status.notes)


def test_no_verdict_json_at_all_is_said_without_a_repair() -> None:
    r = build_result(state(healthy(), verdict=VerdictRecord(error="no block", fallback=True)))
    assert r.status.observer == "fallback" and r.verdict.source == "ledger"
    assert any(n.startswith("the observer gave no verdict JSON") for n in r.status.notes)


# ── size and texts ──────────────────────────────────────────────────────────────────────────────


def test_three_seats_ten_rounds_of_8_kb_stay_under_the_tool_limits() -> None:
    reply = ("word " * 1600)[:8000] + "\nPosition: keep — x (confidence 6/10)"
    history = [
        turn(a, r, reply, has_error=(r == 3 and a == "dev"), error="APIError: " + "e" * 900)
        for r in range(1, 11)
        for a in AGENTS
    ]
    summary = "\n".join(f"line {i} " + "z" * 200 for i in range(3000))  # ~620 KB, 3000 lines
    st_ = state(
        history,
        total_rounds=10,
        summary=summary,
        end_reason=EndReason.REPETITION,
        errors=["x" * 5000] * 50,
        notes=["n" * 2000] * 100,
    )
    text = result_json(build_result(st_))
    assert len(text.encode()) <= RESULT_MAX_BYTES < 50 * 1024
    assert text.count("\n") + 1 < 2000
    data = json.loads(text)
    assert list(data)[3:5] == ["status", "verdict"]  # status first, then verdict
    assert data["status"]["degraded"] is True
    assert data["summary"].startswith(HEADER_TITLE)
    assert "summary cut to fit" in data["summary"]
    assert "word word" not in text  # the transcript is never pasted
    assert len(delivery_text(st_).encode()) < 50 * 1024


def test_delivery_text_carries_the_same_words() -> None:
    footer = Options(usage_footer=True)
    st_ = one_round(pos("a", 5), "", pos("a", 5), summary=SUMMARY, options=footer)
    text = delivery_text(st_)
    result = build_result(st_)
    assert text.splitlines()[0] == "Roundtable ses_verdict — Split?"
    assert result.summary in text
    assert "- dev gave an empty answer in round 1" in text
    assert "Positions: pm: a (confidence 5/10) · dev: did not speak · rv: a" in text


def test_usage_totals() -> None:
    history = [
        turn("pm", 1, "a", usage=Usage(input=10, output=5, reasoning=1, cost=0.01)),
        turn("dev", 1, "b", usage=Usage(input=20, output=7, cost=0.02)),
        observer("s", usage=Usage(input=100, output=9, cost=0.1)),
    ]
    u = build_result(state(history, agents=["pm", "dev"], total_rounds=1)).usage
    assert (u.input, u.output) == (130, 22) and u.cost == pytest.approx(0.13)
    assert u.per_agent["pm"].output == 6 and "roundtable-observer" in u.per_agent


def test_rounds_completed_counts_only_full_rounds() -> None:
    assert rounds_completed(state(healthy()[:4])) == 1
    assert rounds_completed(state(healthy())) == 2


def test_payload_of_a_closed_session_keeps_the_exact_interruption_header_first() -> None:
    from roundtabled.core.result import INTERRUPTION_HEADER, payload

    st_ = state(
        [turn("pm", 1, pos("keep", 7))],
        end_reason=EndReason.SESSION_DELETED,
        phase=Phase.ABORTED,
        summary=None,
    )
    data = payload(st_, "interruption")
    contract = json.loads(data["output"])
    for text in (data["text"], contract["summary"]):
        lines = text.splitlines()
        assert lines[0] == INTERRUPTION_HEADER and lines[1] == HEADER_TITLE
        assert "the roundtable session was closed in round 1 of 2" in text
        assert "keep" in text
    assert contract["status"]["endReason"] == "session-deleted"
    assert data["result"] == contract


# ── stances ─────────────────────────────────────────────────────────────────────────────────────


def test_seats_that_agree_in_different_words_are_one_stance_in_the_tally() -> None:
    st_ = one_round(
        pos("modular monolith", 7),
        pos("Modular monolith first", 6),
        pos("a modular monolith, for now", 8),
    )
    v = ledger_verdict(st_)
    assert [p.label for p in v.positions] == [
        "modular monolith",
        "Modular monolith first",
        "a modular monolith, for now",
    ]  # the seats' own words are kept
    assert {p.stance for p in v.positions} == {"modular monolith"}
    assert len(v.tally) == 1 and v.tally[0].seats == AGENTS
    assert v.tally[0].labels == [p.label for p in v.positions]
    assert v.consensus == "unanimous" and v.decision == "modular monolith"


def test_a_label_that_is_a_seat_name_counts_as_no_position_and_is_said() -> None:
    st_ = one_round(pos("PM", 7), pos("Dev", 6), pos("keep the monolith", 8))
    r = build_result(st_)
    v = r.verdict
    assert [(p.label, p.stance, p.no_stance) for p in v.positions][:2] == [
        ("PM", None, "the seat's name"),
        ("Dev", None, "the seat's name"),
    ]
    assert v.decision is None and v.tally_consensus == "unknown"  # never "Decision: Dev"
    assert any("“PM”, is the seat's name, not a stance" in n for n in r.status.notes)


def test_two_position_lines_and_a_turn_that_is_only_its_closing_line_are_said() -> None:
    st_ = one_round(
        "Position: split — first\nthen\n" + pos("keep", 7),
        "Position: keep — yes (confidence 6/10)",
        pos("keep", 8),
    )
    r = build_result(st_)
    assert "pm wrote 2 Position lines in round 1: the last one counts" in r.status.notes
    dev = next(s for s in r.status.seats if s.agent == "dev")
    assert "round 1: only the closing line, no argument" in dev.notes
    assert r.verdict.tally_consensus == "unanimous"


def test_an_extension_without_a_position_keeps_the_earlier_one_and_the_decision() -> None:
    history = [
        *[turn(a, 1, pos("keep the monolith", 7)) for a in AGENTS],
        *[turn(a, 2, pos("Keep the monolith.", 8)) for a in AGENTS],
        # the extension (rounds 3): pm states nothing, dev names itself, rv restates
        turn("pm", 3, "More thoughts, but no closing line."),
        turn("dev", 3, pos("Dev", 6)),
        turn("rv", 3, pos("keep the monolith", 9)),
    ]
    opts = Options(call_from_round=2)
    r = build_result(state(history, total_rounds=3, options=opts, summary=""))
    v = r.verdict
    got = {p.agent: (p.label, p.round, p.carried, p.stance) for p in v.positions}
    # The stance is named by the label written most often (pm's and dev's, kept).
    assert got["pm"] == ("Keep the monolith", 2, True, "Keep the monolith")
    assert got["dev"] == ("Keep the monolith", 2, True, "Keep the monolith")
    assert got["rv"][1:3] == (3, False)
    assert v.tally_consensus == "unanimous" and v.decision == "Keep the monolith"
    assert any(
        "pm stated no position in the extension (from round 3): its position from round 2" in n
        for n in r.status.notes
    )
    # Without the extension the same silent last turn is unknown (an older label may have been
    # abandoned).
    plain = ledger_verdict(state(history, total_rounds=3, summary=""))
    assert next(p for p in plain.positions if p.agent == "pm").label is None


def test_an_extension_in_which_no_seat_stated_a_position_is_said_once() -> None:
    history = [
        turn("pm", 1, pos("keep", 7)),
        turn("dev", 1, pos("split", 6)),
        turn("rv", 1, "No closing line."),
        turn("pm", 2, "Nothing new."),
        turn("dev", 2, pos("split", 6)),
        turn("rv", 2, pos("wait", 5)),
        # the extension (round 3): nobody states a position; dev names itself
        turn("pm", 3, "Still nothing new."),
        turn("dev", 3, pos("Dev", 6)),
        turn("rv", 3, "", has_error=True, error="APIError: boom"),
    ]
    opts = Options(call_from_round=2)
    r = build_result(state(history, total_rounds=3, options=opts, summary=""))
    assert r.verdict.decision is None and r.verdict.tally_consensus == "none"
    assert (
        "no seat stated a position in the extension (round 3): the verdict stands on the "
        "positions of rounds 1–2"
    ) in r.status.notes
    # Before the extension ran a turn, or with no extension at all, there is no such note.
    for st_ in (
        state(history[:6], total_rounds=3, options=opts, summary=""),
        state(history, total_rounds=3, summary=""),
    ):
        notes = build_result(st_).status.notes
        assert not [n for n in notes if "in the extension (" in n and "stands on" in n]


_reply = st.sampled_from(
    [
        "prose without a closing line",
        pos("keep", 7),
        pos("split", 6),
        pos("PM", 8),  # a seat's name: no position
        pos("<short label>", 5),  # a placeholder: no position
        "",  # failed
    ]
)
_record = st.sampled_from(
    [
        VerdictRecord(error="no block", fallback=True),
        VerdictRecord(error="bad", repair_asked=True, fallback=True),
        VerdictRecord(data={**VALID, "decision": None, "consensus": "none"}),
        VerdictRecord(data=VALID),
    ]
)


@settings(max_examples=150)
@given(st.lists(_reply, min_size=3, max_size=6), _record)
def test_a_finished_debate_without_any_decision_is_degraded_and_one_with_one_is_not(
    replies: list[str], record: VerdictRecord
) -> None:
    """The no-decision rule (docs/result.md, status): degraded exactly when some seat spoke, no
    seat's final position names a stance and the verdict has no decision; said in the header."""
    history = [
        turn(a, i // 3 + 1, text, **({"has_error": True, "error": "E"} if not text else {}))
        for i, (a, text) in enumerate(zip(AGENTS * 2, replies, strict=False))
    ]
    rounds = (len(replies) + 2) // 3
    r = build_result(state(history, total_rounds=rounds, verdict=record))
    spoke_ = any(e.response for e in history)
    undecided = r.verdict.decision is None and all(p.stance is None for p in r.verdict.positions)
    said = [n for n in r.status.notes if n.endswith("there is no decision")]
    assert bool(said) == (undecided and spoke_)
    if said:
        assert r.status.degraded and f"- {said[0]}" in r.summary.splitlines()


def test_the_observer_may_merge_stances_and_both_groupings_are_shown() -> None:
    data = {
        **VALID,
        "consensus": "majority",
        "stances": [
            {"action": "merge", "stances": ["split now", "split immediately"], "why": "same"}
        ],
    }
    st_ = one_round(
        pos("split now", 7),
        pos("split immediately", 6),
        pos("keep", 8),
        summary=SUMMARY,
        verdict=VerdictRecord(data=data),
    )
    r = build_result(st_)
    assert len(r.verdict.tally) == 3  # the daemon's grouping drives the tally
    assert r.verdict.observer_stances[0].action == "merge"
    assert any(
        "the observer would merge the stances “split now” and “split immediately” (same)" in n
        for n in r.status.notes
    )
    assert r.dump()["verdict"]["observerStances"][0]["stances"] == [
        "split now",
        "split immediately",
    ]


def test_a_tally_over_some_seats_only() -> None:
    from roundtabled.core.verdict import counted_tally

    st_ = one_round(
        pos("keep the monolith", 7),
        pos("Keep the monolith first", 6),
        pos("split now", 8),
    )
    items, cons = counted_tally(st_)
    assert cons == "majority" and [t.seats for t in items] == [["pm", "dev"], ["rv"]]
    items, cons = counted_tally(st_, ["pm", "dev"])
    assert cons == "unanimous" and [t.seats for t in items] == [["pm", "dev"]]


_SEATS = ["pm", "dev", "rv", "qa", "ux"]
_seat = st.tuples(
    st.sampled_from(
        [
            pos("keep", 7),
            pos("split", 6),
            "prose without a closing line",
            pos("<short label>", 5),
            "",
        ]
    ),
    st.booleans(),  # bound to a side
)
_claim = st.sampled_from(["unanimous", "majority", "split", "none", "unknown"])


@settings(max_examples=300)
@given(st.lists(_seat, min_size=1, max_size=5), _claim, st.floats(0, 1))
def test_a_consensus_the_stated_positions_do_not_back_is_degraded_with_confidence_unknown(
    seats: list[tuple[str, bool]], claim: str, confidence: float
) -> None:
    """docs/result.md, "degraded": an observer's ``unanimous`` needs every free seat (one not
    bound to a side) to have stated a position, its ``majority`` more than half of them (at
    least one); a seat that never spoke first lowers ``unanimous`` (to ``majority`` when more
    than half spoke). A claim they do not back is degraded, said first among the verdict's
    words, its confidence unknown and its consensus the seats' own count."""
    agents = _SEATS[: len(seats)]
    history = [
        turn(a, 1, text, **({"has_error": True, "error": "E"} if not text else {}))
        for a, (text, _) in zip(agents, seats, strict=True)
    ]
    sides = {a: "for" for a, (_, bound) in zip(agents, seats, strict=True) if bound}
    data = {**VALID, "consensus": claim, "confidence": confidence}
    r = build_result(
        state(
            history,
            agents=agents,
            total_rounds=1,
            options=Options(sides=sides),
            verdict=VerdictRecord(data=data),
        )
    )
    free = [(a, text) for a, (text, bound) in zip(agents, seats, strict=True) if not bound]
    stated = sum(1 for _, text in free if text.startswith("Argument.") and "<" not in text)
    spoke = sum(1 for text, _ in seats if text)
    effective = claim
    if claim == "unanimous" and spoke < len(seats):
        effective = "majority" if spoke * 2 > len(seats) else "unknown"
    need = {"unanimous": len(free), "majority": len(free) // 2 + 1}.get(effective)
    backed = need is None or (bool(free) and stated >= max(need, 1))
    said = [n for n in r.status.notes if f"the observer's '{claim}' is its own reading" in n]
    if backed:
        assert not said and r.verdict.observer_consensus is None
        return
    assert r.status.degraded and len(said) == 1
    assert r.verdict.confidence is None and r.verdict.observer_consensus == claim
    assert r.verdict.consensus == r.verdict.tally_consensus
    header = r.summary.split("\n\n", 1)[0].splitlines()
    assert f"- {said[0]}" in header
    assert said[0].startswith(
        "no seat stated a position"
        if free and not stated
        else "only "
        if free
        else "every seat argued an assigned side"
    )
