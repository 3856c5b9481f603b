"""Sides and the cost preview on the real server with the scripted LLM (docs/result.md).

Proves: ``roundtabled start --side rv=against`` sends rv's side in the prompt rv's model receives
(and only rv's), labels rv's turn in S2 with its side, and the verdict marks rv and leaves it out
of the tally and the consensus; a side for a seat that is not at the table is one ``Error:``
naming ``--side`` (exit 2). ``start --dry-run`` (and ``dryRun`` of the control API) prints the
plan with the server's prices, creates no session and makes no model request; the tool takes
``sides`` and ``dryRun`` (its answer is the plan).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import ScriptedLLM

from .cli_helpers import assert_clean_error, cli
from .conftest import RT, roundtable_config
from .test_tool_shim import run_tool


def say(text: str, label: str, conf: int = 8) -> Text:
    return Text(text=f"{text}\nPosition: {label} — {text.lower()} (confidence {conf}/10)")


VERDICT = {
    "decision": "keep the monolith",
    "confidence": 0.8,
    "consensus": "unanimous",
    "agreements": ["one deploy unit"],
    "disagreements": [],
    "openQuestions": [],
    "nextSteps": [],
}


async def test_a_side_reaches_its_seat_and_is_marked_and_not_counted(rt: RT) -> None:
    rt.llm.script(say("Keep it whole.", "keep the monolith"), agent="pm")
    rt.llm.script(say("One deploy is simpler.", "keep the monolith", 7), agent="dev")
    rt.llm.script(say("Split it, as assigned.", "split now", 9), agent="rv")
    rt.llm.script(
        Text(text=f"1. **Executive summary** keep it.\n```json\n{json.dumps(VERDICT)}\n```\n"),
        agent=OBSERVER_AGENT,
    )
    run = await cli(
        rt,
        "start",
        "--agents",
        "pm,dev,rv",
        "--side",
        "rv=against",
        "--directory",
        rt.directory,
        "Keep the monolith?",
    )
    assert run.code == 0, run
    s2 = run.err.split()[1].rstrip(":")
    rv = rt.llm.requests_for(agent="rv", session=s2, kind="turn")
    pm = rt.llm.requests_for(agent="pm", session=s2, kind="turn")
    assert len(rv) == 1 and len(pm) == 1
    assert "Your assigned side: AGAINST the proposal in the topic" in rv[0].last_user_text
    assert "assigned side" not in pm[0].last_user_text
    # the CLI's verdict marks rv; the consensus is pm's and dev's alone
    row = next(line for line in run.out.splitlines() if line.startswith("rv (side: against)"))
    assert "split now" in row
    status, payload = await rt.api("GET", f"/v1/roundtables/{s2}/result")
    assert status == 200, payload
    v = payload["result"]["verdict"]
    rv_pos = next(p for p in v["positions"] if p["agent"] == "rv")
    assert (rv_pos["label"], rv_pos["side"]) == ("split now", "against")
    assert v["tally"] == [
        {
            "label": "keep the monolith",
            "seats": ["pm", "dev"],
            "weight": 1.5,
            "labels": ["keep the monolith"],
        }
    ]
    assert v["tallyConsensus"] == "unanimous"
    notes = payload["result"]["status"]["notes"]
    assert any(n.startswith("rv argued an assigned side (against)") for n in notes), notes
    # the turn's label in S2 (what the TUI shows) names the side
    texts = [
        p.get("text", "")
        for m in await rt.messages(s2)
        for p in m.get("parts", [])
        if p.get("type") == "text"
    ]
    assert "── rv · round 1 · side: against ──" in texts
    assert "── pm · round 1 ──" in texts


async def test_a_side_for_a_seat_not_at_the_table_is_one_error(rt: RT) -> None:
    run = await cli(
        rt, "start", "--agents", "pm,dev", "--side", "rv=against", "--directory", rt.directory, "x"
    )
    assert_clean_error(run, 2, "--side names 'rv', which is not a seat", "seats: pm, dev")
    assert rt.llm.requests_for(kind="turn") == []


async def _sessions(rt: RT) -> set[str]:
    listed: list[dict[str, Any]] = await rt.oc(
        "GET", "/session", params={"directory": rt.directory}
    )
    return {str(s["id"]) for s in listed}


async def test_dry_run_prints_the_plan_and_creates_nothing(
    rt_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    priced = {"debater-1": {"cost": {"input": 3, "output": 15}}}  # debater-2 has no price
    rt: RT = await rt_factory(roundtable_config(scripted_llm, models=priced))
    before = await _sessions(rt)
    run = await cli(
        rt,
        "start",
        "--agents",
        "pm,dev",
        "--rounds",
        "3",
        "--side",
        "dev=against",
        "--budget-tokens",
        "8000",
        "--dry-run",
        "--directory",
        rt.directory,
        "Split the monolith?",
    )
    assert run.code == 0, run
    out = run.out
    assert out.startswith("Dry run: nothing was started. The plan:"), out
    assert "1. pm — scripted/debater-1 ($3/$15 per 1M in/out)" in out
    # the server reports 0/0 for a model without a configured price: unknown, not $0
    assert "2. dev — scripted/debater-2 (price unknown) · side: against" in out
    assert "cost unknown" in out
    assert "Turns: 3 round(s) × 2 seats = 6 seat turns; requests: 7" in out
    assert "Context full (this call): ~" in out and "Context recent: ~" in out
    assert "budget: expected to stop before " in out and "(budget 8,000 tokens" in out
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {
            "prompt": "Split the monolith?",
            "agents": ["pm", "dev"],
            "rounds": 3,
            "dryRun": True,
            "directory": rt.directory,
        },
    )
    assert status == 200 and data["dryRun"] is True, data
    plan = data["plan"]
    assert (plan["turns"], plan["requests"]) == (6, 7)
    assert plan["seats"][0]["price"] == {"input": 3.0, "output": 15.0}
    assert plan["seats"][1]["price"] is None and plan["estimates"]["full"]["costUsd"] is None
    full, recent = plan["estimates"]["full"], plan["estimates"]["recent"]
    assert full["inputTokens"] > 0 and recent["inputTokens"] <= full["inputTokens"]
    assert len(full["perRound"]) == 3 and full["perRound"] == sorted(full["perRound"])
    # no session was created and no model was asked
    assert await _sessions(rt) == before
    assert rt.llm.requests_for(kind="turn") == []
    status, listed = await rt.api("GET", "/v1/roundtables", params={"all": "true"})
    assert status == 200 and not listed.get("roundtables"), listed


async def test_the_tool_takes_sides_and_dry_run(rt: RT) -> None:
    """The ``roundtable`` tool, as the orchestrator calls it: ``dryRun`` answers with the plan
    (the seat's side in it), and no roundtable is started."""
    before = await _sessions(rt)
    args = {"agents": ["pm", "dev"], "prompt": "x", "sides": {"dev": "neutral"}, "dryRun": True}
    ses, part = await run_tool(rt.server, rt.llm, "roundtable", args, Path(rt.directory))
    out = part.output
    assert part.status == "completed", part
    assert out.startswith("Dry run: nothing was started. The plan:"), out
    assert "2. dev — scripted/debater-2 (price unknown) · side: neutral" in out
    assert await _sessions(rt) == before | {ses}  # only the orchestrator's own session
    assert [r.agent for r in rt.llm.requests if r.agent != "build"] == []  # no seat was asked
    bad = {"agents": ["pm", "dev"], "prompt": "x", "sides": {"rv": "for"}}
    _, part = await run_tool(rt.server, rt.llm, "roundtable", bad, Path(rt.directory))
    assert part.output.startswith("Error: sides names 'rv', which is not a seat")
