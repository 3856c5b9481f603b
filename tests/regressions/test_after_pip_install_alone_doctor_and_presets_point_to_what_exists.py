"""Reported by a trial of ``pip install .`` alone (no checkout, no npm): ``doctor`` said to start
``opencode serve`` but not how to get OpenCode, and ``presets`` pointed to
``examples/config.toml``, which the wheel does not ship. ``doctor`` now says how to install the
pinned OpenCode where none is found, and ``presets`` prints an example preset itself (the one of
examples/config.toml, which must stay valid)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from roundtabled.cli import main
from roundtabled.cli.admin import PRESET_EXAMPLE
from roundtabled.opencode import binary
from roundtabled.service import config as cfg
from roundtabled.service import doctor

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config.toml"


def test_presets_prints_an_example_instead_of_a_file_the_wheel_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("ROUNDTABLED_CONFIG", raising=False)
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert "examples/config.toml" not in out
    assert str(tmp_path / "config" / "roundtabled" / "config.toml") in out
    assert PRESET_EXAMPLE in out
    # The example is a working preset, the same as the repository's example file has.
    path = tmp_path / "config.toml"
    path.write_text(PRESET_EXAMPLE + "\n")
    loaded = cfg.load_settings(config_file=path)
    assert list(loaded.presets) == ["design-review"]
    repo = tomllib.loads(EXAMPLE.read_text())["presets"]["design-review"]
    assert tomllib.loads(PRESET_EXAMPLE)["presets"]["design-review"] == repo


def test_doctor_says_how_to_get_opencode_where_none_is_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing() -> Path:
        raise FileNotFoundError("opencode binary not found")

    monkeypatch.setattr(binary, "find_opencode_binary", missing)
    hint = doctor._start_server_hint(cfg.Settings())
    assert hint.startswith(
        "OpenCode is not installed here: install it with "
        f"`npm install -g opencode-ai@{binary.OPENCODE_VERSION}`"
    )
    assert "opencode serve --port 4096" in hint
    monkeypatch.undo()
    assert "not installed" not in doctor._start_server_hint(cfg.Settings())  # the checkout's
