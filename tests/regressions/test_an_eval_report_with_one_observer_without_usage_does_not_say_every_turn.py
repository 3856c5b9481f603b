"""Field fault (the 40-question arithmetic measurement on llama.cpp's server, which reports
usage): the report said "**Tokens are estimated**: the provider reported no usage (0 tokens on
every turn)" while every count but three was the provider's — the observer of three roundtables
had failed (the server stopped during its turn) and reported no usage, so those three counts
were estimated. The exact input: two records of that run, ``easy-0-35`` (its vote's observer
failed: estimated) and ``easy-0-36`` (every count the provider's), and its run file. Now the
report names the estimated counts and says the others are the provider's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roundtabled.eval.options import EvalOptions
from roundtabled.eval.report import build_report, write_reports

RECORDS = Path(__file__).parent.parent / "fixtures" / "eval_records"
RUN: dict[str, Any] = {"parentSessionID": "ses_db05a9addffexdxzXyOGPrKtoS", "costListed": False}


def records() -> list[dict[str, Any]]:
    text = (RECORDS / "an_observer_without_usage.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_a_report_with_one_estimated_count_names_it_and_not_every_turn(tmp_path: Path) -> None:
    recs = records()
    assert [r["id"] for r in recs] == ["easy-0-35", "easy-0-36"]
    opts = EvalOptions(agents=["seat-a", "seat-b", "seat-c"], out=tmp_path, models=["local"])
    report = build_report(opts, RUN, recs, 40)
    assert report["tokensEstimated"] is True
    assert report["tokensEstimatedRuns"] == {"estimated": ["easy-0-35/vote"], "of": 16}
    write_reports(tmp_path, report)
    md = (tmp_path / "report.md").read_text()
    assert "0 tokens on every turn" not in md
    assert "**Tokens are estimated in 1 of 16 counts** (easy-0-35/vote)" in md
    assert "every other count is the provider's" in md


def test_a_report_whose_every_count_is_estimated_still_says_so(tmp_path: Path) -> None:
    recs = records()
    for r in recs:
        for v in r["protocols"].values():
            v["estimated"] = True
    opts = EvalOptions(agents=["seat-a", "seat-b", "seat-c"], out=tmp_path, models=["local"])
    write_reports(tmp_path, build_report(opts, RUN, recs, 40))
    assert "0 tokens on every turn" in (tmp_path / "report.md").read_text()
