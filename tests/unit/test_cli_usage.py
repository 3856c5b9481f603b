"""The command line without a daemon: help for every flag, a bare ``roundtabled``, errors that
name the CLI flag, the Ctrl-C note, ``--agents`` trimming, ``install-tool`` refusing a missing
project, ``doctor``/``agents --directory`` validation and the environment-variable hint."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from roundtabled.cli import main
from roundtabled.cli.client import EXIT_OK, EXIT_USAGE, FLAG_FOR_FIELD, name_the_flag
from roundtabled.cli.debate import interrupted_note, start_body
from roundtabled.cli.parser import build_parser
from roundtabled.service import config as cfg


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_every_flag_and_argument_of_every_command_has_help() -> None:
    missing = []
    for name, sub in _subparsers(build_parser()).items():
        assert sub.description or name, name
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if not action.help:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_help_gives_the_defaults_a_user_asks_about() -> None:
    subs = _subparsers(build_parser())
    ext = subs["extend"].format_help()
    assert "default 1" in ext
    assert "md (default)" in subs["export"].format_help()
    assert "session id" in subs["status"].format_help()
    assert "as JSON" in subs["agents"].format_help()


def test_a_bare_roundtabled_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("usage: roundtabled")
    assert "install-tool" in out and "start" in out


def test_api_errors_name_the_cli_flag_not_the_field() -> None:
    assert name_the_flag(
        "Error: turnTimeout must be a number of seconds from 1 to 3600, got 0", "turnTimeout"
    ) == ("Error: --turn-timeout must be a number of seconds from 1 to 3600, got 0")
    # a message that does not start with the field gets the flag in front
    assert name_the_flag("Error: unknown agent 'x'. Available agents: pm", "agents") == (
        "Error: --agents: unknown agent 'x'. Available agents: pm"
    )
    assert name_the_flag("Error: parentSessionID must look like 'ses_…'", "parentSessionID") == (
        "Error: --parent must look like 'ses_…'"
    )
    # a field without a flag, or none at all: unchanged
    assert name_the_flag("Error: body is not JSON", "body") == "Error: body is not JSON"
    assert name_the_flag("Error: x", None) == "Error: x"


def test_every_mapped_flag_exists_on_start_extend_list_or_agents() -> None:
    subs = _subparsers(build_parser())
    flags = {
        o
        for name in ("start", "extend", "list", "agents")
        for a in subs[name]._actions
        for o in a.option_strings
    }
    for field, flag in FLAG_FOR_FIELD.items():
        if flag.startswith("--"):
            assert flag in flags, (field, flag)


def test_agents_around_commas_are_trimmed() -> None:
    args = build_parser().parse_args(["start", "--agents", " pm, dev ,rv", "topic"])
    assert start_body(args)["agents"] == ["pm", "dev", "rv"]


def test_ctrl_c_says_the_roundtable_goes_on_and_how_to_watch_or_cancel_it() -> None:
    args = argparse.Namespace(following="ses_abc")
    note = interrupted_note(args)
    assert note is not None
    assert "goes on" in note
    assert "roundtabled watch ses_abc" in note and "roundtabled cancel ses_abc" in note
    starting = interrupted_note(argparse.Namespace(starting=True))
    assert starting is not None and "roundtabled list" in starting
    assert interrupted_note(argparse.Namespace()) is None


def test_install_tool_refuses_a_project_that_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    typo = tmp_path / "my-projetc"
    assert main(["install-tool", "--project", str(typo)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("Error: --project:") and "does not exist" in err
    assert not typo.exists()  # nothing created


def test_install_tool_twice_says_unchanged_and_names_the_next_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    proj = tmp_path / "proj"
    proj.mkdir()
    assert main(["install-tool", "--project", str(proj)]) == EXIT_OK
    first = capsys.readouterr().out
    assert first.count("installed ") == 5  # roundtabled/control.ts, 2 tools, agent, plugin
    assert "restart `opencode serve`" in first and f"doctor --directory {proj}" in first
    assert main(["install-tool", "--project", str(proj)]) == EXIT_OK
    second = capsys.readouterr().out
    assert second.count("unchanged ") == 5 and "installed " not in second
    assert "Nothing changed" in second


@pytest.mark.parametrize("command", ["doctor", "agents"])
def test_directory_flags_refuse_a_missing_directory(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--directory", str(tmp_path / "nope")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("Error: --directory:") and "does not exist" in err


def test_an_unknown_variable_is_never_answered_with_an_undocumented_one() -> None:
    bogus = cfg.unknown_environment({"ROUNDTABLED_BOGUS": "1"})
    assert len(bogus) == 1 and "did you mean" not in bogus[0]
    # internal variables of the test suite are never suggested
    for internal in ("FAUL", "SLO", "TEMPLAT", "UNI"):
        (w,) = cfg.unknown_environment({f"ROUNDTABLED_{internal}": "1"})
        assert "did you mean" not in w, w
    (typo,) = cfg.unknown_environment({"ROUNDTABLED_DEMO_MODL": "x"})
    assert "did you mean ROUNDTABLED_DEMO_MODEL?" in typo
