"""The protocols' seam (docs/deliberation.md, "Protocols"): one list of names and option values
(the parser, the configuration and the tool take theirs from it, or this fails), the call's
fields each protocol refuses in one line naming the field and the protocol, a preset's values
checked as the call's, the dry run's price of each protocol, the verdict's words, and the 2.x
shell's refusal."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import pytest

from roundtabled.cli.client import FLAG_FOR_FIELD, name_the_flag
from roundtabled.cli.parser import build_parser
from roundtabled.core import protocols
from roundtabled.core.estimate import Seat, protocol_lines, protocol_prices
from roundtabled.core.state import ContextMode, Opening, ProtocolName, Until
from roundtabled.core.validation import PresetSpec, apply_preset, parse_request
from roundtabled.core.verdict import protocol_line
from roundtabled.engine.v2run import refusal
from roundtabled.errors import ValidationFailed
from roundtabled.service.config import PRESET_KEYS, ConfigError, load_settings

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "roundtabled" / "tools" / "roundtable.ts"


def call(**body: Any) -> dict[str, Any]:
    return {"prompt": "Which architecture?", "agents": ["pm", "dev", "rv"], **body}


# ── one list of names and values ────────────────────────────────────────────────────────────────


def test_every_protocol_has_one_module_and_the_registry_follows_the_type() -> None:
    assert get_args(ProtocolName) == protocols.NAMES
    assert tuple(protocols.registry()) == protocols.NAMES
    assert protocols.NAMES[0] == "debate"  # the default comes first


def test_the_tool_s_choices_are_the_daemon_s() -> None:
    text = TOOL.read_text()
    block = re.search(r"const CHOICES = \{(.*?)\} as const", text, re.S)
    assert block is not None, "roundtable.ts lost its CHOICES table"
    choices = {
        key: tuple(re.findall(r'"([^"]+)"', values))
        for key, values in re.findall(r"(\w+): \[([^\]]*)\]", block.group(1))
    }
    assert choices == {
        "extendMode": ("continuation", "new-topic"),
        "until": get_args(Until),
        "opening": get_args(Opening),
        "context": get_args(ContextMode),
        "protocol": protocols.NAMES,
    }
    # Every enum of the tool's schemas is one of CHOICES: no value list spelled twice.
    outside = text.replace(block.group(0), "")
    for values in (get_args(Until), get_args(Opening), get_args(ContextMode), protocols.NAMES):
        assert f'"{values[0]}", "{values[1]}"' not in outside
    for field in ("protocol", "adaptiveThreshold"):
        assert f"{field}:" in text and f'"{field}"' in text  # described and passed on


def test_the_cli_s_choices_are_the_daemon_s() -> None:
    parser = build_parser()
    start = parser._subparsers._group_actions[0].choices["start"]  # type: ignore[union-attr]
    by_flag = {a.option_strings[0]: a for a in start._actions if a.option_strings}
    assert tuple(by_flag["--protocol"].choices) == protocols.NAMES
    assert tuple(by_flag["--opening"].choices) == get_args(Opening)
    assert tuple(by_flag["--until"].choices) == get_args(Until)
    assert tuple(by_flag["--context"].choices) == get_args(ContextMode)
    assert FLAG_FOR_FIELD["protocol"] == "--protocol"
    assert all(repr(n) in PRESET_KEYS["protocol"] for n in protocols.NAMES)
    assert FLAG_FOR_FIELD["adaptiveThreshold"] == "--adaptive-threshold"


# ── what each protocol refuses ──────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("protocol", "field", "value"),
    [
        ("vote", "rounds", 3),
        ("vote", "until", "converged"),
        ("vote", "opening", "independent"),
        ("vote", "context", "recent"),
        ("vote", "sides", {"rv": "against"}),
        ("vote", "budget", {"tokens": 1000}),
        ("vote", "adaptiveThreshold", 0.8),
        ("adaptive", "until", "rounds"),
        ("adaptive", "opening", "sequential"),
        ("adaptive", "sides", {"rv": "against"}),
        ("debate", "adaptiveThreshold", 0.8),
        ("council", "rounds", 2),
        ("council", "context", "recent"),
    ],
)
def test_a_field_the_protocol_does_not_use_is_refused_in_one_line(
    protocol: str, field: str, value: object
) -> None:
    with pytest.raises(ValidationFailed) as exc:
        parse_request(call(protocol=protocol, **{field: value}))
    text = str(exc.value)
    assert exc.value.field == field
    assert "\n" not in text
    assert text.startswith(f"Error: {field} is not used by protocol '{protocol}'")
    flag = FLAG_FOR_FIELD.get(field)
    if flag is not None:  # the CLI names its flag
        assert name_the_flag(text, field).startswith(f"Error: {flag} is not used")


def test_what_a_protocol_uses_is_accepted() -> None:
    assert parse_request(call(protocol="vote")).rounds == 1
    req = parse_request(call(protocol="adaptive"))
    assert (req.protocol, req.rounds, req.adaptive_threshold) == ("adaptive", 3, None)
    req = parse_request(call(protocol="adaptive", rounds=5, adaptiveThreshold=0.75))
    assert (req.rounds, req.adaptive_threshold) == (5, 0.75)
    req = parse_request(call(protocol="adaptive", context="recent", budget={"tokens": 9000}))
    assert req.context == "recent"
    assert parse_request(call(opening="independent", rounds=2)).protocol is None  # a debate


@pytest.mark.parametrize("bad", [0.5, 0.3, 1.5, True, "0.7", float("inf")])
def test_the_threshold_is_a_share_above_half(bad: object) -> None:
    with pytest.raises(ValidationFailed) as exc:
        parse_request(call(protocol="adaptive", adaptiveThreshold=bad))
    assert exc.value.field == "adaptiveThreshold"
    assert "above 0.5 and at most 1" in str(exc.value)


def test_an_unknown_protocol_names_the_allowed_ones() -> None:
    with pytest.raises(ValidationFailed) as exc:
        parse_request(call(protocol="council-of-elders"))
    assert exc.value.field == "protocol"
    assert "'debate', 'vote', 'adaptive'" in str(exc.value)


def test_a_protocol_is_chosen_at_the_start_only() -> None:
    with pytest.raises(ValidationFailed) as exc:
        parse_request({"prompt": "more", "sessionID": "ses_abcdef123456", "protocol": "vote"})
    assert exc.value.field == "protocol"


def test_a_preset_s_values_are_checked_against_the_protocol_and_named_as_the_preset_s() -> None:
    presets = {
        "quick-vote": PresetSpec(agents=("pm", "dev"), protocol="vote"),
        "long": PresetSpec(agents=("pm", "dev"), rounds=4, until="converged"),
        "ad": PresetSpec(agents=("pm", "dev"), protocol="adaptive", adaptive_threshold=0.9),
    }
    req = apply_preset(parse_request({"prompt": "p", "preset": "quick-vote"}), presets)
    assert (req.protocol, req.rounds) == ("vote", 1)
    with pytest.raises(ValidationFailed) as exc:
        apply_preset(parse_request({"prompt": "p", "preset": "long", "protocol": "vote"}), presets)
    assert str(exc.value).startswith("Error: rounds (of preset 'long') is not used by protocol")
    req = apply_preset(parse_request({"prompt": "p", "preset": "ad"}), presets)
    assert (req.protocol, req.adaptive_threshold, req.rounds) == ("adaptive", 0.9, 3)


def test_presets_in_the_configuration_take_a_protocol(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[presets.v]\nagents = ["pm", "dev"]\nprotocol = "vote"\n')
    s = load_settings(env={"HOME": str(tmp_path)}, config_file=path)
    assert s.presets["v"].protocol == "vote"
    path.write_text('[presets.v]\nprotocol = "vote"\nrounds = 3\n')
    with pytest.raises(ConfigError) as exc:
        load_settings(env={"HOME": str(tmp_path)}, config_file=path)
    assert exc.value.key.startswith("presets.v.rounds")
    path.write_text('[presets.v]\nprotocol = "adaptive"\nadaptive_threshold = 0.4\n')
    with pytest.raises(ConfigError) as exc:
        load_settings(env={"HOME": str(tmp_path)}, config_file=path)
    assert exc.value.key.startswith("presets.v.adaptive_threshold")


def test_opencode_2_refuses_a_protocol_other_than_debate_in_one_line() -> None:
    for name in ("vote", "adaptive", "council"):
        req = parse_request(call(protocol=name, parentSessionID="ses_parent00000001"))
        refused = refusal(req)
        assert refused is not None and refused.field == "protocol"
        assert "\n" not in str(refused) and name in str(refused)
    assert (
        refusal(parse_request(call(protocol="debate", parentSessionID="ses_parent00000001")))
        is None
    )


# ── the dry run's price of each protocol ────────────────────────────────────────────────────────


def test_the_dry_run_prices_each_protocol() -> None:
    from roundtabled.core.estimate import Price

    seats = [Seat("pm", "p/m"), Seat("dev", "p/m"), Seat("rv", "p/m")]
    obs = Seat("observer", "p/m")
    priced = protocol_prices(
        seats, obs, rounds=3, topic_chars=400, context="full", prices={"p/m": Price(1.0, 2.0)}
    )
    assert list(priced) == list(protocols.NAMES)
    assert priced["vote"]["turns"] == 3 and priced["debate"]["turns"] == 9
    assert priced["council"]["turns"] == 6  # the answers, then one ranking each
    assert priced["vote"]["costUsd"] < priced["council"]["costUsd"]
    least, most = priced["adaptive"]["least"], priced["adaptive"]["most"]
    assert least == priced["vote"]  # stopped at the opening: the vote's cost
    assert most["turns"] == 9
    assert priced["vote"]["costUsd"] < priced["debate"]["costUsd"] <= most["costUsd"] * 1.0001 + 1
    # An independent round 1 reads no other reply: cheaper than the sequential one.
    assert most["inputTokens"] < priced["debate"]["inputTokens"]
    text = "\n".join(protocol_lines(priced, "vote", "full"))
    assert "vote (this call): 3 seat turns" in text
    assert "when it stops at the opening; up to 9 seat turns" in text
    unknown = protocol_prices(seats, obs, rounds=2, topic_chars=10, context="full", prices={})
    assert unknown["vote"]["costUsd"] is None  # unknown, never 0


# ── the verdict in words ────────────────────────────────────────────────────────────────────────


def test_the_protocol_line_says_the_count_the_unknown_and_the_degraded() -> None:
    assert protocol_line({"protocol": {"name": "debate"}}) is None
    assert protocol_line({}) is None
    weighted = {
        "name": "vote",
        "count": {
            "stances": [
                {"stance": "keep", "seats": ["pm", "rv"], "share": 0.7},
                {"stance": "split", "seats": ["dev"], "share": 0.3},
            ],
            "weighted": True,
            "leader": "keep",
            "leaderShare": 0.7,
            "degraded": [],
        },
    }
    line = protocol_line({"protocol": weighted})
    assert line == (
        "Protocol: vote — “keep” 2 of 3 (confidence-weighted share 0.70), “split” 1 of 3 "
        "(confidence-weighted share 0.30)"
    )
    unknown = {
        "name": "vote",
        "count": {
            "stances": [{"stance": "keep", "seats": ["pm"], "share": None}],
            "weighted": False,
            "degraded": [{"agent": "dev", "why": "failed: boom"}],
        },
    }
    line = protocol_line({"protocol": unknown}) or ""
    assert "“keep” 1 of 2 (share unknown)" in line
    assert "degraded: dev (failed: boom)" in line
    adaptive = {
        "name": "adaptive",
        "adaptive": {"stopped": False, "threshold": 0.67, "why": "… below the threshold: debated"},
    }
    assert (protocol_line({"protocol": adaptive}) or "").endswith("debated")
