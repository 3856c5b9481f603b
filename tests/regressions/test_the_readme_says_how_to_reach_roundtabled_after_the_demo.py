"""After ``scripts/demo`` the README's bare ``roundtabled …`` commands failed: the demo installs
into the checkout's ``.venv``, nothing on PATH. The README says so and how to reach it, and the
lines ``scripts/demo --serve`` prints name the CLI by that path."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.demo_serve import DemoServe

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_names_the_checkout_s_roundtabled() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert (
        "it is `.venv/bin/roundtabled`, the path the lines `scripts/demo --serve` prints use"
        in (readme)
    )
    assert 'export PATH="$PWD/.venv/bin:$PATH"' in readme


def test_the_demo_s_commands_name_the_cli_by_its_path(demo: DemoServe) -> None:
    commands = [line.split()[0] for line in demo.lines if " start --agents " in line]
    assert commands and all(c.endswith("/.venv/bin/roundtabled") for c in commands), demo.lines
