"""``read_topic``: the topic of ``start``/``extend`` as text, ``-`` (stdin) or ``@FILE``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from roundtabled.cli.client import EXIT_USAGE, CliError
from roundtabled.cli.topic import read_topic


def test_plain_text_is_the_topic() -> None:
    assert read_topic("Split the monolith?") == "Split the monolith?"
    assert read_topic("@") == "@"  # a bare @ is text


def test_dash_reads_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("line one\nline two\n"))
    assert read_topic("-") == "line one\nline two\n"


def test_at_file_reads_utf8(tmp_path: Path) -> None:
    f = tmp_path / "t.md"
    f.write_text("Ärger mit dem Monolithen\n", encoding="utf-8")
    assert read_topic(f"@{f}") == "Ärger mit dem Monolithen\n"


def test_missing_or_binary_file_is_a_usage_error_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(CliError) as err:
        read_topic(f"@{tmp_path / 'nope.md'}")
    assert err.value.code == EXIT_USAGE
    assert str(err.value).startswith("Error: prompt: cannot read") and "nope.md" in str(err.value)
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(CliError, match="cannot read"):
        read_topic(f"@{binary}")
