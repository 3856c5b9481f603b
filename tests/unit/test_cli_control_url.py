"""The command line's control URL and entry point without a daemon: a bad ``ROUNDTABLED_URL``
or ``server_url`` is an error naming it (not an aiohttp traceback), a ``unix:/path`` control
host is reached over the socket, Ctrl-C while loading exits 130 quietly, a mistyped flag gets
its command's usage and a ``did you mean``, and one session id check for every ``SES``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp import web

from roundtabled import config as cfg
from roundtabled.cli import EXIT_USAGE, main
from roundtabled.cli.client import ControlClient, control_url


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    for name in ("ROUNDTABLED_URL", "ROUNDTABLED_CONTROL_HOST", "ROUNDTABLED_SERVER_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.mark.parametrize("url", ["garbage", "http://127.0.0.1:notaport", "ftp://x", "unix:rel"])
@pytest.mark.parametrize("command", [["list"], ["status", "ses_abcdef12"], ["doctor"]])
def test_a_bad_roundtabled_url_is_an_error_naming_it_not_a_traceback(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    url: str,
    command: list[str],
) -> None:
    monkeypatch.setenv("ROUNDTABLED_URL", url)
    assert main(command) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"Error: ROUNDTABLED_URL = {url!r}; expected http://host:port" in err


@pytest.mark.parametrize("url", ["http://127.0.0.1:notaport", "http://127.0.0.1:99999"])
def test_a_server_url_with_a_bad_port_is_refused_by_the_config(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    monkeypatch.setenv("ROUNDTABLED_SERVER_URL", url)
    assert main(["config"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"ROUNDTABLED_SERVER_URL = {url!r}" in err
    assert "expected an http:// or https:// URL such as http://127.0.0.1:4096" in err


async def test_a_unix_socket_control_host_is_reached_over_the_socket(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = home / "rt.sock"
    token = home / "token"
    token.write_text("t0k\n")
    monkeypatch.setenv("ROUNDTABLED_CONTROL_HOST", f"unix:{sock}")
    monkeypatch.setenv("ROUNDTABLED_TOKEN_FILE", str(token))
    seen: list[str] = []

    async def ping(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/v1/ping", ping)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, str(sock)).start()
    try:
        settings = cfg.load_settings(None)
        url = control_url(settings)
        assert url == f"unix:{sock}"
        async with ControlClient(url, settings.token_file) as cc:
            assert await cc.call("GET", "/v1/ping") == {"ok": True}
    finally:
        await runner.cleanup()
    assert seen == ["Bearer t0k"]
    monkeypatch.setenv("ROUNDTABLED_URL", f"unix:{sock}")
    assert control_url(settings) == f"unix:{sock}"


def test_ctrl_c_while_the_cli_loads_exits_130_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import roundtabled.cli as cli

    def interrupted(argv: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_main", interrupted)
    assert main(["watch", "ses_abcdef12"]) == 130
    assert "Traceback" not in capsys.readouterr().err


def test_the_entry_module_loads_without_the_heavy_imports() -> None:
    # The console script imports roundtabled.cli before main runs; a Ctrl-C then is outside
    # main's handler, so that import must not load pydantic or aiohttp.
    import subprocess
    import sys

    code = "import sys, roundtabled.cli; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True
    ).stdout
    modules = json.loads(out)
    assert "aiohttp" not in modules and "pydantic" not in modules


def test_a_mistyped_flag_gets_the_command_usage_and_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["start", "--agnets", "pm,dev", "x"])
    assert exc.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("usage: roundtabled start")
    assert "unrecognized arguments: --agnets; did you mean --agents?" in err


@pytest.mark.parametrize("command", ["status", "watch", "cancel", "export"])
def test_every_ses_argument_gets_the_same_check_and_message(
    home: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert main([command, "ses_nope"]) == EXIT_USAGE
    assert main(["extend", "ses_nope", "more"]) == EXIT_USAGE
    errs = capsys.readouterr().err.splitlines()
    expected = (
        "Error: SES must be a session id: 'ses_' then 6 to 64 letters or digits "
        "(as printed by start and list), got 'ses_nope'"
    )
    assert errs == [expected, expected]
