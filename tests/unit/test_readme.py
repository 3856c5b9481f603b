"""The README documents what a newcomer needs: every key `roundtabled config` prints, the exit
codes of the CLI, and the TUI keys to open a debate."""

from __future__ import annotations

import re
from pathlib import Path

from roundtabled.cli import client
from roundtabled.service.config import Settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _config_table() -> str:
    section = README.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("| `"))


def test_every_key_roundtabled_config_prints_is_in_the_configuration_table() -> None:
    table = _config_table()
    documented = set(re.findall(r"`([a-z_]+)`", table))
    missing = [key for key in Settings.model_fields if key not in documented]
    assert missing == []


def test_the_exit_codes_are_documented() -> None:
    for code in (client.EXIT_OK, client.EXIT_ERROR, client.EXIT_USAGE, client.EXIT_UNCONCLUDED):
        assert f"**{code}**" in README
    assert f"**{client.EXIT_INTERRUPTED}**" in README


def test_watching_a_debate_names_the_tui_keys() -> None:
    section = README.split("## Watching a debate", 1)[1].split("\n## ", 1)[0]
    for keys in ("`ctrl+x` then `↓`", "`←` / `→`", "`↑`"):
        assert keys in section
