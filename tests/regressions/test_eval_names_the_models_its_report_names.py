"""``roundtabled eval`` on seats without a model of their own printed ``(models unknown)`` while
its report named the models they ran on (the server's default). Both name them."""

from __future__ import annotations

import re
from pathlib import Path

from tests.e2e.demo_serve import DemoServe


def test_the_run_line_and_the_report_name_the_same_models(demo: DemoServe, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    run = demo.cli(
        "eval", "--agents", "pm,dev,rv", "--limit", "1", "--protocols", "single",
        "--out", str(out), "--directory", demo.project, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, (run.stdout, run.stderr)
    said = run.stdout + run.stderr
    assert "models unknown" not in said
    line = re.search(r"seats pm, dev, rv \(([^)]*)\)", said)
    assert line, said
    report = (out / "report.md").read_text()
    for model in line.group(1).split(", "):
        assert model in report, (model, report)
