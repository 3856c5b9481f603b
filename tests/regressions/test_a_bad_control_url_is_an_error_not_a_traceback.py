"""Reported by a newcomer's trial: ``ROUNDTABLED_URL=garbage roundtabled list`` (also
``http://127.0.0.1:notaport``, ``ftp://x``) ended in an aiohttp ``InvalidUrlClientError``
traceback, and ``ROUNDTABLED_SERVER_URL=http://127.0.0.1:notaport`` was accepted by the
configuration until ``doctor`` crashed on it. Both are now errors naming the variable and the
expected form."""

from __future__ import annotations

from pathlib import Path

import pytest

from roundtabled.cli import main
from roundtabled.cli.client import EXIT_USAGE


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
