"""``scripts/demo --serve`` told a newcomer to try ``eval --limit 4``; run as printed (in the
shell the demo's ``export`` line set up), it was refused: ``Error: --agents is required
(comma-separated seats) unless --model is given``, exit 2, and without ``--directory`` the
demo's seats are not found either. The demo now prints the whole line; README says to use it.
``tests/e2e/test_demo_features.py::test_eval_scores_the_protocols_apart`` runs that exact line
to its report."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.demo_serve import DemoServe

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_prints_an_eval_line_with_its_seats_and_directory(demo: DemoServe) -> None:
    printed = [w for line in demo.lines if (w := line.split())[:1] and w[1:2] == ["eval"]]
    assert len(printed) == 1, demo.lines
    words = printed[0]
    assert words[0].endswith("roundtabled"), words
    assert words[words.index("--agents") + 1] == "pm,dev,rv", words
    assert words[words.index("--directory") + 1] == demo.project, words
    # The hint beside the TUI line points at it instead of a shorter command of its own.
    assert not any("eval --limit 4" in line for line in demo.lines), demo.lines


def test_the_readme_names_the_eval_line_the_demo_prints() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "roundtabled eval --limit 4" not in readme
    assert "eval --agents pm,dev,rv --limit 4 --directory" in readme
