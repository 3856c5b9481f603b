"""Reported by a user: ``roundtabled start --agents pm,dev @brief.md`` with ``brief.md`` present
but empty answered ``Error: PROMPT must be a non-empty string (the topic), got ''``: the daemon
saw only the empty string, so the error never named the file. The CLI now refuses an empty (or
whitespace-only) ``@FILE`` or standard input itself, naming the file, exit code 2.

Proves, through the CLI's entry point (no daemon: an unused port shows the refusal comes before
any call): one ``Error: PROMPT:`` line naming the file, or standard input.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.mark.parametrize("content", ["", " \n\n\t\n"])
def test_an_empty_topic_file_is_named_not_the_empty_string(
    content: str, tmp_path: Path, cli_without_daemon: Callable[..., tuple[int, str]]
) -> None:
    brief = tmp_path / "brief.md"
    brief.write_text(content, encoding="utf-8")
    code, err = cli_without_daemon("start", "--agents", "pm,dev", f"@{brief}")
    assert code == 2, err
    assert err == (
        f"Error: PROMPT: the file {str(brief)!r} holds no text (give the topic itself, - for "
        "standard input, or @FILE)"
    )


def test_an_empty_standard_input_is_named(
    monkeypatch: pytest.MonkeyPatch, cli_without_daemon: Callable[..., tuple[int, str]]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, err = cli_without_daemon("extend", "ses_abcdefgh", "-")
    assert code == 2, err
    assert err.startswith("Error: PROMPT: standard input holds no text"), err
