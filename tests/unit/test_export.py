"""Export of a whole debate: the JSON form holds the topic, the agents, every turn with
its round and agent, tool call summaries, errors, the observer's summary and usage totals per
agent, per round and overall; the Markdown form shows all of it and stays well-formed on GitHub
(balanced code fences even when a tool printed a fence, a usage table per agent and per round).
"""

from __future__ import annotations

import re

import pytest

from roundtabled.core.state import (
    EndReason,
    HistoryEntry,
    Phase,
    RoundtableState,
    ToolCallSummary,
    Usage,
)
from roundtabled.service import export


def _state() -> RoundtableState:
    def turn(
        agent: str, rnd: int, text: str, inp: int, out: int, cost: float, **kw: object
    ) -> HistoryEntry:
        return HistoryEntry(
            agent=agent,
            round=rnd,
            response=text,
            usage=Usage(input=inp, output=out, cost=cost),
            **kw,
        )

    history = [
        turn(
            "pm",
            1,
            "Split only reconciliation.",
            1000,
            100,
            0.01,
            tool_calls=[
                ToolCallSummary(tool_name="read", output_preview="```python\nprint(1)\n```")
            ],
        ),
        turn("dev", 1, "", 900, 0, 0.0, has_error=True, error="APIError: overloaded"),
        turn("pm", 2, "Weekly releases, then.", 1500, 120, 0.02),
        turn(
            "dev",
            2,
            "Agreed, with import-linter.",
            1600,
            130,
            0.02,
            cut_off=True,
            has_error=True,
            error="turn timeout (300 s)",
        ),
        turn(
            "roundtable-observer",
            2,
            "**Executive summary.** Modular monolith.",
            2000,
            300,
            0.05,
            kind="observer",
        ),
    ]
    return RoundtableState(
        sessionID="ses_export1",
        parentSessionID="ses_parent1",
        title="(Roundtable) - Split the monolith?",
        agents=["pm", "dev"],
        total_rounds=2,
        prompt="Should we split the payments monolith?",
        phase=Phase.DONE,
        end_reason=EndReason.COMPLETED,
        history=history,
        errors=["dev (round 1): APIError: overloaded"],
        summary="**Executive summary.** Modular monolith.",
    )


def test_json_export_holds_the_whole_debate() -> None:
    data = export.to_data(_state())
    assert data["topic"] == "Should we split the payments monolith?"
    assert data["agents"] == ["pm", "dev"]
    assert data["observer"] == "built-in"  # the default (hidden roundtable-observer)
    assert data["phase"] == "done" and data["endReason"] == "completed"
    assert [(t["agent"], t["round"]) for t in data["turns"]] == [
        ("pm", 1),
        ("dev", 1),
        ("pm", 2),
        ("dev", 2),
        ("roundtable-observer", 2),
    ]
    assert data["turns"][0]["toolCalls"] == [
        {"toolName": "read", "outputPreview": "```python\nprint(1)\n```"}
    ]
    assert data["turns"][1]["hasError"] and "overloaded" in data["turns"][1]["error"]
    assert data["errors"] == ["dev (round 1): APIError: overloaded"]
    assert data["observerSummary"].startswith("**Executive summary.**")
    # The contract of docs/result.md: degraded (dev failed, then was cut off), said first.
    assert data["version"] == 1 and data["status"]["degraded"] is True
    assert data["summary"].startswith("⚠ DEGRADED ROUNDTABLE RESULT")
    assert data["summary"].endswith("\nExecutive summary. Modular monolith.")  # plain text
    assert "dev failed in round 1 (APIError: overloaded)" in data["status"]["notes"]
    assert [p["agent"] for p in data["verdict"]["positions"]] == ["pm", "dev"]


def test_json_export_totals_usage_per_agent_per_round_and_overall() -> None:
    usage = export.to_data(_state())["usage"]
    assert usage["perAgent"]["pm"]["input"] == 2500
    assert usage["perAgent"]["pm"]["output"] == 220
    assert usage["perAgent"]["dev"]["input"] == 2500
    assert usage["perAgent"]["roundtable-observer"]["output"] == 300
    assert usage["perRound"]["1"]["input"] == 1900
    assert usage["perRound"]["2"]["input"] == 5100
    assert usage["total"]["input"] == 7000
    assert usage["total"]["output"] == 650
    assert usage["total"]["cost"] == pytest.approx(0.10)


