"""``roundtabled.service.install``: atomic, idempotent installation of the tool shims and observer
agent."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from roundtabled.engine.plugins import PLUGIN_VERSION
from roundtabled.errors import RoundtableError
from roundtabled.service import install

URL = "http://127.0.0.1:4747"
EXPECTED = [
    "tool/roundtable.ts",
    "tool/available_agents.ts",
    "agent/roundtable-observer.md",
    "plugin/roundtable-plugin.ts",
]


def _install(target: Path, url: str = URL, token: Path | None = None) -> list[Path]:
    return install.install_tools(
        target, control_url=url, token_file=token or Path("/home/u/.config/roundtabled/token")
    )


def _snapshot(target: Path) -> dict[str, tuple[bytes, int, int]]:
    return {
        p.relative_to(target).as_posix(): (p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns)
        for p in sorted(target.rglob("*"))
        if p.is_file()
    }


def test_installs_four_files_with_substituted_constants(tmp_path: Path) -> None:
    target = tmp_path / ".opencode"
    paths = _install(target, token=Path("/srv/rt/token"))
    assert [p.relative_to(target).as_posix() for p in paths] == EXPECTED
    for p in paths[:2]:
        text = p.read_text()
        assert install.read_constants(text) == {"url": URL, "tokenFile": "/srv/rt/token"}
        assert text.count(install.BEGIN) == 1 and text.count(install.END) == 1
        # the block is at the top, the package's placeholder is gone
        assert text.startswith(install.BEGIN)
        assert 'INSTALLED_TOKEN_FILE = ""' not in text
        assert "export default" in text
    agent = paths[2].read_text()
    assert agent.startswith("---\n")
    front, _, prompt = agent[4:].partition("\n---\n")
    assert "mode: subagent" in front and "hidden: true" in front
    assert '"*": deny' in front and "description:" in front
    assert prompt.startswith("You are the impartial roundtable observer.")
    plugin = paths[3].read_text()
    assert install.read_constants(plugin) == {"url": URL, "tokenFile": "/srv/rt/token"}
    assert plugin.startswith(install.BEGIN) and install.plugin_version(plugin) == PLUGIN_VERSION
    # OpenCode calls every exported function as a plugin: only the plugin is exported
    assert plugin.count("\nexport ") == 1 and "\nexport const RoundtablePlugin" in plugin


def test_files_are_0644_and_no_temp_files_remain(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        paths = _install(tmp_path / "t")
    finally:
        os.umask(old)
    for p in paths:
        assert stat.S_IMODE(p.stat().st_mode) == 0o644
    assert not [p for p in (tmp_path / "t").rglob("*.tmp")]


def test_idempotent(tmp_path: Path) -> None:
    target = tmp_path / ".opencode"
    first = _install(target)
    before = _snapshot(target)
    second = _install(target)
    assert first == second
    # same bytes, and not even rewritten (same inode and mtime): no reload churn in OpenCode
    assert _snapshot(target) == before


def test_reinstall_with_new_url_changes_only_the_block(tmp_path: Path) -> None:
    target = tmp_path / ".opencode"
    _install(target)
    old = (target / "tool/roundtable.ts").read_text()
    _install(target, url="http://127.0.0.1:5000/")
    new = (target / "tool/roundtable.ts").read_text()
    assert install.read_constants(new)["url"] == "http://127.0.0.1:5000"
    assert old.split(install.END, 1)[1] == new.split(install.END, 1)[1]


@pytest.mark.parametrize(
    "value", ['/a "quoted" path', "/ünïcode/tøken", "/back\\slash", "/line\u2028sep"]
)
def test_constant_block_round_trips_odd_paths(tmp_path: Path, value: str) -> None:
    [p, *_] = _install(tmp_path, token=Path(value))
    assert install.read_constants(p.read_text())["tokenFile"] == value


def test_crash_between_write_and_replace_leaves_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / ".opencode"
    _install(target)
    path = target / "tool/roundtable.ts"
    old = path.read_bytes()

    class Crash(BaseException):
        pass

    def crash(*_a: Any) -> None:
        raise Crash

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(Crash):
        _install(target, url="http://127.0.0.1:9999")
    # the visible file is the complete old one; the half-done temp file is cleaned up
    assert path.read_bytes() == old
    assert not list(target.rglob("*.tmp"))


def test_crash_before_fsync_never_exposes_a_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / ".opencode"

    def fail(_fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(install.InstallError, match=r"cannot write .*roundtable\.ts"):
        _install(target)
    assert not (target / "tool/roundtable.ts").exists()
    assert not list(target.rglob("*.tmp"))


def test_temp_file_lives_in_the_target_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, str]] = []
    real = os.replace

    def spy(src: Any, dst: Any) -> None:
        seen.append((str(src), str(dst)))
        assert Path(src).read_text()  # complete before it becomes visible
        real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    _install(tmp_path)
    assert len(seen) == 4
    for src, dst in seen:
        assert Path(src).parent == Path(dst).parent  # same filesystem → atomic rename
        assert Path(src).name.startswith(".")  # hidden, and not *.ts: never loaded as a tool


def test_target_not_a_directory(tmp_path: Path) -> None:
    blocker = tmp_path / ".opencode"
    blocker.write_text("I am a file")
    with pytest.raises(install.InstallError, match="not a directory"):
        _install(blocker)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "tool").write_text("file")
    with pytest.raises(install.InstallError, match="not a directory"):
        _install(tmp_path / "p")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_target_not_writable(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(install.InstallError, match="cannot write") as info:
            _install(ro / ".opencode")
        assert isinstance(info.value, RoundtableError)
    finally:
        ro.chmod(0o700)


def test_bad_control_url(tmp_path: Path) -> None:
    with pytest.raises(install.InstallError, match="control URL"):
        _install(tmp_path, url="127.0.0.1:4747")
    assert not (tmp_path / "tool").exists()


def test_tool_targets(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "HOME": str(tmp_path / "home")}
    assert install.tool_targets(None, True, env) == tmp_path / "cfg" / "opencode"
    assert install.tool_targets(tmp_path / "proj", False, env) == tmp_path / "proj" / ".opencode"
    assert install.tool_targets(tmp_path / "proj", True, env) == tmp_path / "cfg" / "opencode"


def test_stale_copy_in_plural_dir_is_removed_foreign_file_kept(tmp_path: Path) -> None:
    target = tmp_path / ".opencode"
    _install(target)
    (target / "tools").mkdir()
    (target / "agents").mkdir()
    (target / "tool/roundtable.ts").rename(target / "tools/roundtable.ts")  # an older layout
    (target / "tools/available_agents.ts").write_text("export default {} // the user's own")
    (target / "agent/roundtable-observer.md").rename(target / "agents/roundtable-observer.md")
    _install(target)
    assert not (target / "tools/roundtable.ts").exists()
    assert not (target / "agents/roundtable-observer.md").exists()
    assert (target / "tools/available_agents.ts").read_text().endswith("the user's own")


def test_installed_status(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "HOME": str(tmp_path / "home")}
    project = tmp_path / "proj"
    _install(project / ".opencode", token=Path("/t"))
    _install(tmp_path / "cfg" / "opencode", url="http://127.0.0.1:5555")
    st = install.installed_status(project, env, control_url=URL + "/")
    proj, glob = st["project"], st["global"]
    assert proj["path"] == str(project.resolve() / ".opencode")
    assert set(proj["tools"]) == set(install.TOOL_FILES)
    rt = proj["tools"]["roundtable.ts"]
    assert rt["url"] == URL and rt["tokenFile"] == "/t" and rt["ours"] and rt["urlMatches"]
    assert proj["observer"] is True
    assert glob["tools"]["available_agents.ts"]["urlMatches"] is False
    # without a current URL, the baked one is reported but not judged
    st = install.installed_status(project, env)
    assert st["project"]["tools"]["roundtable.ts"]["urlMatches"] is None
    # nothing installed
    empty = install.installed_status(tmp_path / "none", {"XDG_CONFIG_HOME": str(tmp_path / "x")})
    assert empty["project"]["tools"] == {} and empty["project"]["observer"] is False


def test_render_requires_the_block() -> None:
    with pytest.raises(install.InstallError):
        install.render_tool("export default {}", control_url=URL, token_file="/t")
    assert install.read_constants("no block") == {"url": None, "tokenFile": None}
