"""Regression: a real OpenAI-compatible server that sends no usage in its stream (llama.cpp's)
made every turn read "0 in / 0 out · $0" in the result's usage, the CLI's ``status``, the export
and the S1 footer: a 0 that looked measured.

Proves, on the pure result and the texts built from it: where the server recorded no usage for an
answered turn, its usage is unknown — the totals it is part of are ``null`` when nothing at all
was recorded and a lower bound ("at least", ``≥``) when some turns reported usage — and every
total counts its ``unreportedTurns``; a failed turn (no answer) is not counted as unreported; a
token budget that cannot be enforced is in the live status's ``notes`` while the debate runs.
"""

from __future__ import annotations

from roundtabled.cli.show import usage_cells
from roundtabled.core.result import build_result, delivery_text, usage_table
from roundtabled.core.state import (
    Budget,
    Options,
    Phase,
    Usage,
)
from roundtabled.engine.table import Table, status_of
from roundtabled.service.export import to_data, to_markdown
from tests.states import finished as state_of
from tests.states import seat_turn as turn

NONE_REPORTED = [turn(a, r, Usage()) for r in (1, 2) for a in ("pm", "dev")]


def test_no_usage_reported_is_unknown_everywhere() -> None:
    state = state_of(NONE_REPORTED)
    usage = build_result(state).dump()["usage"]
    assert usage["input"] is None and usage["output"] is None and usage["cost"] is None, usage
    assert usage["unreportedTurns"] == 4, usage
    assert usage["perAgent"]["pm"] == {
        "input": None,
        "output": None,
        "cost": None,
        "unreportedTurns": 2,
    }
    table = usage_table(state.history)
    assert table["total"].unknown and table["total"].unreported == 4
    assert table["total"].dump()["input"] is None

    footer = [ln for ln in delivery_text(state).splitlines() if ln.startswith("Usage")]
    assert footer, delivery_text(state)
    assert "0 in" not in footer[0] and "$0" not in footer[0], footer
    assert "total: unknown (the server reported no usage)" in footer[0], footer

    data = to_data(state)
    assert data["usage"]["total"]["input"] is None
    assert all(t.get("usageUnknown") for t in data["turns"]), data["turns"]
    md = to_markdown(data)
    assert "| **total** | unknown | unknown | unknown |" in md, md
    assert "no usage for 4 answered turn(s)" in md, md

    cells = usage_cells(data["usage"]["total"])
    assert "unknown" in cells and " 0 in" not in cells, cells


def test_some_usage_reported_is_a_lower_bound() -> None:
    history = [
        turn("pm", 1, Usage(input=100, output=20, cost=0.001)),
        turn("dev", 1, Usage()),
        turn("pm", 2, Usage(), failed=True),  # no answer: nothing to report, not "unknown"
    ]
    state = state_of(history)
    usage = build_result(state).dump()["usage"]
    assert usage["input"] == 100 and usage["unreportedTurns"] == 1, usage
    assert usage["perAgent"]["pm"]["unreportedTurns"] == 0, usage
    assert usage["perAgent"]["dev"]["input"] is None, usage
    footer = next(ln for ln in delivery_text(state).splitlines() if ln.startswith("Usage"))
    assert "total: at least 100 in / 20 out" in footer, footer
    assert "(usage of 1 turn(s) unknown)" in footer, footer
    assert "dev: unknown" in footer, footer
    md = to_markdown(to_data(state))
    assert "| **total** | ≥ 100 | ≥ 20 | ≥ 0.0010 |" in md, md
    assert usage_cells(to_data(state)["usage"]["total"]).lstrip().startswith("≥"), usage


def test_all_usage_reported_says_nothing_unknown() -> None:
    history = [turn(a, 1, Usage(input=10, output=2, cost=0.01)) for a in ("pm", "dev")]
    state = state_of(history)
    usage = build_result(state).dump()["usage"]
    assert usage["input"] == 20 and usage["unreportedTurns"] == 0, usage
    footer = next(ln for ln in delivery_text(state).splitlines() if ln.startswith("Usage"))
    assert "unknown" not in footer and "at least" not in footer, footer


def test_the_live_status_says_the_budget_cannot_be_enforced() -> None:
    running = state_of(
        NONE_REPORTED[:1],
        phase=Phase.ACTIVE,
        end_reason=None,
        current_round=1,
        options=Options(budget=Budget(tokens=5000)),
    )
    st = status_of(Table(state=running), now=running.updated_at or 0)
    assert any("token budget cannot be enforced" in n for n in st["notes"]), st["notes"]
    assert st["usage"]["total"]["input"] is None, st["usage"]