def test_markdown_export_reads_as_a_document() -> None:
    md = export.to_markdown(export.to_data(_state()))
    assert md.startswith("# Split the monolith?\n")
    for heading in ("## Topic", "## Debate", "## Errors", "## Summary", "## Usage"):
        assert f"\n{heading}\n" in md
    # each turn under its own heading with agent and round, in order
    heads = re.findall(r"^### (.+)$", md, flags=re.M)
    assert heads == [
        "pm · round 1",
        "dev · round 1",
        "pm · round 2",
        "dev · round 2",
    ]
    # the observer's reply is the summary: shown once, under "Summary"
    assert md.count("Modular monolith.") == 1
    assert "> ⚠️ failed: APIError: overloaded" in md
    assert "> ⚠️ cut off: turn timeout (300 s)" in md
    assert "<summary>tool <code>read</code></summary>" in md
    assert "- **Agents:** pm → dev" in md
    assert "`ses_export1`" in md and "`ses_parent1`" in md


def test_markdown_code_fences_stay_balanced_when_a_tool_printed_a_fence() -> None:
    md = export.to_markdown(export.to_data(_state()))
    fences = [line for line in md.splitlines() if line.startswith("```")]
    assert len(fences) == 2  # only the one fence pair around the tool preview
    assert "print(1)" in md


def test_markdown_usage_tables_per_agent_and_per_round() -> None:
    md = export.to_markdown(export.to_data(_state()))
    assert "| agent | input | output | cost (USD) |" in md
    assert "| pm | 2500 | 220 | 0.0300 |" in md
    assert "| **total** | 7000 | 650 | 0.1000 |" in md
    assert "| round | input | output | cost (USD) |" in md
    assert "| 1 | 1900 | 100 | 0.0100 |" in md
    assert "| 2 | 5100 | 550 | 0.0900 |" in md
    # every table row has the header's number of cells (GitHub drops malformed tables)
    for line in md.splitlines():
        if line.startswith("|"):
            assert line.count("|") == 5, line


def test_markdown_shows_a_failed_observer_turn_in_the_debate() -> None:
    state = _state()
    failed = state.history[-1].model_copy(
        update={"response": "", "has_error": True, "error": "observer timed out"}
    )
    state = state.model_copy(update={"history": [*state.history[:-1], failed], "summary": None})
    md = export.to_markdown(export.to_data(state))
    assert "### Observer: roundtable-observer" in md
    assert "> ⚠️ failed: observer timed out" in md


def test_markdown_without_summary_says_so() -> None:
    state = _state().model_copy(
        update={"summary": None, "phase": Phase.ABORTED, "end_reason": EndReason.CANCELLED}
    )
    md = export.to_markdown(export.to_data(state))
    assert "_(no summary)_" in md
    assert "- **Outcome:** aborted (cancelled)" in md


def test_markdown_has_a_verdict_section_with_the_degraded_notes_and_positions() -> None:
    md = export.to_markdown(export.to_data(_state()))
    verdict = md[md.index("\n## Verdict\n") : md.index("\n## Summary\n")]
    assert "Degraded result" not in verdict  # said once, at the top
    assert "| agent | position | confidence | changed? |" in verdict
    # dev's last turn was cut off at the time limit with its partial text kept: it spoke
    assert "| dev | _(cut off at the time limit, partial text kept)_ |  | no |" in verdict
    assert "**Consensus:** unknown" in verdict


def test_markdown_says_degraded_at_the_top_right_after_the_outcome() -> None:
    data = export.to_data(_state())
    assert data["status"]["degraded"] is True
    lines = export.to_markdown(data).splitlines()
    outcome = next(i for i, line in enumerate(lines) if line.startswith("- **Outcome:**"))
    assert lines[outcome].endswith("— **degraded**")
    head = lines[outcome + 1 : lines.index("## Topic")]
    assert "> ⚠️ **Degraded result**" in head
    assert "> - dev failed in round 1 (APIError: overloaded)" in head
    assert [n for n in head if n.startswith("> - ")] == [
        f"> - {n}" for n in data["status"]["notes"]
    ]
