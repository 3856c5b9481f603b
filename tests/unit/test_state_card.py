"""The state block's two forms: the card (a short text for people, the state signed in the
part's metadata) and the seed's text form, which existing roundtables still hold and which is
still read."""

from __future__ import annotations

import json

import pytest

from roundtabled.core.card import CARD_HEADER, MAX_CARD_LINES, state_card
from roundtabled.core.result import build_result
from roundtabled.core.state import (
    EndReason,
    HistoryEntry,
    ModelRef,
    Options,
    PendingTurn,
    Phase,
    RoundtableState,
    Signer,
    decode_state,
    encode_state,
    has_meta_text,
)
from roundtabled.errors import StateForgedError
from roundtabled.opencode.v1_wire import is_state_part

SIGNER = Signer(b"k" * 32)
S2 = "ses_card00000000000001"


def _state(**kw: object) -> RoundtableState:
    base: dict[str, object] = {
        "sessionID": S2,
        "title": "(Roundtable) - Split the payments monolith?",
        "agents": ["pm", "dev", "rv"],
        "models": {
            "pm": ModelRef(providerID="anthropic", modelID="claude-x"),
            "dev": ModelRef(providerID="openai", modelID="gpt-y"),
            "rv": ModelRef(providerID="scripted", modelID="debater-3"),
        },
        "total_rounds": 3,
        "prompt": "Split the payments monolith?",
        "options": Options(turn_timeout=300.0, loop_threshold=0.85),
    }
    base.update(kw)
    return RoundtableState.model_validate(base)


def test_the_card_has_title_seats_in_order_with_models_rounds_and_phase() -> None:
    st = _state(
        current_round=1,
        pending=PendingTurn(kind="turn", round=1, seat=1, agent="dev", messageID="m"),
    )
    card = state_card(st)
    lines = card.splitlines()
    assert 1 < len(lines) <= MAX_CARD_LINES
    assert lines[0] == f"{CARD_HEADER} · LIVE round 2/3 · Split the payments monolith?"
    assert lines[1] == (
        "Seats in order: 1. pm (anthropic/claude-x), 2. dev (openai/gpt-y), "
        "3. rv (scripted/debater-3)"
    )
    assert "Rounds: 3" in card and "observer: built-in" in card
    assert "Phase: debating — round 2/3, dev speaking" in card
    assert not has_meta_text(card) and "{" not in card


def test_the_card_of_a_finished_roundtable_names_the_end_reason() -> None:
    st = _state(
        phase=Phase.DONE,
        end_reason=EndReason.REPETITION,
        history=[HistoryEntry(agent="pm", round=2, seat=0, response="x")],
        errors=["dev: provider failed"],
    )
    card = state_card(st)
    assert "Phase: done (repetition) — ended in round 2/3" in card
    assert "Result: DEGRADED — " in card and ", 1 problem(s) (roundtabled status" in card
    assert len(card.splitlines()) <= MAX_CARD_LINES


def _seat(agent: str, rnd: int, seat: int, **kw: object) -> HistoryEntry:
    text = "Argument.\nPosition: keep — because (confidence 7/10)"
    return HistoryEntry.model_validate(
        {"agent": agent, "round": rnd, "seat": seat, "response": text, "finish": "stop", **kw}
    )


