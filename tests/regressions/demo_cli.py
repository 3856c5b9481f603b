"""Runs the demo's entry point (``python -m roundtabled.demo``, what ``scripts/demo``
runs) in this process with the demo itself stubbed out: what it would run with, or the one line
it refused the arguments with. A refusal that reaches ``err`` came before anything started."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from roundtabled import demo

DEMO_ENV = ("ROUNDTABLED_DEMO_MODEL", "ROUNDTABLED_DEMO_BASE_URL")


@dataclass
class DemoRun:
    code: int
    err: str
    ran_with: argparse.Namespace | None
    """The arguments the demo would have started with; ``None``: it started nothing."""


def run_demo(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *argv: str,
    env: dict[str, str] | None = None,
) -> DemoRun:
    """``scripts/demo ARGV`` with ``env`` as the only ``ROUNDTABLED_DEMO_*`` variables."""
    for name in DEMO_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    ran: list[argparse.Namespace] = []

    async def started(args: argparse.Namespace) -> int:
        ran.append(args)
        return 0

    monkeypatch.setattr(demo, "main_async", started)
    monkeypatch.setattr("sys.argv", ["roundtabled-demo", *argv])
    try:
        code = demo.main()
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code if isinstance(exc.code, int) else 1
    return DemoRun(code, capsys.readouterr().err.strip(), ran[0] if ran else None)
