"""`ROUNDTABLED_SERVER_URL=http://127.0.0.1:notaport roundtabled doctor` used to end in a traceback
(ValueError from the URL's port). The configuration now refuses such a URL; doctor, given one
anyway (settings built past validation), reports it as a failed check with a fix."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from roundtabled.service import config as cfg
from roundtabled.service import doctor


def test_doctor_reports_a_server_url_with_a_bad_port_without_crashing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "HOME": str(tmp_path)}
    settings = cfg.Settings().model_copy(update={"server_url": "http://127.0.0.1:notaport"})
    # nothing listens on port 9: the daemon check fails too, honestly
    code = asyncio.run(doctor.run(settings, "http://127.0.0.1:9", env=env, cwd=tmp_path))
    out = capsys.readouterr().out
    assert code == 1
    assert "server_url 'http://127.0.0.1:notaport' is not a valid URL" in out
    assert "fix: set server_url" in out and "not checked (server_url invalid)" in out
