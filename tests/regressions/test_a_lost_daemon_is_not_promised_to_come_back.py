"""With the demo's daemon gone for good, ``roundtabled watch SES`` ended with "the roundtable
goes on when it is back": nothing brings a stopped demo's daemon back. What a follower can say
is that the roundtable resumes if roundtabled starts again with the same state."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from roundtabled.cli.client import CliError, ControlClient
from roundtabled.cli.follow import follow

SES = "ses_gone000000000001"


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens there


async def test_watch_without_its_daemon_promises_nothing(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t\n")
    async with ControlClient(f"http://127.0.0.1:{_dead_port()}", token) as cc:
        with pytest.raises(CliError) as exc:
            await follow(cc, SES, colors={}, reattach_s=0.2)
    said = str(exc.value)
    assert "goes on when it is back" not in said
    assert said == (
        "Error: roundtabled did not come back within 0.2 s; if roundtabled starts again with the "
        "same state (its service restarts it, or you do), it resumes the roundtable: "
        f"roundtabled watch {SES}"
    )
