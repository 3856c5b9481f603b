"""Reported by a user: ``ROUNDTABLED_DEMO_MODEL=local scripts/demo`` (a local server's model name,
without ``--base-url``) started OpenCode and the daemon with ``"model": "local"`` and failed about
ten seconds later with the server's agent error (``--agents: agent 'pm' has no model and the
server has no default model``). Without a base URL the variable names one of your OpenCode
providers' models, ``provider/model``: anything else is refused before anything starts, one line
naming the variable and both forms it takes, exit code 2. With ``--base-url`` a bare name is the
served model's name, as before."""

from __future__ import annotations

import pytest

from .demo_cli import run_demo


@pytest.mark.parametrize("value", ["local", "anthropic/", "/claude", "qwen 2.5"])
def test_a_demo_model_without_a_provider_is_refused_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    run = run_demo(monkeypatch, capsys, env={"ROUNDTABLED_DEMO_MODEL": value})
    assert (run.code, run.ran_with) == (2, None)
    assert run.err == (
        f"Error: ROUNDTABLED_DEMO_MODEL = {value!r}; expected provider/model (a model of your "
        "OpenCode providers, e.g. anthropic/claude-sonnet-4-5), or a local server's model name "
        "with --base-url URL (or ROUNDTABLED_DEMO_BASE_URL)"
    )


def test_a_bare_model_name_with_a_base_url_names_the_served_model(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_demo(
        monkeypatch,
        capsys,
        "--base-url",
        "http://127.0.0.1:8080",
        env={"ROUNDTABLED_DEMO_MODEL": "local"},
    )
    assert run.code == 0 and run.ran_with is not None, run.err
    assert (run.ran_with.base_url, run.ran_with.model) == ("http://127.0.0.1:8080/v1", "local")


def test_a_provider_model_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_demo(monkeypatch, capsys, env={"ROUNDTABLED_DEMO_MODEL": "anthropic/claude-x"})
    assert run.code == 0 and run.ran_with is not None, run.err
