"""``roundtabled.engine.plugins``: which reports of the roundtable plugin the daemon trusts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from roundtabled.engine.plugins import PLUGIN_VERSION, PluginRegistry, parse_report
from roundtabled.errors import ValidationFailed

SERVER = "http://127.0.0.1:4096"


def _report(directory: str, url: str = "http://127.0.0.1:4096/", version: str = PLUGIN_VERSION):
    return parse_report({"version": version, "directory": directory, "serverUrl": url}, 1)


def test_a_report_from_the_daemons_server_is_trusted_for_its_directory(tmp_path: Path) -> None:
    reg = PluginRegistry(SERVER, lambda: 0)
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    assert reg.register(_report(str(tmp_path))) == (True, "")
    assert reg.version_for(str(tmp_path)) == PLUGIN_VERSION
    assert reg.version_for(str(link)) == PLUGIN_VERSION  # the same directory by another path
    assert reg.version_for(None) is None and reg.version_for("/elsewhere") is None
    assert reg.snapshot() == [{"directory": str(tmp_path), "version": PLUGIN_VERSION, "at": 1}]


def test_another_server_or_version_is_refused_and_forget_drops_reports(tmp_path: Path) -> None:
    reg = PluginRegistry(SERVER, lambda: 0)
    ok, why = reg.register(_report(str(tmp_path), url="http://127.0.0.1:5000/"))
    assert not ok and "another OpenCode server" in why
    ok, why = reg.register(_report(str(tmp_path), version="0"))
    assert not ok and "install-tool" in why
    assert reg.version_for(str(tmp_path)) is None
    reg.register(_report(str(tmp_path), url=""))  # a release that gives no serverUrl
    reg.register(_report("/other"))
    reg.forget(str(tmp_path))
    assert reg.version_for(str(tmp_path)) is None and reg.version_for("/other") is not None
    reg.forget()
    assert reg.version_for("/other") is None and reg.snapshot() == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], "body"),
        ({"directory": "/x"}, "version"),
        ({"version": "1", "directory": "x"}, "directory"),
        ({"version": "1", "directory": "/x", "serverUrl": 5}, "serverUrl"),
        ({"version": "1", "directory": "/x", "extra": 1}, "extra"),
    ],
)
def test_a_malformed_report_names_its_field(body: object, field: str) -> None:
    with pytest.raises(ValidationFailed) as exc:
        parse_report(body, 0)
    assert exc.value.field == field and str(exc.value).startswith("Error:")


async def test_wait_for_returns_on_the_report_or_after_the_wait(tmp_path: Path) -> None:
    reg = PluginRegistry(SERVER, lambda: 0)
    assert await reg.wait_for(str(tmp_path), 0.05) is None
    waiter = asyncio.ensure_future(reg.wait_for(str(tmp_path), 10))
    await asyncio.sleep(0)
    reg.register(_report(str(tmp_path)))
    assert await asyncio.wait_for(waiter, 5) == PLUGIN_VERSION
