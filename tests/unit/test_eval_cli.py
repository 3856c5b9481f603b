"""``roundtabled eval`` flags: a bad one is one ``Error:`` line naming it, exit 2
(roundtabled/cli/evaluate.py); the provider configuration ``--base-url``/``--model`` write."""

from __future__ import annotations

from pathlib import Path

import pytest

from roundtabled.cli import main
from roundtabled.cli.evaluate import options_from
from roundtabled.cli.parser import build_parser
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
