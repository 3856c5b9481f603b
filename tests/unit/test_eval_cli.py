"""``roundtabled eval`` flags: a bad one is one ``Error:`` line naming it, exit 2
(roundtabled/cli/evaluate.py); the provider configuration ``--base-url``/``--model`` write, a
mixed panel's (several models dealt to the seats in turn) included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roundtabled.cli import main
from roundtabled.cli.evaluate import options_from
from roundtabled.cli.parser import build_parser
from roundtabled.eval.options import EvalOptions, local_seats, project_config
from roundtabled.service import provider

LOCAL = ["--base-url", "http://127.0.0.1:8080/v1", "--model", "m"]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--agents", "a,b", "--limit", "x"], "--limit"),
        (["--agents", "a,b", "--limit", "0"], "--limit"),
        (["--agents", "a,b", "--protocols", "single,chaos"], "--protocols"),
        (
            ["--agents", "a,b", "--protocols", "sc"],
            "allowed single, vote, debate, adaptive, council, self-consistency",
        ),
        (["--agents", "a,b", "--protocols", "self-consistency"], "--protocols self-consistency"),
        (["--agents", "a,b", "--level", "hard"], "--level"),
        (["--agents", "a,b", "--max-usd", "nan"], "--max-usd"),
        (["--agents", "a,b", "--max-tokens", "-5"], "--max-tokens"),
        (["--agents", "a,b", "--concurrency", "99"], "--concurrency"),
        (["--agents", "a,b", "--answer-line", "boxed"], "--answer-line"),
        (["--agents", "a,a"], "--agents"),
        ([], "--agents"),
        (["--base-url", "http://127.0.0.1:8080/v1"], "--base-url and --model"),
        (["--base-url", "ftp://x", "--model", "m"], "--base-url"),
        (["--base-url", "http://127.0.0.1:8080", "--model", "a b"], "--model"),
        (["--agents", "a,b", "--tasks", "/nonexistent.jsonl"], "--tasks"),
        (["--agents", "a,b", "--output-limit", "512"], "--output-limit and --context-limit"),
        ([*LOCAL, "--output-limit", "12"], "--output-limit must be 64-65536"),
        ([*LOCAL, "--output-limit", "lots"], "--output-limit must be a whole number"),
        ([*LOCAL, "--context-limit", "100"], "--context-limit must be 1024-2097152"),
        ([*LOCAL, "--output-limit", "4096", "--context-limit", "4096"], "must be below"),
        (
            ["--base-url", "http://a:1/v1,http://b:2/v1,http://c:3/v1", "--model", "m,n"],
            "--base-url gives 3 URLs for 2 models (--model m,n); expected one URL",
        ),
        (
            ["--base-url", "http://a:1/v1,http://b:2/v1", "--model", "m"],
            "--base-url gives 2 URLs for 1 model (--model m); expected one URL",
        ),
        (["--base-url", "http://a:1/v1", "--model", "m,,n"], "--model = 'm,,n' has an empty item"),
        (["--base-url", "http://a:1/v1", "--model", "m,"], "--model = 'm,' has an empty item"),
        (
            ["--base-url", "http://a:1/v1,", "--model", "m"],
            "--base-url = 'http://a:1/v1,' has an empty item",
        ),
        (
            ["--base-url", "http://a:1/v1,ftp://b:2/v1", "--model", "m,n"],
            "--base-url = 'ftp://b:2/v1'; expected http://host:port/v1",
        ),
        (["--base-url", "http://a:1/v1", "--model", "m,a b"], "--model = 'a b'"),
    ],
)
def test_a_bad_flag_is_one_error_line_naming_it(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["eval", "--out", str(tmp_path / "run"), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("Error: ") and flag in err[0], err
    assert not (tmp_path / "run").exists()


def test_a_bad_task_file_names_the_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"id": 1, "question": "q", "answer": 1}\n{"id": 2}\n')
    code = main(["eval", "--agents", "a,b", "--tasks", str(tasks), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("Error: --tasks") and "t.jsonl:2: question" in err[0]


def test_the_local_provider_configuration() -> None:
    assert provider.check_base_url("http://127.0.0.1:18080") == "http://127.0.0.1:18080/v1"
    assert provider.check_base_url("http://h:1/v1/") == "http://h:1/v1"
    cfg = provider.with_local_model(
        {"agent": {"pm": {"prompt": "P", "model": "x/y"}}}, "http://h:1/v1", "qwen", ["pm", "s2"]
    )
    prov = cfg["provider"]["local"]
    assert prov["npm"] == "@ai-sdk/openai-compatible"
    assert prov["options"]["baseURL"] == "http://h:1/v1"
    assert prov["models"]["qwen"]["limit"] == {"context": 16384, "output": 2048}
    assert cfg["model"] == cfg["small_model"] == "local/qwen"
    assert cfg["agent"]["pm"] == {"prompt": "P", "model": "local/qwen"}
    assert cfg["agent"]["s2"]["permission"] == {"*": "deny"}
    assert cfg["agent"]["s2"]["model"] == "local/qwen"


def test_the_output_and_context_limits_are_written_for_the_run(tmp_path: Path) -> None:
    args = ["eval", "--out", str(tmp_path / "run"), *LOCAL]
    opts = options_from(build_parser().parse_args([*args, "--output-limit", "512"]))
    assert (opts.output_limit, opts.context_limit) == (512, provider.DEFAULT_CONTEXT)
    assert opts.identity()["outputLimit"] == 512
    plain = options_from(build_parser().parse_args(["eval", "--agents", "a,b"]))
    assert plain.identity()["outputLimit"] is None  # no model written: no limit of ours
    cfg = provider.with_local_model({}, "http://h:1/v1", "m", ["s"], context=8192, output=512)
    assert cfg["provider"]["local"]["models"]["m"]["limit"] == {"context": 8192, "output": 512}


def test_the_default_protocols_are_all_of_them_with_a_local_model(tmp_path: Path) -> None:
    """Self-consistency samples copies of a seat the run writes into its own project: with
    ``--agents`` alone the default leaves it out, with ``--model`` it is in."""
    every = ["single", "vote", "debate", "adaptive", "council", "self-consistency"]
    local = options_from(build_parser().parse_args(["eval", "--out", str(tmp_path), *LOCAL]))
    assert local.protocols == every
    agents = ["eval", "--out", str(tmp_path), "--agents", "a,b"]
    assert options_from(build_parser().parse_args(agents)).protocols == every[:-1]


def _options(*argv: str) -> EvalOptions:
    return options_from(build_parser().parse_args(["eval", *argv]))


A, B = "http://127.0.0.1:18080/v1", "http://127.0.0.1:18081/v1"


def test_a_bad_list_from_the_environment_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("ROUNDTABLED_EVAL_BASE_URL", f"{A},{B}")
    monkeypatch.setenv("ROUNDTABLED_EVAL_MODEL", "m,n,o")
    code = main(["eval", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("Error: ROUNDTABLED_EVAL_BASE_URL gives 2 URLs for 3 models"), err


def test_model_and_base_url_take_lists(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``--model`` takes 1+ comma-separated names; ``--base-url`` one URL for all of them, or
    one per model; the environment variables read the same."""
    out = ["--out", str(tmp_path)]
    one = _options(*out, "--base-url", "http://127.0.0.1:18080", "--model", "local , local15")
    assert (one.base_urls, one.models) == ([A], ["local", "local15"])
    two = _options(*out, "--base-url", f"{A}, {B}/", "--model", "local,local15")
    assert (two.base_urls, two.models) == ([A, B], ["local", "local15"])
    monkeypatch.setenv("ROUNDTABLED_EVAL_BASE_URL", f"{A},{B}")
    monkeypatch.setenv("ROUNDTABLED_EVAL_MODEL", "local,local15")
    env = _options(*out)
    assert (env.base_urls, env.models) == ([A, B], ["local", "local15"])
    assert env.agents == ["seat-a", "seat-b", "seat-c"]
    assert env.identity()["model"] == ["local", "local15"]
    assert env.identity()["baseURL"] == [A, B]


