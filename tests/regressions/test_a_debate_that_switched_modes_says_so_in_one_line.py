"""Regression: a debate whose turns ran in both hiding modes printed two notes that each claim
the whole debate.

Field failure (`scripts/demo` on a fresh clone): the first turn was planned before the roundtable
plugin had reported itself, the later ones with it, and `status` and the result printed

    note: earlier turn prompts hidden by a PATCH per turn (the roundtable plugin did not report
          itself loaded in S2's server instance)
    note: seats' model requests shaped by the roundtable plugin: earlier turn prompts left out
          in memory, no hiding write per turn

Proves: the result says one line, "… until the plugin reported itself …, then …", in the order
the modes ran; it stays a plain note (never a warning, never in the honesty header); a debate in
one mode keeps its own line.
"""

from __future__ import annotations

from roundtabled.cli.verdict import render_verdict
from roundtabled.core.result import build_result
from roundtabled.core.state import (
    MODE_NOTES,
    MODE_SWITCH_NOTES,
    EndReason,
    HistoryEntry,
    Phase,
    RoundtableState,
)


def done(notes: list[str]) -> RoundtableState:
    history = [
        HistoryEntry.model_validate(
            {
                "agent": a,
                "round": 1,
                "response": f"{a} argues.\nPosition: modular monolith — seams first",
                "kind": "turn",
                "finish": "stop",
            }
        )
        for a in ("pm", "dev")
    ]
    summary = "1. Executive summary: both seats keep a modular monolith."
    history.append(
        HistoryEntry.model_validate(
            {"agent": "roundtable-observer", "round": 1, "response": summary, "kind": "observer"}
        )
    )
    return RoundtableState.model_validate(
        {
            "session_id": "ses_modes",
            "title": "Modes",
            "agents": ["pm", "dev"],
            "total_rounds": 1,
            "prompt": "Split the monolith?",
            "phase": Phase.DONE,
            "end_reason": EndReason.COMPLETED,
            "history": history,
            "notes": notes,
            "summary": summary,
        }
    )


def test_patch_then_plugin_is_one_note_in_the_order_they_ran() -> None:
    result = build_result(done([MODE_NOTES["patch"], MODE_NOTES["plugin"]]))
    notes = result.status.notes
    assert MODE_SWITCH_NOTES[("patch", "plugin")] in notes, notes
    assert MODE_NOTES["patch"] not in notes and MODE_NOTES["plugin"] not in notes
    assert not result.status.degraded
    text = render_verdict(result.dump(), tty=False)
    assert f"  note: {MODE_SWITCH_NOTES[('patch', 'plugin')]}" in text
    assert "  - " + MODE_SWITCH_NOTES[("patch", "plugin")] not in text


def test_plugin_then_patch_says_the_other_order() -> None:
    notes = build_result(done([MODE_NOTES["plugin"], MODE_NOTES["patch"]])).status.notes
    assert notes.count(MODE_SWITCH_NOTES[("plugin", "patch")]) == 1, notes


def test_one_mode_keeps_its_own_line() -> None:
    notes = build_result(done([MODE_NOTES["plugin"]])).status.notes
    assert MODE_NOTES["plugin"] in notes and not set(MODE_SWITCH_NOTES.values()) & set(notes)
