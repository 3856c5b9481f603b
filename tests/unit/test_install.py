"""``roundtabled.service.install``: atomic, idempotent installation of the control module, the
tool shims, the observer agent and the plugin."""

from __future__ import annotations

import os
import re
import stat
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from roundtabled.engine.plugins import PLUGIN_VERSION
from roundtabled.errors import RoundtableError
from roundtabled.service import install

URL = "http://127.0.0.1:4747"
EXPECTED = [
    "roundtabled/control.ts",
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


def test_installs_five_files_with_the_constants_in_the_control_module_only(
    tmp_path: Path,
) -> None:
    target = tmp_path / ".opencode"
    paths = _install(target, token=Path("/srv/rt/token"))
    assert [p.relative_to(target).as_posix() for p in paths] == EXPECTED
    assert paths == install.install_paths(target)
    control = paths[0].read_text()
    assert install.read_constants(control) == {"url": URL, "tokenFile": "/srv/rt/token"}
    assert control.count(install.BEGIN) == 1 and control.count(install.END) == 1
    # the block is at the top, the package's placeholder is gone
    assert control.startswith(install.BEGIN)
    assert 'INSTALLED_TOKEN_FILE = ""' not in control
    # functions only: no tool definition, nothing OpenCode would take for a tool or a plugin
    assert "export default" not in control
    exports = re.findall(r"^export .*", control, re.M)
    assert len(exports) == 5 and all(re.match(r"export (async )?function ", e) for e in exports)
    for p in (*paths[1:3], paths[4]):
        text = p.read_text()
        # copied as shipped: they read the URL and the token file from the control module
        assert text == _shipped(p.name)
        assert install.BEGIN not in text and f'from "{install.CONTROL_IMPORT}"' in text
        assert install.read_constants(text) == {"url": None, "tokenFile": None}
    for p in paths[1:3]:
        assert "export default" in p.read_text()
    agent = paths[3].read_text()
    assert agent.startswith("---\n")
    front, _, prompt = agent[4:].partition("\n---\n")
    assert "mode: subagent" in front and "hidden: true" in front
    assert '"*": deny' in front and "description:" in front
    assert prompt.startswith("You are the impartial roundtable observer.")
    plugin = paths[4].read_text()
    assert install.plugin_version(plugin) == PLUGIN_VERSION
    # OpenCode calls every exported function as a plugin: only the plugin is exported
    assert plugin.count("\nexport ") == 1 and "\nexport const RoundtablePlugin" in plugin


def _shipped(name: str) -> str:
    return (resources.files("roundtabled") / "tools" / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", [install.CONTROL_FILE, *install.TOOL_FILES, *install.PLUGIN_FILES])
def test_the_shipped_typescript_imports_built_ins_and_the_control_module_only(name: str) -> None:
    """An offline server cannot npm-install anything (install.py's docstring): every static
    import is a Bun/Node built-in or, from a shim or the plugin, the control module."""
    text = _shipped(name)
    specs = re.findall(r'^import [^\n]* from "([^"]+)"', text, re.M)
    assert specs and all(s.startswith("node:") or s == install.CONTROL_IMPORT for s in specs)
    assert len(specs) == len(re.findall(r"^import ", text, re.M))
    assert (install.CONTROL_IMPORT in specs) == (name != install.CONTROL_FILE)


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


def test_reinstall_with_new_url_rewrites_the_control_module_only(tmp_path: Path) -> None:
    target = tmp_path / ".opencode"
    _install(target)
    old = (target / "roundtabled/control.ts").read_text()
    before = _snapshot(target)
    _install(target, url="http://127.0.0.1:5000/")
    new = (target / "roundtabled/control.ts").read_text()
    assert install.read_constants(new)["url"] == "http://127.0.0.1:5000"
    assert old.split(install.END, 1)[1] == new.split(install.END, 1)[1]
    after = _snapshot(target)
    assert {k for k in after if after[k] != before[k]} == {"roundtabled/control.ts"}


def test_reinstall_over_the_layout_before_the_control_module(tmp_path: Path) -> None:
    """A shim or plugin that still carries the block (installed before ``control.ts``) is
    replaced by the shipped one, after the control module is in place."""
    target = tmp_path / ".opencode"
    for rel in EXPECTED[1:]:
        if rel.endswith(".ts"):
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            (target / rel).write_text(_old_layout(Path(rel).name))
    _install(target)
    for rel in EXPECTED[1:]:
        assert install.BEGIN not in (target / rel).read_text()
    assert install.read_constants((target / "roundtabled/control.ts").read_text())["url"] == URL


def _old_layout(name: str, url: str = "http://127.0.0.1:4000", token: str = "/old/token") -> str:
    """A shim or the plugin as installed before ``control.ts``: its own block at the top."""
    return install.render_tool(
        f"{install.BEGIN}\n{install.END}\n" + _shipped(name), control_url=url, token_file=token
    )


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
    # the control module is written first: no shim is ever on disk without it
    with pytest.raises(install.InstallError, match=r"cannot write .*roundtabled/control\.ts"):
        _install(target)
    assert not (target / "tool/roundtable.ts").exists()
    assert not list(target.rglob("*.ts"))
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
    assert len(seen) == len(EXPECTED)
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
    control = str(project.resolve() / ".opencode" / "roundtabled" / "control.ts")
    assert proj["control"] == {"path": control, "url": URL, "tokenFile": "/t"}
    assert set(proj["tools"]) == set(install.TOOL_FILES)
    rt = proj["tools"]["roundtable.ts"]
    assert rt["url"] == URL and rt["tokenFile"] == "/t" and rt["ours"] and rt["urlMatches"]
    assert rt["needsControl"] is True
    assert proj["plugin"]["url"] == URL and proj["plugin"]["version"] == PLUGIN_VERSION
    assert proj["observer"] is True
    assert glob["tools"]["available_agents.ts"]["urlMatches"] is False
    # without a current URL, the baked one is reported but not judged
    st = install.installed_status(project, env)
    assert st["project"]["tools"]["roundtable.ts"]["urlMatches"] is None
    # nothing installed
    empty = install.installed_status(tmp_path / "none", {"XDG_CONFIG_HOME": str(tmp_path / "x")})
    assert empty["project"]["tools"] == {} and empty["project"]["observer"] is False
    assert empty["project"]["control"] is None and empty["project"]["plugin"] is None


def test_installed_status_without_the_control_module_and_of_the_layout_before_it(
    tmp_path: Path,
) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "HOME": str(tmp_path / "home")}
    project = tmp_path / "proj"
    target = project / ".opencode"
    _install(target)
    (target / "roundtabled/control.ts").unlink()
    proj = install.installed_status(project, env, control_url=URL)["project"]
    assert proj["control"] is None
    rt = proj["tools"]["roundtable.ts"]
    assert rt["needsControl"] and rt["ours"] and rt["url"] is None and rt["urlMatches"] is None
    assert proj["plugin"]["needsControl"] and proj["plugin"]["url"] is None
    # the layout before it: each file has its own block, which is what it uses
    (target / "tool/roundtable.ts").write_text(_old_layout("roundtable.ts"))
    (target / "plugin/roundtable-plugin.ts").write_text(_old_layout("roundtable-plugin.ts"))
    proj = install.installed_status(project, env, control_url=URL)["project"]
    rt = proj["tools"]["roundtable.ts"]
    assert rt["url"] == "http://127.0.0.1:4000" and rt["tokenFile"] == "/old/token"
    assert rt["ours"] and not rt["needsControl"] and rt["urlMatches"] is False
    assert proj["plugin"]["url"] == "http://127.0.0.1:4000"
    assert not proj["plugin"]["needsControl"]


def test_render_requires_the_block() -> None:
    with pytest.raises(install.InstallError):
        install.render_tool("export default {}", control_url=URL, token_file="/t")
    assert install.read_constants("no block") == {"url": None, "tokenFile": None}