def test_the_card_of_a_completed_but_degraded_roundtable_says_so_in_words() -> None:
    # A seat whose model is missing: "done (completed)" but the result is degraded.
    failed = {"response": "", "has_error": True, "error": "ProviderModelNotFoundError"}
    history = [
        _seat(a, r, i, **(failed if a == "dev" else {}))
        for r in (1, 2)
        for i, a in enumerate(["pm", "dev", "rv"])
    ]
    observer = HistoryEntry.model_validate(
        {"agent": "roundtable-observer", "round": 2, "response": "Summary.", "kind": "observer"}
    )
    st = _state(
        phase=Phase.DONE,
        end_reason=EndReason.COMPLETED,
        total_rounds=2,
        current_round=2,
        history=[*history, observer],
        summary="Summary.",
    )
    status = build_result(st).status
    assert status.degraded and len(status.notes) >= 2
    lines = state_card(st).splitlines()
    assert "Phase: done (completed) — ended in round 2/2" in lines
    result = next(line for line in lines if line.startswith("Result: "))
    assert result.startswith(
        f"Result: DEGRADED — {len(status.notes)} notes (roundtabled status {S2}): "
    )
    assert not any(line.startswith("Problems:") for line in lines)
    assert len(lines) <= MAX_CARD_LINES and all(len(line) <= 160 for line in lines)
    # the same debate with every turn answered: no such line
    healthy = st.model_copy(
        update={
            "history": [
                _seat(a, e.round, e.seat)
                for a, e in zip(["pm", "dev", "rv"] * 2, history, strict=True)
            ]
            + [observer]
        }
    )
    assert not build_result(healthy).status.degraded
    assert "DEGRADED" not in state_card(healthy)


def test_card_lines_are_capped() -> None:
    card = state_card(_state(title="T" * 500, agents=[f"agent{i}" for i in range(12)]))
    assert all(len(line) <= 160 for line in card.splitlines())


def test_the_card_form_round_trips_and_is_signed() -> None:
    st = _state()
    text, meta = encode_state(st, SIGNER, card=state_card(st))
    assert text == state_card(st)
    # the server hands metadata back through JSON (floats such as 300.0 would not survive as
    # numbers; the body is a string and does)
    meta = json.loads(json.dumps(meta))
    back = decode_state(text, meta, S2, SIGNER)
    assert back == st
    part = {"type": "text", "text": text, "ignored": True, "metadata": meta}
    assert is_state_part(part)


def test_the_seed_text_form_is_still_read() -> None:
    st = _state()
    text, meta = encode_state(st, SIGNER)
    assert has_meta_text(text) and "body" not in meta["roundtabled"]
    assert decode_state(text, meta, S2, SIGNER) == st
    assert is_state_part({"type": "text", "text": text, "metadata": meta})


def test_an_edited_body_or_another_session_is_forged() -> None:
    st = _state()
    text, meta = encode_state(st, SIGNER, card=state_card(st))
    edited = json.loads(meta["roundtabled"]["body"])
    edited["totalRounds"] = 50
    forged = {"roundtabled": {**meta["roundtabled"], "body": json.dumps(edited)}}
    with pytest.raises(StateForgedError):
        decode_state(text, forged, S2, SIGNER)
    with pytest.raises(StateForgedError):
        decode_state(text, meta, "ses_other0000000000001", SIGNER)
    # a pasted card without metadata is no state at all
    assert not is_state_part({"type": "text", "text": text})
    with pytest.raises(StateForgedError):
        decode_state(text, None, S2, SIGNER)


def test_the_first_line_says_whether_the_roundtable_is_live() -> None:
    """With several roundtables under one session, the live one is told by its card's first
    line (the TUI opens the oldest child session first)."""

    def first(**kw: object) -> str:
        return state_card(_state(**kw)).splitlines()[0]

    title = " · Split the payments monolith?"
    assert first(current_round=1) == f"{CARD_HEADER} · LIVE round 2/3{title}"
    assert first(phase=Phase.OBSERVING, current_round=3).startswith(f"{CARD_HEADER} · LIVE ")
    assert first(end_reason=EndReason.BUDGET) == f"{CARD_HEADER} · STOPPING{title}"
    assert first(phase=Phase.DONE, end_reason=EndReason.COMPLETED) == (
        f"{CARD_HEADER} · CONCLUDED{title}"
    )
    assert first(phase=Phase.DONE, end_reason=EndReason.CANCELLED) == (
        f"{CARD_HEADER} · CANCELLED{title}"
    )
    assert first(phase=Phase.DONE, end_reason=EndReason.REPETITION) == (
        f"{CARD_HEADER} · ENDED{title}"
    )
    assert first(phase=Phase.ABORTED, end_reason=EndReason.SESSION_DELETED) == (
        f"{CARD_HEADER} · ABORTED{title}"
    )
