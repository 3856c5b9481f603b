"""What the command line says around a daemon's refusals, through the real ``main`` against a
small aiohttp server on a unix socket (the ``control_host = unix:/path`` route) that answers as
the daemon's control API does (docs/control-api.md): ``extend`` of an active roundtable points
at ``cancel``, ``cancel`` of an ended one says how it ended, ``start`` and ``agents`` name the
project directory they used."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from roundtabled.cli import main
from roundtabled.cli.client import EXIT_OK, EXIT_USAGE

SES = "ses_abcdef12"


def _app() -> web.Application:
    async def create(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        if body.get("sessionID"):
            msg = f"roundtable {SES} is still active (round 1/2); wait for it to conclude"
            return web.json_response({"error": msg, "field": "sessionID"}, status=400)
        return web.json_response({"error": "unknown agent 'zz'", "field": "agents"}, status=400)

    async def agents(request: web.Request) -> web.Response:
        return web.json_response({"agents": [], "presets": [], "text": "Available agents: pm"})

    async def cancel(request: web.Request) -> web.Response:
        ses = request.match_info["ses"]
        msg = f"no active roundtable {ses!r}"
        return web.json_response({"error": msg, "field": "sessionID"}, status=400)

    async def status(request: web.Request) -> web.Response:
        ses = request.match_info["ses"]
        if ses != SES:
            msg = f"no roundtable {ses!r} is known to this daemon"  # the daemon's words
            return web.json_response({"error": msg, "field": "sessionID"}, status=404)
        return web.json_response({"sessionID": SES, "phase": "cancelled", "endReason": "by user"})

    app = web.Application()
    app.router.add_post("/v1/roundtables", create)
    app.router.add_get("/v1/agents", agents)
    app.router.add_post("/v1/roundtables/{ses}/cancel", cancel)
    app.router.add_get("/v1/roundtables/{ses}", status)
    return app


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    sock = tmp_path / "rt.sock"
    (tmp_path / "token").write_text("t\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv("ROUNDTABLED_URL", raising=False)
    monkeypatch.setenv("ROUNDTABLED_CONTROL_HOST", f"unix:{sock}")
    monkeypatch.setenv("ROUNDTABLED_TOKEN_FILE", str(tmp_path / "token"))
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(_app())
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.UnixSite(runner, str(sock)).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield sock
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_extend_of_an_active_roundtable_says_how_to_cancel_it(
    daemon: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["extend", SES, "more"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "still active" in err
    assert err.rstrip().endswith(f"wait for it to conclude, or cancel it: roundtabled cancel {SES}")


def test_cancel_of_an_ended_roundtable_says_how_it_ended(
    daemon: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cancel", SES]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"roundtable {SES} already ended (cancelled: by user); nothing to cancel" in err
    # unknown to the daemon altogether: its own refusal stays
    assert main(["cancel", "ses_unknown1"]) == EXIT_USAGE
    # An unknown id: the words of `status`, `watch` and `export`, not the cancel route's own.
    assert capsys.readouterr().err == (
        "Error: SES: no roundtable 'ses_unknown1' is known to this daemon\n"
    )


def test_start_and_agents_name_the_project_directory(
    daemon: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["start", "--agents", "zz", "topic"])
    err = capsys.readouterr().err
    assert err.startswith("Error:") and "Project:" not in err  # a refusal is one error line
    assert main(["agents", "--directory", str(tmp_path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"Project: {tmp_path} (--directory)" in out.splitlines()
    main(["start", "-q", "--agents", "zz", "topic"])
    assert "Project:" not in capsys.readouterr().err
