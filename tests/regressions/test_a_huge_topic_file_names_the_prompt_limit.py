"""Regression: a 1 MB ``@file`` topic got ``Error: Request Entity Too Large (POST
/v1/roundtables)`` (the control API's body limit) instead of the 100,000-character limit naming
``PROMPT`` that a 200 KB file gets.

Proves, through the CLI's entry point (no daemon: an unused port shows the refusal comes before
any call): a 1 MB and a 200 KB topic file each get one ``Error: PROMPT must be at most 100000
characters`` line, exit code 2.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.mark.parametrize("size", [1_000_000, 200_000])
def test_a_huge_topic_file_names_the_prompt_limit(
    size: int, tmp_path: Path, cli_without_daemon: Callable[..., tuple[int, str]]
) -> None:
    topic = tmp_path / "topic.md"
    topic.write_text("x" * size, encoding="utf-8")
    code, err = cli_without_daemon("start", "--agents", "pm,dev", f"@{topic}")
    assert code == 2, err
    assert err == f"Error: PROMPT must be at most 100000 characters, got {size}", err
