"""What deliberation changed, on the real server with the scripted LLM (docs/result.md,
"deliberation").

Debates through ``roundtabled start`` (what a person runs and reads): a seat changes its mind
and flips the majority; a seat moves but the majority holds; a seat states no position at the
opening (unknown, never agreeing); the independent opening round is the opening. Each asserts
the ``Deliberation:`` line of the verdict block ``start`` prints, and ``verdict.deliberation`` in
``roundtabled export --format json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roundtabled.core.state import OBSERVER_AGENT

from .cli_helpers import cli
from .conftest import RT
from .test_verdict import VERDICT, say, verdict_reply


async def _start(rt: RT, tmp_path: Path, *flags: str) -> tuple[str, dict[str, Any]]:
    """``roundtabled start`` of a 3-seat, 2-round debate (and ``flags``): its stdout and the
    exported JSON."""
    rt.llm.script(verdict_reply("Summary.", VERDICT), agent=OBSERVER_AGENT)
    run = await cli(
        rt,
        "start",
        "--agents",
        "pm,dev,rv",
        "--rounds",
        "2",
        "--directory",
        rt.directory,
        *flags,
        "Split the monolith?",
    )
    assert run.code == 0, run
    ses = next(
        line.split()[1].rstrip(":")
        for line in run.err.splitlines()
        if line.startswith("Roundtable ")
    )
    out_file = tmp_path / "debate.json"
    export = await cli(rt, "export", ses, "--format", "json", "-o", str(out_file))
    assert export.code == 0, export
    return run.out, json.loads(out_file.read_text())


def _line(out: str) -> str:
    verdict = out[out.index("── verdict ──") :].splitlines()
    found = [line for line in verdict if line.startswith("Deliberation:")]
    assert len(found) == 1, verdict
    return found[0]


async def test_a_seat_changing_its_mind_flips_the_majority(rt: RT, tmp_path: Path) -> None:
    rt.llm.script(say("Split.", "split now", 7), say("Still split.", "split now", 7), agent="pm")
    rt.llm.script(
        say("Split.", "split now", 6),
        say("Monolith.", "modular monolith", 8, changed="rv's migration estimate"),
        agent="dev",
    )
    rt.llm.script(
        say("Monolith.", "modular monolith", 8), say("Still.", "modular monolith", 8), agent="rv"
    )
    out, data = await _start(rt, tmp_path)
    assert _line(out) == (
        "Deliberation: the majority changed — opening “split now” (2 of 3, weighted 0.62) → "
        "final “modular monolith” (2 of 3, weighted 0.70); dev moved from “split now” in round 2."
    )
    d = data["verdict"]["deliberation"]
    assert d["majorityChanged"] is True
    assert (d["openingMajority"]["stance"], d["finalMajority"]["stance"]) == (
        "split now",
        "modular monolith",
    )
    assert [(t["label"], t["seats"]) for t in d["openingTally"]] == [
        ("split now", ["pm", "dev"]),
        ("modular monolith", ["rv"]),
    ]
    assert d["moved"] == [
        {
            "agent": "dev",
            "from": "split now",
            "to": "modular monolith",
            "round": 2,
            "why": "rv's migration estimate",
        }
    ]
    assert d["unstatedAtOpening"] == [] and d["rounds"] == 2


async def test_a_seat_moving_to_the_majority_leaves_it_unchanged(rt: RT, tmp_path: Path) -> None:
    rt.llm.script(
        say("Monolith.", "modular monolith", 7), say("Still.", "modular monolith", 7), agent="pm"
    )
    rt.llm.script(
        say("Split.", "split now", 6),
        say("Monolith first.", "Modular monolith first", 7, changed="pm's cost table"),
        agent="dev",
    )
    # rv states no position at the opening: unknown, never counted as agreeing.
    rt.llm.script(say("Thinking.", None), say("Monolith.", "modular monolith", 9), agent="rv")
    out, data = await _start(rt, tmp_path)
    assert _line(out) == (
        "Deliberation: whether the majority changed is unknown — opening unknown (1 of 3 seats "
        "stated no position) → final “modular monolith” (3 of 3, weighted 1.00); dev moved from "
        "“split now” in round 2; rv stated no position at the opening (unknown)."
    )
    d = data["verdict"]["deliberation"]
    assert d["majorityChanged"] is None and d["unstatedAtOpening"] == ["rv"]
    assert [m["agent"] for m in d["moved"]] == ["dev"]


async def test_a_held_majority_is_said_as_not_changed(rt: RT, tmp_path: Path) -> None:
    rt.llm.script(
        say("Monolith.", "modular monolith", 7), say("Still.", "modular monolith", 7), agent="pm"
    )
    rt.llm.script(
        say("Split.", "split now", 6),
        say("Monolith first.", "Modular monolith first", 7, changed="pm's cost table"),
        agent="dev",
    )
    rt.llm.script(
        say("Monolith.", "modular monolith", 8), say("Still.", "modular monolith", 8), agent="rv"
    )
    out, data = await _start(rt, tmp_path)
    assert _line(out) == (
        "Deliberation: opening majority “modular monolith” (2 of 3, weighted 0.71) → final "
        "“modular monolith” (3 of 3, weighted 1.00); dev moved from “split now” in round 2; the "
        "majority did not change."
    )
    d = data["verdict"]["deliberation"]
    assert d["majorityChanged"] is False
    assert [t["labels"] for t in d["finalTally"]] == [
        ["modular monolith", "Modular monolith first"]
    ]


async def test_the_independent_opening_round_is_the_opening(rt: RT, tmp_path: Path) -> None:
    rt.llm.script(say("Split.", "split now", 7), say("Still split.", "split now", 7), agent="pm")
    rt.llm.script(
        say("Split.", "split now", 6),
        say("Monolith.", "modular monolith", 8, changed="rv's migration estimate"),
        agent="dev",
    )
    rt.llm.script(
        say("Monolith.", "modular monolith", 8), say("Still.", "modular monolith", 8), agent="rv"
    )
    out, data = await _start(rt, tmp_path, "--opening", "independent")
    assert _line(out).startswith(
        "Deliberation: the majority changed — opening “split now” (2 of 3, weighted 0.62)"
    )
    d = data["verdict"]["deliberation"]
    assert d["opening"] == "independent" and d["majorityChanged"] is True
    assert [m["agent"] for m in d["moved"]] == ["dev"]
