"""Field fault (``roundtabled eval --agents pm,dev,rv --limit 1 --out o1`` with no server and no
daemon running): standard error read

    eval: report o1/report.md
    Error: cannot reach the OpenCode server at http://127.0.0.1:4096: GET /global/health: …

— an empty report written and named before the error, as if the run had measured something.
With the server up and the daemon down it went further: it created the run's parent session and
printed its plan before the first question failed. Now the daemon and the server are reached
before anything is written or printed: the error is the only line (exit 1, as for the other
commands), no run directory is made and no session is created."""

from __future__ import annotations

from pathlib import Path

import pytest

from roundtabled.cli import main
from roundtabled.cli.client import EXIT_ERROR, CliError
from roundtabled.eval.options import EvalOptions, Target
from roundtabled.eval.run import run_eval
from roundtabled.offline.opencode_server import free_port
from tests.e2e.conftest import RT
from tests.e2e.eval_helpers import AGENTS, target


def test_with_nothing_running_the_error_is_the_only_line(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROUNDTABLED_CONTROL_PORT", str(free_port()))
    monkeypatch.setenv("ROUNDTABLED_SERVER_URL", f"http://127.0.0.1:{free_port()}")
    out = home / "o1"
    code = main(["eval", "--agents", ",".join(AGENTS), "--limit", "1", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_ERROR
    assert len(err) == 1 and err[0].startswith("Error: roundtabled is not running"), err
    assert not out.exists()


async def test_with_the_daemon_or_the_server_down_nothing_is_written_or_created(
    rt: RT, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = EvalOptions(agents=AGENTS, out=tmp_path / "run", level="easy", count=1)
    up = target(rt)
    no_daemon = Target(**{**up.__dict__, "control_url": f"http://127.0.0.1:{free_port()}"})
    no_server = Target(**{**up.__dict__, "server_url": f"http://127.0.0.1:{free_port()}"})
    sessions = await rt.oc("GET", "/session")
    for down, why in (
        (no_daemon, "Error: roundtabled is not running at"),
        (no_server, "Error: cannot reach the OpenCode server at"),
    ):
        with pytest.raises(CliError) as failed:
            await run_eval(opts, down)
        assert str(failed.value).startswith(why) and failed.value.code == EXIT_ERROR
        assert capsys.readouterr().err == ""  # main prints the error, and nothing came before
        assert not opts.out.exists()
    assert await rt.oc("GET", "/session") == sessions
