"""Field fault (``roundtabled eval`` on a local model served by llama.cpp's server, which reports
usage but lists no price): the report's USD/q column read ``0.00000`` for every protocol — a cost
measured as nothing — because OpenCode records a cost of 0 for a model without a price. The exact
input: the first record of that run (position form, opening only) and its run file. Now a run
whose seats' models list no price records every cost as unknown, and the report (also of records
written before) says ``unknown``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roundtabled.eval.options import EvalOptions
from roundtabled.eval.report import build_report, write_reports

RECORD: dict[str, Any] = {
    "id": "medium-0-0",
    "question": "What is the result of 10*4+12*13?",
    "gold": "196",
    "sessionID": "ses_dc0b79abbffe5h5cGWPrDxIugs",
    "endReasons": ["completed"],
    "seats": {
        "seat-a": {
            "answers": ["final answer"],
            "correct": [False],
            "reads": [{"round": 1, "answer": "Final answer", "source": "position", "turn": True}],
        },
        "seat-b": {
            "answers": ["final thoughts"],
            "correct": [False],
            "reads": [{"round": 1, "answer": "Final Thoughts", "source": "position", "turn": True}],
        },
        "seat-c": {
            "answers": ["3"],
            "correct": [False],
            "reads": [{"round": 1, "answer": "3", "source": "position", "turn": True}],
        },
    },
    "protocols": {
        "single:seat-a": {
            "answer": "final answer",
            "correct": False,
            "finalRound": 0,
            "calls": 1,
            "tokens": 27,
            "cost": 0.0,
            "estimated": False,
            "seconds": 23.304133729001478,
        },
        "single:seat-b": {
            "answer": "final thoughts",
            "correct": False,
            "finalRound": 0,
            "calls": 1,
            "tokens": 27,
            "cost": 0.0,
            "estimated": False,
            "seconds": 23.304133729001478,
        },
        "single:seat-c": {
            "answer": "3",
            "correct": False,
            "finalRound": 0,
            "calls": 1,
            "tokens": 26,
            "cost": 0.0,
            "estimated": False,
            "seconds": 23.304133729001478,
        },
        "vote": {
            "answer": "final answer",
            "correct": False,
            "finalRound": 0,
            "calls": 3,
            "tokens": 80,
            "cost": 0.0,
            "estimated": False,
            "seconds": 23.304133729001478,
        },
    },
    "models": {
        "seat-a": "local/local",
        "seat-b": "local/local",
        "seat-c": "local/local",
        "roundtable-observer": "local/local",
    },
    "overhead": {
        "observerCalls": 1,
        "observerTokens": 1192,
        "observerTokensEstimated": False,
        "seconds": 23.304133729001478,
    },
}

RUN: dict[str, Any] = {"parentSessionID": "ses_dc0b79af8ffegGgZtD0p1IILOw", "costListed": False}


def test_a_model_without_a_price_has_an_unknown_cost_not_zero(tmp_path: Path) -> None:
    assert RECORD["protocols"]["vote"]["cost"] == 0.0  # what the server recorded
    opts = EvalOptions(
        agents=["seat-a", "seat-b", "seat-c"], out=tmp_path, protocols=["single", "vote"]
    )
    report = build_report(opts, RUN, [RECORD], 12)
    assert report["protocols"] and all(p["cost_per_question"] is None for p in report["protocols"])
    write_reports(tmp_path, report)
    md = (tmp_path / "report.md").read_text()
    vote = next(line for line in md.splitlines() if line.startswith("| vote |"))
    assert "| unknown |" in vote and "0.00000" not in md
