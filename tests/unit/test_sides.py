"""Sides (roundtabled/core/sides.py, validation.py, verdict.py, deliberation.py; docs/result.md).

Proves: ``sides`` is checked (an unknown seat, an empty, multi-line or over-long side, a seat
named twice, a side when extending) with one ``Error:`` naming the field and the allowed
values, also through a preset and ``--side``; a state block written before sides loads; the side
reaches the seat's turn prompt, the card and the verdict; a side-bound seat is never counted in
the tally, the consensus or the convergence of the free seats (property-tested).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.cli.client import CliError
from roundtabled.cli.debate import side_flags, start_body
from roundtabled.core import prompts
from roundtabled.core.card import state_card
from roundtabled.core.deliberation import stop_after_seat_turn
from roundtabled.core.result import build_result, verdict_lines
from roundtabled.core.sides import MAX_SIDE_CHARS, free_history, side_instruction
from roundtabled.core.state import (
    META_KEY,
    STATE_VERSION,
    EndReason,
    HistoryEntry,
    ModelRef,
    Options,
    Phase,
    RoundtableState,
    Signer,
    canonical_json,
    decode_state,
    encode_state,
)
from roundtabled.core.validation import PresetSpec, apply_preset, parse_request
from roundtabled.core.verdict import ledger_verdict
from roundtabled.errors import ValidationFailed
from roundtabled.service.config import ConfigError, load_settings

S2 = "ses_sides0000000000001"
SIGNER = Signer(b"s" * 32)
AGENTS = ["pm", "dev", "rv"]


def state(sides: dict[str, str] | None = None, **kw: Any) -> RoundtableState:
    base: dict[str, Any] = {
        "sessionID": S2,
        "title": "(Roundtable) - Split the monolith?",
        "agents": AGENTS,
        "models": {a: ModelRef(providerID="scripted", modelID=f"m-{a}") for a in AGENTS},
        "total_rounds": 2,
        "prompt": "Split the monolith?",
        "options": Options(sides=sides or {}),
    }
    base.update(kw)
    return RoundtableState.model_validate(base)


def turn(agent: str, rnd: int, label: str, conf: int = 8) -> HistoryEntry:
    text = f"Reasons.\nPosition: {label} — because (confidence {conf}/10)"
    return HistoryEntry(agent=agent, round=rnd, response=text, kind="turn", finish="stop")


# ── validation ──────────────────────────────────────────────────────────────────────────────────


def body(**kw: Any) -> dict[str, Any]:
    return {"prompt": "Split?", "agents": AGENTS, **kw}


@pytest.mark.parametrize(
    ("sides", "words"),
    [
        ({"qa": "against"}, "sides names 'qa', which is not a seat of this roundtable; seats: pm"),
        ({"rv": "  "}, "sides: the side of 'rv' is empty; allowed: for, against, neutral, or a"),
        ({"rv": "x" * (MAX_SIDE_CHARS + 1)}, f"has {MAX_SIDE_CHARS + 1} characters; allowed:"),
        ({"rv": "one\ntwo"}, "has more than one line; allowed: for, against, neutral"),
        ({"rv": "for", "RV": "against"}, "gives seat 'rv' a side twice (as 'rv' and 'RV')"),
        (["rv", "against"], "sides must be an object of seat name → side (for, against, neutral"),
        ({"rv": 3}, "sides must be an object of seat name → side"),
    ],
)
def test_a_bad_side_is_one_error_naming_the_field_and_the_allowed_values(
    sides: object, words: str
) -> None:
    with pytest.raises(ValidationFailed) as exc:
        parse_request(body(sides=sides))
    assert exc.value.field == "sides"
    message = str(exc.value)
    assert message.startswith("Error: ") and "\n" not in message
    assert words in message


def test_sides_are_normalised_and_kept() -> None:
    brief = "devil's advocate: argue against the majority"
    r = parse_request(body(sides={"rv": " Against ", "dev": brief}))
    assert r.sides == {"rv": "against", "dev": brief}


def test_a_side_when_extending_or_a_bad_dry_run_is_refused() -> None:
    with pytest.raises(ValidationFailed) as exc:
        parse_request({"prompt": "more", "sessionID": "ses_abcdef123", "sides": {"rv": "for"}})
    assert exc.value.field == "sides" and "new roundtable only" in str(exc.value)
    with pytest.raises(ValidationFailed) as exc:
        parse_request(body(dryRun="yes"))
    assert exc.value.field == "dryRun" and "true or false" in str(exc.value)


def test_a_preset_gives_sides_and_a_call_overrides_them() -> None:
    presets = {"arch": PresetSpec(agents=tuple(AGENTS), sides={"rv": "against"})}
    r = apply_preset(parse_request({"prompt": "x", "preset": "arch"}), presets)
    assert r.sides == {"rv": "against"}
    r = apply_preset(parse_request({"prompt": "x", "preset": "arch", "sides": {}}), presets)
    assert r.sides == {}
    bad = {"duo": PresetSpec(sides={"rv": "against"})}
    with pytest.raises(ValidationFailed) as exc:
        apply_preset(parse_request({"prompt": "x", "preset": "duo", "agents": ["pm", "dev"]}), bad)
    assert exc.value.field == "sides" and "sides (of preset 'duo') names 'rv'" in str(exc.value)


def test_the_cli_side_flag() -> None:
    assert side_flags(["rv=against", "dev=devil's advocate: x=y"]) == {
        "rv": "against",
        "dev": "devil's advocate: x=y",
    }
    assert side_flags(None) is None
    for flags, words in (
        (["rv"], "Error: --side takes SEAT=SIDE (e.g. --side rv=against"),
        (["=for"], "Error: --side takes SEAT=SIDE"),
        (["rv=for", "rv=against"], "Error: --side gives seat 'rv' a side twice"),
        (["rv="], "Error: --side: the side of 'rv' is empty; allowed: for, against, neutral"),
    ):
        with pytest.raises(CliError) as exc:
            side_flags(flags)
        assert exc.value.code == 2 and str(exc.value).startswith(words), str(exc.value)
    args = argparse.Namespace(
        agents="pm,dev,rv", prompt="Split?", rounds=2, until=None, budget_tokens=None,
        budget_usd=None, budget_seconds=None, context=None, opening=None, preset=None,
        observer=None, title=None, parent=None, turn_timeout=None, directory=None,
        side=["rv=against"], dry_run=True,
    )  # fmt: skip
    b = start_body(args)
    assert b["sides"] == {"rv": "against"} and b["dryRun"] is True


# ── the persisted state ─────────────────────────────────────────────────────────────────────────


FIXTURE = Path(__file__).parent / "fixtures" / "state_before_sides.json"


def test_a_state_block_written_before_sides_still_loads() -> None:
    """``fixtures/state_before_sides.json``: a final state as the daemon wrote it before sides
    existed (its ``options`` have no ``sides`` key), signed and read back as a restart would."""
    data = json.loads(FIXTURE.read_text())
    assert "sides" not in data["options"]
    body = canonical_json(data)  # the old bytes, signed as the old daemon signed them
    meta = {META_KEY: {"kind": "state", "v": STATE_VERSION, "body": body.decode()}}
    meta[META_KEY]["mac"] = SIGNER.mac("state", S2, body)
    back = decode_state("card", meta, S2, SIGNER)
    assert back.options.sides == {} and back.options.until == "converged"
    assert ledger_verdict(back).positions[0].side is None
    # and a state with sides round-trips
    st_sides = state({"rv": "against"})
    text, meta = encode_state(st_sides, SIGNER, card=state_card(st_sides))
    assert decode_state(text, json.loads(json.dumps(meta)), S2, SIGNER).options.sides == {
        "rv": "against"
    }


# ── where the side shows ────────────────────────────────────────────────────────────────────────


def test_the_side_binds_the_seat_in_its_turn_prompt_only() -> None:
    s = state({"rv": "against"})
    rv = prompts.turn_prompt(s, round_index=0, seat=2, since=(), opening=False)
    pm = prompts.turn_prompt(s, round_index=0, seat=0, since=(), opening=True)
    assert side_instruction("against") in rv and "AGAINST the proposal" in rv
    assert "assigned side" not in pm
    brief = prompts.turn_prompt(
        state({"rv": "devil's advocate: argue against the majority"}),
        round_index=1,
        seat=2,
        since=(),
        opening=False,
    )
    assert "devil's advocate: argue against the majority" in brief


def test_the_card_shows_the_side() -> None:
    card = state_card(state({"rv": "against"}))
    assert "3. rv (scripted/m-rv) [side: against]" in card
    assert "[side:" not in state_card(state())


def test_a_side_bound_seat_is_shown_marked_and_not_counted() -> None:
    history = [
        turn("pm", 1, "keep monolith"),
        turn("dev", 1, "keep monolith"),
        turn("rv", 1, "split now"),
    ]
    s = state({"rv": "against"}, history=history, phase=Phase.DONE, current_round=1)
    s = s.model_copy(update={"end_reason": EndReason.COMPLETED, "total_rounds": 1})
    v = ledger_verdict(s)
    assert [p.side for p in v.positions] == [None, None, "against"]
    assert [(t.label, t.seats) for t in v.tally] == [("keep monolith", ["pm", "dev"])]
    assert v.consensus == "unanimous" and v.decision == "keep monolith"
    # without the side the same debate is only a majority
    assert ledger_verdict(s.model_copy(update={"options": Options()})).consensus == "majority"
    result = build_result(s)
    assert any("rv argued an assigned side (against)" in n for n in result.status.notes)
    assert "rv [side: against, not counted]: split now" in "\n".join(verdict_lines(result))


def test_convergence_reads_only_the_free_seats() -> None:
    history = [
        turn("pm", 1, "keep"),
        turn("dev", 1, "keep"),
        turn("rv", 1, "split"),
        turn("pm", 2, "keep"),
        turn("dev", 2, "keep"),
        turn("rv", 2, "merge"),  # the side-bound seat moves: the free seats still converged
    ]
    base = state(
        history=history,
        total_rounds=4,
        current_round=2,
        current_agent_index=0,
    )
    opts = Options(until="converged", sides={"rv": "against"})
    stop = stop_after_seat_turn(base.model_copy(update={"options": opts}), now=0)
    assert stop is not None and stop.reason == EndReason.CONVERGED
    free = Options(until="converged")
    assert stop_after_seat_turn(base.model_copy(update={"options": free}), now=0) is None


_labels = st.sampled_from(["keep", "split", "merge"])


@settings(max_examples=60, deadline=None)
@given(
    free=st.lists(_labels, min_size=1, max_size=4),
    bound=st.lists(_labels, min_size=1, max_size=3),
)
def test_side_bound_labels_never_change_the_tally(free: list[str], bound: list[str]) -> None:
    """Whatever the side-bound seats say, the tally and consensus are those of the free seats."""
    agents = [f"f{i}" for i in range(len(free))] + [f"b{i}" for i in range(len(bound))]
    sides = {f"b{i}": "against" for i in range(len(bound))}
    history = [turn(a, 1, lbl) for a, lbl in zip(agents, free + bound, strict=True)]
    with_sides = state(sides, agents=agents, history=history, total_rounds=1)
    only_free = state(agents=agents[: len(free)], history=history[: len(free)], total_rounds=1)
    a, b = ledger_verdict(with_sides), ledger_verdict(only_free)
    assert (a.tally, a.consensus, a.decision) == (b.tally, b.consensus, b.decision)
    assert free_history(history, sides) == history[: len(free)]


def test_a_preset_in_config_toml_gives_sides_and_a_bad_one_names_its_key(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home")}
    path = tmp_path / "config.toml"
    path.write_text(
        '[presets.da]\nagents = ["pm", "dev", "rv"]\n'
        'sides = { rv = "devil\'s advocate: argue against the majority" }\n'
    )
    da = load_settings(env=env, config_file=path).presets["da"]
    assert da.sides == {"rv": "devil's advocate: argue against the majority"}
    for text, words in (
        ('[presets.da]\nagents = ["pm", "dev"]\nsides = { rv = "for" }', "names 'rv'"),
        ('[presets.da]\nsides = { rv = "" }', "the side of 'rv' is empty"),
        ("[presets.da]\nsides = 'against'", "sides must be an object"),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError) as exc:
            load_settings(env=env, config_file=path)
        assert exc.value.key.startswith("presets.da.sides"), exc.value.key
        assert words in str(exc.value) and "expected a table of seat = side" in str(exc.value)
