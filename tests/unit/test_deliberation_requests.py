"""The deliberation arguments of a roundtable call (until, budget, opening, context, preset) and
how a preset and the configured default budget fill a request (roundtabled/validation.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roundtabled.core.state import Budget
from roundtabled.core.validation import PresetSpec, apply_preset, parse_request
from roundtabled.errors import ValidationFailed


def req(**body: Any) -> Any:
    return parse_request({"prompt": "Split the monolith?", "agents": ["pm", "dev"], **body})


def test_defaults_are_none_so_the_engine_uses_today_s_behaviour() -> None:
    r = req()
    assert (r.until, r.budget, r.opening, r.context, r.preset) == (None,) * 5
    assert r.given == frozenset({"prompt", "agents"})


def test_valid_values() -> None:
    r = req(
        until="converged",
        budget={"tokens": 5000, "usd": 0.5, "seconds": 60},
        opening="sequential",
        context="full",
    )
    assert (r.until, r.opening, r.context) == ("converged", "sequential", "full")
    assert r.budget == Budget(tokens=5000, usd=0.5, seconds=60.0)
    assert req(budget={"seconds": 1.5}).budget == Budget(seconds=1.5)


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"until": "forever"}, "until", "until must be one of 'rounds', 'converged'"),
        ({"opening": "parallel"}, "opening", "'sequential', 'independent'"),
        ({"context": 3}, "context", "'full', 'recent'"),
        ({"budget": 5}, "budget", "must be an object with any of tokens, usd, seconds"),
        ({"budget": {}}, "budget", "at least one of tokens, usd, seconds"),
        ({"budget": {"coins": 1}}, "budget", "unknown budget key 'coins'"),
        ({"budget": {"tokens": 0}}, "budget", "budget.tokens must be a positive number"),
        ({"budget": {"tokens": 1.5}}, "budget", "budget.tokens must be a positive number"),
        ({"budget": {"usd": -1}}, "budget", "budget.usd must be a positive number"),
        ({"budget": {"seconds": True}}, "budget", "budget.seconds must be a positive number"),
        ({"budget": {"seconds": float("inf")}}, "budget", "budget.seconds"),
        ({"preset": "no spaces"}, "preset", "preset must be a preset name"),
        ({"speed": "fast"}, "speed", "allowed fields:"),
    ],
)
def test_bad_values_name_the_field_and_the_allowed_values(
    body: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(ValidationFailed) as exc:
        req(**body)
    assert exc.value.field == field
    assert str(exc.value).startswith("Error:") and words in str(exc.value)


def test_an_independent_opening_and_recent_context_are_accepted() -> None:
    # context "recent" is refused later, by the daemon, where the plugin has not reported
    # itself (tests/e2e/test_plugin.py)
    assert req(opening="independent").opening == "independent"
    assert req(context="recent").context == "recent"


def test_opening_and_preset_are_for_a_new_roundtable_only() -> None:
    for key, value in (("opening", "independent"), ("preset", "arch")):
        with pytest.raises(ValidationFailed) as exc:
            parse_request({"prompt": "more", "sessionID": "ses_abcdef123", key: value})
        assert exc.value.field == key and "new roundtable only" in str(exc.value)
    # until, budget and context may change on an extend
    r = parse_request(
        {"prompt": "more", "sessionID": "ses_abcdef123", "until": "converged", "budget": {"usd": 1}}
    )
    assert r.until == "converged"


def test_agents_may_come_from_a_preset() -> None:
    r = parse_request({"prompt": "x", "preset": "arch"})
    assert r.agents is None and r.preset == "arch"
    with pytest.raises(ValidationFailed) as exc:
        parse_request({"prompt": "x"})
    assert exc.value.field == "agents" and "or a preset" in str(exc.value)


PRESETS = {
    "arch": PresetSpec(
        agents=("pm", "dev", "rv"),
        rounds=4,
        observer="rv",
        until="converged",
        budget=Budget(tokens=1000),
        opening="independent",
        context="recent",
        title_prefix="[arch] ",
    ),
    "bare": PresetSpec(rounds=2),
}


def test_a_preset_fills_what_the_call_did_not_set() -> None:
    r = apply_preset(parse_request({"prompt": "Split the monolith?", "preset": "arch"}), PRESETS)
    assert r.agents == ("pm", "dev", "rv") and r.rounds == 4 and r.observer == "rv"
    assert (r.until, r.opening, r.context) == ("converged", "independent", "recent")
    assert r.budget == Budget(tokens=1000)
    assert r.title == "[arch] (Roundtable) - Split the monolith?"


def test_explicit_arguments_override_the_preset() -> None:
    body = {
        "prompt": "Split?",
        "preset": "arch",
        "agents": ["dev", "pm"],
        "rounds": 1,
        "until": "rounds",
        "budget": {"usd": 2},
        "title": "Mine",
    }
    r = apply_preset(parse_request(body), PRESETS)
    assert r.agents == ("dev", "pm") and r.rounds == 1 and r.until == "rounds"
    assert r.budget == Budget(usd=2.0)
    assert r.title == "[arch] Mine"
    assert r.opening == "independent"  # not given: from the preset


def test_unknown_preset_names_the_available_ones() -> None:
    with pytest.raises(ValidationFailed) as exc:
        apply_preset(parse_request({"prompt": "x", "preset": "nope"}), PRESETS)
    assert exc.value.field == "preset"
    assert "available presets: arch, bare" in str(exc.value)
    with pytest.raises(ValidationFailed) as exc:
        apply_preset(parse_request({"prompt": "x", "preset": "nope"}), {})
    assert "none are configured" in str(exc.value)


def test_a_preset_without_agents_needs_them_in_the_call() -> None:
    with pytest.raises(ValidationFailed) as exc:
        apply_preset(parse_request({"prompt": "x", "preset": "bare"}), PRESETS)
    assert exc.value.field == "agents" and "[presets.bare]" in str(exc.value)
    r = apply_preset(
        parse_request({"prompt": "x", "preset": "bare", "agents": ["a", "b"]}), PRESETS
    )
    assert r.rounds == 2


def test_the_default_budget_applies_only_when_call_and_preset_give_none() -> None:
    default = Budget(seconds=600)
    assert apply_preset(req(), PRESETS, default).budget == default
    assert apply_preset(req(budget={"tokens": 9}), PRESETS, default).budget == Budget(tokens=9)
    arch = parse_request({"prompt": "x", "preset": "arch"})
    assert apply_preset(arch, PRESETS, default).budget == Budget(tokens=1000)
    assert apply_preset(req(), PRESETS, None).budget is None


def test_cli_presets_lists_the_configured_panels(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from roundtabled.cli import main

    example = Path(__file__).parents[2] / "examples" / "config.toml"
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        assert main(["--config", str(example), "presets"]) == 0
        out = capsys.readouterr().out
        assert "design-review: agents=pm,dev,rv rounds=4 until=converged" in out
        assert "budget=tokens:150000" in out and "quick-check:" in out
        assert main(["--config", str(example), "presets", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["quick-check"]["budget"]["usd"] == 0.25
        empty = tmp_path / "empty.toml"
        empty.write_text("")
        assert main(["--config", str(empty), "presets"]) == 0
        assert "No presets configured" in capsys.readouterr().out


def test_cli_start_flags_become_the_request_body() -> None:
    from roundtabled.cli.debate import start_body
    from roundtabled.cli.parser import build_parser

    args = build_parser().parse_args(
        [
            "start",
            "--preset",
            "design-review",
            "--until",
            "converged",
            "--budget-tokens",
            "900",
            "--budget-seconds",
            "30",
            "--opening",
            "independent",
            "--context",
            "recent",
            "topic",
        ]
    )
    body = start_body(args)
    assert body["preset"] == "design-review" and body["agents"] is None and body["rounds"] is None
    assert body["budget"] == {"tokens": 900, "seconds": 30.0}
    assert (body["until"], body["opening"], body["context"]) == (
        "converged",
        "independent",
        "recent",
    )
    assert parse_request(body).context == "recent"
    req = parse_request({**body, "opening": "sequential", "context": "full"})
    assert req.given == frozenset({"prompt", "preset", "until", "budget", "opening", "context"})
