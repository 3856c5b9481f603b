"""Reported by a user on a slow local model: ``scripts/demo --base-url URL --model local
--turn-timeout 900 --output-limit 512`` answered ``unrecognized arguments`` (the demo had neither
flag, though ``roundtabled start`` has ``--turn-timeout`` and ``roundtabled eval``
``--output-limit``), so every turn was cut at the daemon's 300 s and each reply could ask for
2,048 tokens. The demo now takes ``--turn-timeout`` (its daemon's ``turn_timeout``, checked by
``start``'s rule and message) and, with ``--base-url``, ``--output-limit`` and
``--context-limit`` (the local model's ``limit.output`` / ``limit.context``, checked by
``eval``'s rule and messages); a bad value, or a limit without ``--base-url``, is one line
naming the flag, exit code 2, before anything starts."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.service.config import load_settings
from tests.e2e import cli_helpers

from .demo_cli import run_demo

LOCAL = ("--base-url", "http://127.0.0.1:8080/v1", "--model", "local")
SLOW = ("--turn-timeout", "900", "--output-limit", "512", "--context-limit", "4096")
"""The flags a slow local model takes."""


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["--turn-timeout", "0.5"],
            "Error: --turn-timeout must be a number of seconds from 1 to 86400, got 0.5",
        ),
        (
            ["--turn-timeout", "nan"],
            "Error: --turn-timeout must be a number of seconds from 1 to 86400, got nan",
        ),
        (
            ["--turn-timeout", "soon"],
            "Error: --turn-timeout must be a number of seconds from 1 to 86400, got 'soon'",
        ),
        ([*LOCAL, "--output-limit", "10"], "Error: --output-limit must be 64-65536, got 10"),
        (
            [*LOCAL, "--output-limit", "lots"],
            "Error: --output-limit must be a whole number 64-65536, got 'lots'",
        ),
        (
            [*LOCAL, "--output-limit", "20000"],
            "Error: --output-limit (20000) must be below --context-limit (16384): the context "
            "holds the prompt and the reply",
        ),
        (
            ["--output-limit", "512"],
            "Error: --output-limit goes with --base-url (the demo writes them into the local "
            "model's provider configuration; OpenCode's own providers set their models' limits)",
        ),
    ],
)
def test_a_bad_or_inapplicable_limit_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    line: str,
) -> None:
    run = run_demo(monkeypatch, capsys, *argv)
    assert (run.code, run.ran_with) == (2, None), run.err
    assert run.err == line


def test_the_flags_reach_the_demo(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_demo(
        monkeypatch,
        capsys,
        *LOCAL,
        *SLOW,
    )
    assert run.code == 0 and run.ran_with is not None, run.err
    args = run.ran_with
    assert (args.turn_timeout, args.output_limit, args.context_limit) == (900.0, 512, 4096)


async def test_the_demo_on_a_slow_local_model_writes_the_limits_it_was_given(
    tmp_path: Path,
) -> None:
    """The whole demo on the scripted model standing in for the local server: its daemon's
    configuration has the turn timeout, the written provider the reply and context limits."""
    llm = ScriptedLLM()
    await llm.start()
    work = tmp_path / "work"
    env = cli_helpers.user_shell_env()
    env["TMPDIR"] = str(tmp_path)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "roundtabled.demo",
            "--base-url",
            llm.url,
            "--model",
            "local",
            *SLOW,
            "--workdir",
            str(work),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 240)
    finally:
        await llm.stop()
    text = out.decode()
    assert proc.returncode == 0, text
    assert "replies up to 512 tokens, context 4096" in text
    assert [r for r in llm.requests if r.kind == "turn"], text
    settings = load_settings(
        config_file=work / "roundtabled-config" / "roundtabled" / "config.toml"
    )
    assert settings.turn_timeout == 900.0
    written = json.loads((work / "opencode" / "project" / "opencode.json").read_text())
    model = written["provider"]["local"]["models"]["local"]
    assert model["limit"] == {"context": 4096, "output": 512}
