"""Reported by a user: ``scripts/demo --degraded --base-url http://127.0.0.1:8080/v1 --model
local`` ran a healthy debate on the local model: ``--degraded`` scripts dev's provider failing,
which only the offline scripted model does, and was silently ignored. It is now refused before
anything starts, one line naming both flags and why, exit code 2 (also with the model from
``ROUNDTABLED_DEMO_BASE_URL`` or ``ROUNDTABLED_DEMO_MODEL``). ``--transcript`` with ``--serve``
(which runs no debate, so writes no transcript) is refused the same way."""

from __future__ import annotations

import pytest

from .demo_cli import run_demo

WHY = (
    "Error: --degraded needs the offline scripted model (it scripts dev's provider failing on "
    "every turn), so it cannot be combined with "
)


def test_the_degraded_demo_on_a_real_model_is_refused_not_ignored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_demo(
        monkeypatch,
        capsys,
        "--degraded",
        "--base-url",
        "http://127.0.0.1:8080/v1",
        "--model",
        "local",
    )
    assert run.ran_with is None
    assert run.code == 2
    assert run.err == WHY + "--base-url (a real model); drop one of them"


@pytest.mark.parametrize(
    ("env", "source"),
    [
        (
            {
                "ROUNDTABLED_DEMO_BASE_URL": "http://127.0.0.1:8080/v1",
                "ROUNDTABLED_DEMO_MODEL": "m",
            },
            "ROUNDTABLED_DEMO_BASE_URL",
        ),
        ({"ROUNDTABLED_DEMO_MODEL": "anthropic/claude-sonnet-4-5"}, "ROUNDTABLED_DEMO_MODEL"),
    ],
)
def test_the_degraded_demo_on_a_model_from_the_environment_is_refused(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str],
    source: str,
) -> None:
    run = run_demo(monkeypatch, capsys, "--degraded", env=env)
    assert (run.code, run.ran_with) == (2, None)
    assert run.err == WHY + f"{source} (a real model); unset {source} or drop --degraded"


def test_the_degraded_demo_on_the_offline_model_still_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_demo(monkeypatch, capsys, "--degraded")
    assert run.code == 0 and run.ran_with is not None and run.ran_with.degraded, run.err


def test_a_transcript_with_serve_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_demo(monkeypatch, capsys, "--serve", "--transcript", "debate.md")
    assert (run.code, run.ran_with) == (2, None)
    assert run.err.startswith("Error: --transcript does not apply to --serve: it runs no debate")
