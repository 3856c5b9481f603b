"""The verdict as the CLI shows it (roundtabled/verdict_render.py) and the published schema."""

from __future__ import annotations

import json
from pathlib import Path

from roundtabled.cli.show import status_lines
from roundtabled.cli.verdict import WARNING, render_verdict
from roundtabled.core.observer_verdict import verdict_schema
from roundtabled.core.result import build_result
from roundtabled.core.state import EndReason, VerdictRecord

from .test_verdict import VALID, pos, state, turn

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_published_schema_matches_the_code() -> None:
    published = json.loads((DOCS / "observer-verdict.schema.json").read_text())
    assert published == json.loads(json.dumps(verdict_schema()))


def _degraded() -> dict[str, object]:
    history = [
        turn("pm", 1, pos("keep", 7)),
        turn("dev", 1, "", has_error=True, error="APIError: down"),
        turn("rv", 1, pos("split", 4)),
        turn("pm", 2, pos("keep", 7)),
        turn("dev", 2, ""),
        turn("rv", 2, "Changed: pm's numbers\n" + pos("keep", 6)),
    ]
    data = {**VALID, "disagreements": [{"point": "timing", "minority": ["rv"], "view": "later"}]}
    st_ = state(
        history, total_rounds=3, end_reason=EndReason.REPETITION, verdict=VerdictRecord(data=data)
    )
    return build_result(st_).dump()


def test_render_degraded_notes_table_consensus_minority() -> None:
    text = render_verdict(_degraded(), tty=False)
    lines = text.splitlines()
    assert lines[0] == "⚠ degraded result:"
    assert "  - dev gave no usable answer in any round" in lines
    assert lines.index("── verdict ──") > lines.index("  - dev gave no usable answer in any round")
    table = lines[lines.index("── verdict ──") + 1 :]
    assert table[0].split() == ["agent", "position", "confidence", "changed?"]
    assert table[1].split()[:3] == ["pm", "keep", "7/10"] and table[1].endswith("no")
    assert table[2].startswith("dev") and "(did not speak)" in table[2]
    assert "yes, round 2: pm's numbers" in table[3]
    assert "consensus: majority" in text
    assert "minority (rv) on timing: later" in text
    assert WARNING not in text


def test_render_colours_only_the_warnings_on_a_terminal() -> None:
    text = render_verdict(_degraded(), tty=True)
    warned = [line for line in text.splitlines() if WARNING in line]
    assert warned and all(
        "degraded" in line or line.lstrip(WARNING).startswith("  - ") for line in warned
    )
    assert WARNING not in text.split("── verdict ──")[1]


def test_render_healthy_has_no_warning_and_old_results_render_nothing() -> None:
    history = [turn(a, 1, pos("keep", 8)) for a in ("pm", "dev", "rv")]
    text = render_verdict(build_result(state(history, total_rounds=1)).dump(), tty=True)
    assert WARNING not in text and "degraded" not in text
    assert render_verdict({"sessionID": "ses_x", "summary": "old"}) == ""


def _split_behind_a_unanimous_observer() -> dict[str, object]:
    history = [
        turn("pm", 1, pos("keep", 7)),
        turn("dev", 1, pos("split now", 6)),
        turn("rv", 1, pos("wait a year", 5)),
    ]
    st_ = state(history, total_rounds=1, verdict=VerdictRecord(data=VALID))
    return build_result(st_).dump()


def test_the_consensus_line_shows_the_observer_and_the_seats_disagreeing() -> None:
    result = _split_behind_a_unanimous_observer()
    verdict = result["verdict"]
    assert isinstance(verdict, dict)
    assert (verdict["consensus"], verdict["tallyConsensus"]) == ("unanimous", "none")
    line = next(x for x in render_verdict(result, tty=False).splitlines() if "consensus" in x)
    assert line.startswith(
        "consensus: unanimous per the observer — but the seats' stated positions disagree: "
        "split (no two agree)"
    )
    assert "none" not in line  # "none" read as "no positions were stated"


def test_status_says_degraded_after_the_phase_and_what_the_turns_were() -> None:
    history = [
        turn("pm", 1, pos("keep", 7)),
        turn("dev", 1, "", has_error=True, error="ProviderModelNotFoundError"),
        turn("rv", 1, pos("keep", 6)),
        turn("pm", 2, pos("keep", 7)),
        turn("dev", 2, "", has_error=True, error="ProviderModelNotFoundError"),
        turn("rv", 2, pos("keep", 6)),
    ]
    result = build_result(state(history, verdict=VerdictRecord(data=VALID))).dump()
    status = result["status"]
    assert isinstance(status, dict) and status["degraded"] is True
    st_ = {
        "sessionID": "ses_verdict",
        "title": "Split?",
        "phase": "done",
        "endReason": "completed",
        "round": 2,
        "stage": "ended",
        "totalRounds": 2,
        "agents": ["pm", "dev", "rv"],
        "observer": "roundtable-observer",
        "elapsed": 3.0,
        "turns": 6,
        "result": result,
    }
    lines = status_lines(st_, tty=False)
    assert lines[1] == "  phase:    done (completed)"
    assert lines[2] == "  DEGRADED: " + "; ".join(status["notes"])
    assert "dev" in lines[2]
    assert lines[-1].endswith("turns: 6 (4 answered, 2 failed)")
    coloured = status_lines(st_, tty=True)
    assert coloured[2].startswith(WARNING) and WARNING not in coloured[1]
    # a healthy or running roundtable: no warning line, the bare count
    running = status_lines({**st_, "result": None}, tty=True)
    assert "DEGRADED" not in "\n".join(running) and running[-1].endswith("turns: 6")


def test_positions_table_shows_the_stance_no_stance_and_a_kept_position() -> None:
    from roundtabled.cli.verdict import positions_table

    rows = positions_table(
        {
            "positions": [
                {"agent": "pm", "label": "Modular monolith first", "stance": "modular monolith",
                 "round": 2, "confidence": 0.7},
                {"agent": "dev", "label": "Dev", "noStance": "the seat's name", "round": 2},
                {"agent": "rv", "label": "modular monolith", "stance": "modular monolith",
                 "round": 1, "carried": True},
            ]
        }
    )  # fmt: skip
    assert "(stance: modular monolith)" in rows[1]
    assert "Dev (no position: the seat's name)" in rows[2]
    assert "(kept from round 1)" in rows[3] and "stance:" not in rows[3]