def _seat(name: str, label: str) -> dict[str, Any]:
    return {
        "mode": "subagent",
        "description": f"Roundtable seat {name} on {label}",
        "prompt": provider.SEAT_PROMPT,
        "model": label,
        "permission": {"*": "deny"},
    }


def test_one_model_writes_the_configuration_and_run_options_it_wrote_before_mixed_panels(
    tmp_path: Path,
) -> None:
    """A one-model run's ``opencode.json`` is byte for byte what the run wrote before
    ``--model`` took lists, and its ``run.json`` options are the same plain strings, so a run
    directory of that time resumes."""
    opts = _options("--out", str(tmp_path), "--base-url", A, "--model", "local")
    seats = ["seat-a", "seat-b", "seat-c", *(f"seat-a-sample{i}" for i in (1, 2, 3))]
    before = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "local": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Local OpenAI-compatible server",
                "options": {"baseURL": A, "apiKey": "unused"},
                "models": {"local": {"name": "local", "limit": {"context": 16384, "output": 2048}}},
            }
        },
        "model": "local/local",
        "small_model": "local/local",
        "agent": {**{s: _seat(s, "local/local") for s in seats}, "title": {"disable": True}},
    }
    written = json.dumps(project_config(opts), indent=2) + "\n"
    assert written == json.dumps(before, indent=2) + "\n"
    assert opts.identity() == {  # the options of such a run's run.json, as written then
        "format": 2,
        "tasks": "arithmetic",
        "level": "medium",
        "seed": 0,
        "agents": ["seat-a", "seat-b", "seat-c"],
        "protocols": ["single", "vote", "debate", "adaptive", "council", "self-consistency"],
        "answerLine": "position",
        "model": "local",
        "baseURL": A,
        "outputLimit": 2048,
        "contextLimit": 16384,
        "scSeat": None,
    }


