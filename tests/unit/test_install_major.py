"""``roundtabled install-tool``'s OpenCode major (docs/plugin.md "OpenCode 2.x"): ``--opencode``
validation, the choice (flag, detected server, default), what each major writes, and the lines
about the other major's files (install-tool and doctor). The 2.x files on the real binary:
tests/contract/test_v2_plugin.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from roundtabled.cli import main
from roundtabled.cli.client import EXIT_OK, EXIT_USAGE
from roundtabled.opencode.detect import ServerFound
from roundtabled.service import doctor, install

URL = "http://127.0.0.1:4096"


def _refused_url() -> str:
    # a loopback port nothing listens on: bound, then closed
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _install(target: Path, major: int) -> list[Path]:
    return install.install_tools(
        target, control_url="http://127.0.0.1:4747", token_file=target / "tok", major=major
    )


@pytest.mark.parametrize("value", ["1", "2", " 2 ", "2.x", "1.X"])
def test_parse_major_takes_1_and_2(value: str) -> None:
    assert install.parse_major(value) == int(value.strip()[0])
    assert install.parse_major(None) is None


@pytest.mark.parametrize("value", ["3", "0", "", "two", "v2", "1.18", "-1"])
def test_parse_major_refuses_anything_else_naming_the_flag(value: str) -> None:
    with pytest.raises(install.InstallError) as err:
        install.parse_major(value)
    assert str(err.value).startswith("--opencode must be 1 or 2 ")
    assert repr(value) in str(err.value)


def test_the_cli_refuses_a_bad_opencode_in_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    proj = tmp_path / "proj"
    proj.mkdir()
    assert main(["install-tool", "--project", str(proj), "--opencode", "3"]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = [x for x in err.splitlines() if not x.startswith("warning:")]  # env warnings
    assert line.startswith("Error: --opencode must be 1 or 2 ") and line.endswith("got '3'")
    assert not (proj / ".opencode").exists()


def test_the_flag_wins_and_names_a_server_of_the_other_major() -> None:
    two = ServerFound(True, 2, "2.1.2", "ok", "GET /api/info")
    assert install.choose_major(2, two, URL) == (2, "Installing for OpenCode 2.x (--opencode 2)")
    major, line = install.choose_major(1, two, URL)
    assert major == 1
    assert line == (
        "Installing for OpenCode 1.x (--opencode 1); note: the server at "
        f"{URL} is OpenCode 2.1.2, which will not load these files (run install-tool without "
        "--opencode to install for it)"
    )
    nobody = ServerFound(False, None, None, "ok", "no answer")
    assert install.choose_major(2, nobody, URL) == (2, "Installing for OpenCode 2.x (--opencode 2)")


@pytest.mark.parametrize(
    ("found", "major", "what"),
    [
        (ServerFound(True, 2, "2.1.2", "ok", "GET /api/info"), 2, "OpenCode 2.1.2"),
        (ServerFound(True, 2, None, "missing", "GET /api/info: 401"), 2, "OpenCode 2.x"),
        (ServerFound(True, 1, "1.18.33", "ok", "GET /global/health"), 1, "OpenCode 1.18.33"),
    ],
)
def test_without_the_flag_the_servers_major_is_used(
    found: ServerFound, major: int, what: str
) -> None:
    assert install.choose_major(None, found, URL) == (
        major,
        f"Installing for OpenCode {major}.x (detected: {what} at {URL}; for the other major "
        f"give --opencode {3 - major})",
    )


def test_without_flag_or_server_it_is_1x_and_says_how_to_get_2x() -> None:
    nobody = ServerFound(False, None, None, "ok", "no answer (ClientConnectorError)")
    major, line = install.choose_major(None, nobody, URL)
    assert major == 1
    assert line == (
        f"Installing for OpenCode 1.x (the default: the major could not be detected at {URL}, "
        "nothing answers there); for OpenCode 2.x run: roundtabled install-tool --opencode 2"
    )
    other = ServerFound(True, None, None, "ok", "neither … (GET /global/health: HTTP 404, text)")
    major, line = install.choose_major(None, other, URL)
    assert major == 1 and "it is no OpenCode 1.x or 2.x (neither …" in line


def test_1x_writes_exactly_what_it_wrote_before(tmp_path: Path) -> None:
    target = tmp_path / ".opencode"
    paths = _install(target, 1)
    assert [p.relative_to(target).as_posix() for p in paths] == [
        "roundtabled/control.ts",
        "tool/roundtable.ts",
        "tool/available_agents.ts",
        "agent/roundtable-observer.md",
        "plugin/roundtable-plugin.ts",
    ]
    assert install.install_paths(target) == install.install_paths(target, 1) == paths
    assert not (target / "plugins").exists() and not (target / "agents").exists()


def test_2x_writes_the_plugin_and_none_of_the_1x_files(tmp_path: Path) -> None:
    target = tmp_path / ".opencode"
    paths = _install(target, 2)
    assert [p.relative_to(target).as_posix() for p in paths] == [
        "roundtabled/control.ts",
        "roundtabled/roundtable.ts",
        "roundtabled/available_agents.ts",
        "agents/roundtable-observer.md",
        "plugins/roundtabled/index.ts",
        "plugins/roundtabled/tui.ts",
    ]
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()) == (
        sorted(p.relative_to(target).as_posix() for p in paths)
    )  # no node_modules: 2.x installs nothing
    # the shims beside control.ts are the 1.x ones, verbatim; control.ts has the URL baked in
    for name in install.TOOL_FILES:
        shipped = (Path(install.__file__).parents[1] / "tools" / name).read_text()
        assert (target / "roundtabled" / name).read_text() == shipped
    assert install.read_constants((target / "roundtabled/control.ts").read_text())["url"] == (
        "http://127.0.0.1:4747"
    )
    plugin = (target / "plugins/roundtabled/index.ts").read_text()
    assert plugin.startswith(install.V2_MARKER)
    assert f'id: "{install.V2_PLUGIN_ID}"' in plugin
    mtimes = {p: p.stat().st_mtime_ns for p in paths}
    assert _install(target, 2) == paths  # idempotent: nothing rewritten
    assert {p: p.stat().st_mtime_ns for p in paths} == mtimes


def test_a_bad_major_is_refused_by_the_installer(tmp_path: Path) -> None:
    with pytest.raises(install.InstallError, match="major must be 1 or 2"):
        _install(tmp_path / ".opencode", 3)


def test_the_other_majors_files_are_named_in_one_line(tmp_path: Path) -> None:
    target = tmp_path / ".opencode"
    assert install.other_major_line(target, 1) is None
    _install(target, 2)
    assert install.other_major_line(target, 2) is None
    line = install.other_major_line(target, 1)
    assert line is not None and "\n" not in line
    assert line == (
        f"Note: {target} also holds the OpenCode 2.x files of roundtabled "
        "(plugins/roundtabled/index.ts); OpenCode 1.x does not load the 2.x plugin: remove them "
        "if no OpenCode 2.x server uses this directory, or run `roundtabled install-tool "
        "--opencode 2` if the server is 2.x"
    )
    _install(target, 1)
    line = install.other_major_line(target, 2)
    assert line is not None and line.startswith(
        f"Note: {target} also holds the OpenCode 1.x files of roundtabled (tool/roundtable.ts, "
        "tool/available_agents.ts, plugin/roundtable-plugin.ts); OpenCode 2.x ignores"
    )


def test_a_file_of_someone_else_is_not_counted_as_ours(tmp_path: Path) -> None:
    target = tmp_path / ".opencode"
    (target / "plugins" / "roundtabled").mkdir(parents=True)
    (target / "plugins" / "roundtabled" / "index.ts").write_text("export default {}\n")
    (target / "tool").mkdir()
    (target / "tool" / "roundtable.ts").write_text("export default {}\n")
    assert install.major_files(target, 1) == install.major_files(target, 2) == []


def test_the_cli_says_which_major_and_why_and_writes_only_its_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _refused_url()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("ROUNDTABLED_SERVER_URL", url)
    proj = tmp_path / "proj"
    proj.mkdir()
    assert main(["install-tool", "--project", str(proj), "--opencode", "2"]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Installing for OpenCode 2.x (--opencode 2)"
    assert sum(line.startswith("installed ") for line in out) == 6
    assert out[-1] == (
        "Next: restart `opencode serve` so that it loads the plugin `roundtabled` (its tools and "
        f"context hook) for the project {proj}"
    )
    assert not (proj / ".opencode" / "tool").exists()
    assert main(["install-tool", "--project", str(proj)]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        f"Installing for OpenCode 1.x (the default: the major could not be detected at {url}"
    )
    assert out[-1].startswith(f"Note: {proj / '.opencode'} also holds the OpenCode 2.x files")


def test_doctor_on_1x_with_only_the_2x_plugin_names_install_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "HOME": str(tmp_path)}
    proj = tmp_path / "proj"
    _install(proj / ".opencode", 2)
    check = doctor._tools_check(env, proj, "http://127.0.0.1:4747")
    assert check.ok is False
    assert check.detail == (
        f"{proj / '.opencode'} holds roundtabled's files for OpenCode 2.x only, but the server "
        f"is OpenCode 1.x, which does not load them: run roundtabled install-tool --project "
        f"{proj} --opencode 1"
    )
    assert "roundtabled install-tool" in check.fix
    # with the 1.x files as well, the ordinary check applies
    _install(proj / ".opencode", 1)
    assert doctor._tools_check(env, proj, "http://127.0.0.1:4747").ok is True


def test_a_2x_plugin_in_both_directories_is_named_once(tmp_path: Path) -> None:
    project, glob = tmp_path / "p" / ".opencode", tmp_path / "cfg" / "opencode"
    _install(project, 2)
    assert install.duplicate_plugin_line(project, glob, 2) is None
    _install(glob, 1)
    assert install.duplicate_plugin_line(project, glob, 2) is None  # 1.x files are no twin
    _install(glob, 2)
    line = install.duplicate_plugin_line(project, glob, 2)
    assert line is not None and line.startswith(f"Note: {glob} holds the roundtabled plugin")
    assert install.duplicate_plugin_line(project, project, 2) is None
    assert install.duplicate_plugin_line(project, glob, 1) is None  # 1.x runs both copies
