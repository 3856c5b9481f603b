"""``roundtabled.engine.plugins``: which reports of the roundtable plugin the daemon trusts."""

from __future__ import annotations

import asyncio
from importlib import resources
from pathlib import Path

import pytest

from roundtabled.engine.plugins import (
    PLUGIN_VERSION,
    PLUGIN_VERSION_V2,
    PluginRegistry,
    PluginReport,
    parse_report,
)
from roundtabled.errors import ValidationFailed
from roundtabled.opencode import v1_wire

SERVER = "http://127.0.0.1:4096"


def _report(directory: str, url: str = "http://127.0.0.1:4096/", version: str = PLUGIN_VERSION):
    return parse_report({"version": version, "directory": directory, "serverUrl": url}, 1)


def test_a_report_from_the_daemons_server_is_trusted_for_its_directory(tmp_path: Path) -> None:
    reg = PluginRegistry(lambda: 0)
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    assert reg.register(_report(str(tmp_path))) == (True, "")
    assert reg.version_for(str(tmp_path)) == PLUGIN_VERSION
    assert reg.version_for(str(link)) == PLUGIN_VERSION  # the same directory by another path
    assert reg.version_for(None) is None and reg.version_for("/elsewhere") is None
    assert reg.snapshot() == [{"directory": str(tmp_path), "version": PLUGIN_VERSION, "at": 1}]


def test_another_version_is_refused_and_forget_drops_reports(tmp_path: Path) -> None:
    reg = PluginRegistry(lambda: 0)
    ok, why = reg.register(_report(str(tmp_path), version="0"))
    assert not ok and "install-tool" in why
    assert reg.version_for(str(tmp_path)) is None
    reg.register(_report(str(tmp_path), url=""))  # a release that gives no serverUrl
    reg.register(_report("/other"))
    reg.forget(str(tmp_path))
    assert reg.version_for(str(tmp_path)) is None and reg.version_for("/other") is not None
    reg.forget()
    assert reg.version_for("/other") is None and reg.snapshot() == []


async def test_the_server_url_is_no_identity_the_server_s_answer_is(tmp_path: Path) -> None:
    """A report naming another URL (the daemon reaches the server through a proxy or a tunnel)
    is trusted when the daemon's own connection confirms the plugin runs there, and one naming
    the daemon's own URL is refused when it does not (another server in the same directory)."""
    server = _Server(loaded=True)
    reg = PluginRegistry(lambda: 0, verify=server)
    assert reg.register(_report(str(tmp_path), url="http://10.0.0.7:4096/")) == (True, "")
    assert await reg.wait_for(str(tmp_path), 5) == PLUGIN_VERSION
    other = _Server(loaded=False)
    reg = PluginRegistry(lambda: 0, verify=other)
    reg.register(_report(str(tmp_path), url=SERVER))
    await reg.checked()
    assert reg.version_for(str(tmp_path)) is None and other.asked == [str(tmp_path)]


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
    reg = PluginRegistry(lambda: 0)
    assert await reg.wait_for(str(tmp_path), 0.05) is None
    waiter = asyncio.ensure_future(reg.wait_for(str(tmp_path), 10))
    await asyncio.sleep(0)
    reg.register(_report(str(tmp_path)))
    assert await asyncio.wait_for(waiter, 5) == PLUGIN_VERSION


class _Server:
    """``verify`` of a registry: answers from ``loaded`` once ``gate`` opens (a check in flight
    while the test drops the reports)."""

    def __init__(self, loaded: bool) -> None:
        self.loaded = loaded
        self.gate = asyncio.Event()
        self.gate.set()
        self.asked: list[str] = []

    async def __call__(self, report: PluginReport) -> bool:
        self.asked.append(report.directory)
        await self.gate.wait()
        return self.loaded


async def test_a_first_report_is_trusted_only_once_the_server_lists_the_plugin(
    tmp_path: Path,
) -> None:
    server = _Server(loaded=True)
    reg = PluginRegistry(lambda: 0, verify=server)
    assert reg.register(_report(str(tmp_path))) == (True, "")
    assert reg.version_for(str(tmp_path)) is None  # pending: the server is asked first
    assert await reg.wait_for(str(tmp_path), 5) == PLUGIN_VERSION
    reg.register(_report(str(tmp_path)))  # a heartbeat of a trusted directory: not asked again
    assert server.asked == [str(tmp_path)]