def test_two_urls_two_providers_seats_dealt_in_turn_samples_on_their_seat_s_model(
    tmp_path: Path,
) -> None:
    """``--base-url A,B --model local,local15``: a provider per URL (``local``, ``local-2``),
    seat 1 and 3 on the first model, seat 2 on the second, the default (the observer's) the
    first; self-consistency's copies of ``--sc-seat`` on that seat's model."""
    opts = _options(
        *("--out", str(tmp_path), "--base-url", f"{A},{B}", "--model", "local,local15"),
        *("--sc-seat", "seat-b", "--context-limit", "8192", "--output-limit", "512"),
    )
    cfg = project_config(opts)
    limit = {"context": 8192, "output": 512}
    assert cfg["provider"] == {
        "local": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Local OpenAI-compatible server",
            "options": {"baseURL": A, "apiKey": "unused"},
            "models": {"local": {"name": "local", "limit": limit}},
        },
        "local-2": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Local OpenAI-compatible server 2",
            "options": {"baseURL": B, "apiKey": "unused"},
            "models": {"local15": {"name": "local15", "limit": limit}},
        },
    }
    assert cfg["model"] == cfg["small_model"] == "local/local"
    models = {name: a["model"] for name, a in cfg["agent"].items() if "model" in a}
    assert models == {
        "seat-a": "local/local",
        "seat-b": "local-2/local15",
        "seat-c": "local/local",
        **dict.fromkeys(("seat-b-sample1", "seat-b-sample2", "seat-b-sample3"), "local-2/local15"),
    }
    assert cfg["agent"]["seat-b"] == _seat("seat-b", "local-2/local15")
    seats = local_seats(opts)
    assert provider.seats_line({a: seats[a] for a in opts.agents}) == (
        f"seat-a, seat-c on local/local at {A}; seat-b on local-2/local15 at {B}"
    )


def test_one_url_two_models_is_one_provider_listing_both(tmp_path: Path) -> None:
    """One URL serving two models: one provider ``local`` with both, the given ``--agents``
    dealt them in their order (4 seats: 1, 2, 1, 2); without self-consistency no copies."""
    opts = _options(
        *("--out", str(tmp_path), "--base-url", A, "--model", "m1,m2"),
        *("--agents", "pm,dev,rv,qa", "--protocols", "single,vote"),
    )
    cfg = project_config(opts)
    assert list(cfg["provider"]) == ["local"]
    assert list(cfg["provider"]["local"]["models"]) == ["m1", "m2"]
    assert cfg["provider"]["local"]["options"]["baseURL"] == A
    models = {name: a["model"] for name, a in cfg["agent"].items() if "model" in a}
    assert models == {"pm": "local/m1", "dev": "local/m2", "rv": "local/m1", "qa": "local/m2"}
    assert cfg["model"] == "local/m1"
    assert opts.identity()["baseURL"] == A and opts.identity()["model"] == ["m1", "m2"]
    seats = local_seats(opts)
    assert provider.seats_line(seats) == f"pm, rv on local/m1 at {A}; dev, qa on local/m2 at {A}"


def test_the_same_url_twice_is_one_provider_and_a_model_at_two_urls_two() -> None:
    same = provider.local_models([A, A], ["m1", "m2"])
    assert [m.provider for m in same] == ["local", "local"]
    twice = provider.local_models([A, B, A], ["m", "m", "n"])
    assert [m.label for m in twice] == ["local/m", "local-2/m", "local/n"]
    cfg = provider.providers_config(twice)
    assert {k: list(v["models"]) for k, v in cfg.items()} == {"local": ["m", "n"], "local-2": ["m"]}
    with pytest.raises(ValueError, match="2 base URLs for 3 models"):
        provider.local_models([A, B], ["m", "n", "o"])