async def test_a_report_from_an_instance_that_did_not_load_the_plugin_is_refused(
    tmp_path: Path,
) -> None:
    # What a disposed instance's plugin does: its heartbeat goes on, the new instance has none.
    server = _Server(loaded=False)
    reg = PluginRegistry(lambda: 0, verify=server)
    reg.register(_report(str(tmp_path)))
    await reg.checked()
    assert reg.version_for(str(tmp_path)) is None
    reg.register(_report(str(tmp_path)))  # every later report is checked again
    await reg.checked()
    assert reg.version_for(str(tmp_path)) is None and len(server.asked) == 2


async def test_a_check_that_began_before_a_drop_is_void(tmp_path: Path) -> None:
    server = _Server(loaded=True)
    server.gate.clear()
    reg = PluginRegistry(lambda: 0, verify=server)
    reg.register(_report(str(tmp_path)))
    await asyncio.sleep(0)
    reg.forget(str(tmp_path))  # the instance was disposed while the server was asked
    server.gate.set()
    await reg.checked()
    assert reg.version_for(str(tmp_path)) is None


async def test_a_check_the_server_cannot_answer_trusts_nothing(tmp_path: Path) -> None:
    async def unreachable(report: PluginReport) -> bool:
        raise OSError("connection refused")

    reg = PluginRegistry(lambda: 0, verify=unreachable)
    reg.register(_report(str(tmp_path)))
    await reg.checked()
    assert reg.version_for(str(tmp_path)) is None


def test_the_plugin_s_mark_in_a_config_is_read_and_the_plugin_sets_the_same_one() -> None:
    # What OpenCode 1.18.33's GET /config answers once the plugin's config hook ran in that
    # instance; a server that only lists the file (--pure) lists it under `plugin`, unmarked.
    marked = {
        "plugin": ["file:///p/.opencode/plugin/roundtable-plugin.ts"],
        "watcher": {"ignore": ["node_modules/**", v1_wire.PLUGIN_MARK]},
    }
    assert v1_wire.plugin_ran(marked)
    assert not v1_wire.plugin_ran({"plugin": marked["plugin"]})
    assert not v1_wire.plugin_ran({"watcher": {"ignore": "x"}}) and not v1_wire.plugin_ran(None)
    shipped = (resources.files("roundtabled") / "tools" / "roundtable-plugin.ts").read_text()
    assert f'const PLUGIN_MARK = "{v1_wire.PLUGIN_MARK}"' in shipped
    assert f'const PLUGIN_VERSION = "{PLUGIN_VERSION}"' in shipped


async def test_a_reconnect_checks_each_trusted_report_again(tmp_path: Path) -> None:
    server = _Server(loaded=True)
    reg = PluginRegistry(lambda: 0, verify=server)
    reg.register(_report(str(tmp_path)))
    reg.register(_report("/other"))
    await reg.checked()
    server.loaded = False  # the server restarted without the plugin
    server.gate.clear()
    reg.recheck()
    assert reg.version_for(str(tmp_path)) is None  # untrusted while it is checked
    reg.recheck()  # a second reconnect during the check: the first check is void, a new one runs
    server.gate.set()
    await reg.checked()
    assert reg.version_for(str(tmp_path)) is None and reg.version_for("/other") is None
    assert len(server.asked) == 6
    server.loaded = True
    reg.recheck()  # nothing trusted: nothing to check
    await reg.checked()
    assert len(server.asked) == 6


async def test_the_2x_registry_trusts_the_2x_plugin_protocol_only_once_the_server_lists_it(
    tmp_path: Path,
) -> None:
    """The 2.x shell's registry (``speaks``: the 2.x plugin protocol) refuses the 1.x plugin's
    version and any other 2.x one, naming the 2.x install; a report of its own version is
    trusted once ``verify`` (``GET /api/plugin`` on 2.x) says the plugin runs there, and a
    recheck (a reconnect) drops it until the server confirms it again."""
    server = _Server(loaded=True)
    reg = PluginRegistry(
        lambda: 0,
        verify=server,
        speaks=PLUGIN_VERSION_V2,
        install="roundtabled install-tool --opencode 2",
    )
    for other in (PLUGIN_VERSION, "v2.0"):
        ok, why = reg.register(_report(str(tmp_path), version=other))
        assert not ok and "`roundtabled install-tool --opencode 2`" in why, why
        assert repr(PLUGIN_VERSION_V2) in why
    assert reg.register(_report(str(tmp_path), version=PLUGIN_VERSION_V2)) == (True, "")
    assert await reg.wait_for(str(tmp_path), 5) == PLUGIN_VERSION_V2
    server.loaded = False
    reg.recheck()
    await reg.checked()
    assert reg.version_for(str(tmp_path)) is None
    assert PLUGIN_VERSION_V2 != PLUGIN_VERSION
