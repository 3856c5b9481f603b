"""Deliberation on the real server with the scripted LLM: stop on convergence, a budget hit
mid-round, a preset with overrides, an extend of a converged debate, the diversity warning
(docs/deliberation.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roundtabled.core.state import OBSERVER_AGENT, EndReason, RoundtableState
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import default_text

from .conftest import RT, roundtable_config

AGENTS = ["pm", "dev", "rv"]


def said(agent: str, rnd: int, label: str) -> Text:
    # Varied filler, so that a steady position is not also a repetition (loop detection).
    return Text(
        text=default_text(agent, label, rnd) + f"\nPosition: {label} — {agent}'s view "
        "(confidence 7/10)"
    )


def script_rounds(rt: RT, labels: dict[str, list[str]], start: int = 1) -> None:
    for agent, per_round in labels.items():
        rt.llm.script(
            *(said(agent, start + i, lbl) for i, lbl in enumerate(per_round)), agent=agent
        )


def seat_turns(rt: RT, s2: str) -> list[str | None]:
    return [
        r.agent for r in rt.llm.requests_for(session=s2, kind="turn") if r.agent != OBSERVER_AGENT
    ]


def observer_requests(rt: RT, s2: str) -> list[Any]:
    return rt.llm.requests_for(session=s2, agent=OBSERVER_AGENT, kind="turn")


async def final_state(rt: RT, s2: str) -> RoundtableState:
    await rt.finalized(s2)
    return await rt.daemon.engine.load_state(s2)


async def test_until_converged_stops_once_every_seat_keeps_its_position(rt: RT) -> None:
    script_rounds(rt, {"pm": ["monolith"] * 2, "dev": ["monolith"] * 2, "rv": ["split"] * 2})
    s1 = await rt.new_parent()
    s2 = await rt.start(
        agents=AGENTS, prompt="Split the monolith?", rounds=4, until="converged", parentSessionID=s1
    )
    result = await rt.result(s2)
    assert seat_turns(rt, s2) == AGENTS * 2  # rounds 3 and 4 never ran
    [obs] = observer_requests(rt, s2)
    state = await final_state(rt, s2)
    assert state.end_reason == EndReason.CONVERGED
    assert state.options.until == "converged"
    note = next(n for n in state.notes if n.startswith("converged after round 2 of 4"))
    assert "held its position from round 1 to round 2" in note
    assert note in obs.last_user_text  # the observer is told why the debate stopped
    status = result.get("status")
    if status is not None:
        assert status["endReason"] == "converged"
        assert note in status["notes"]


async def test_until_converged_never_stops_while_labels_change(rt: RT) -> None:
    script_rounds(rt, {a: [f"{a} {r}" for r in range(1, 4)] for a in AGENTS})
    s2 = await rt.start(agents=AGENTS, prompt="Split?", rounds=3, until="converged")
    await rt.result(s2)
    assert seat_turns(rt, s2) == AGENTS * 3
    state = await final_state(rt, s2)
    assert state.end_reason == EndReason.COMPLETED


async def test_a_budget_hit_mid_round_stops_before_the_turn_and_the_observer_runs(rt: RT) -> None:
    # Every scripted reply reports 100 input + 20 output tokens. After pm's round-2 turn 480 are
    # spent; dev's next turn projects 120 + 40 and the observer's reserve is 120 + 80:
    # 480 + 160 > 700 - 200, so the debate stops mid-round (docs/deliberation.md).
    s1 = await rt.new_parent()
    s2 = await rt.start(
        agents=AGENTS, prompt="Split?", rounds=3, budget={"tokens": 700}, parentSessionID=s1
    )
    result = await rt.result(s2)
    assert seat_turns(rt, s2) == ["pm", "dev", "rv", "pm"]
    assert len(observer_requests(rt, s2)) == 1  # the observer always runs
    state = await final_state(rt, s2)
    assert state.end_reason == EndReason.BUDGET
    note = next(n for n in state.notes if n.startswith("budget:"))
    assert "spent 480 tokens of 700 tokens" in note and "dev's next turn" in note
    msgs = await rt.messages(s2)
    spent = sum(
        int((m["info"].get("tokens") or {}).get("input") or 0)
        + int((m["info"].get("tokens") or {}).get("output") or 0)
        for m in msgs
        if m["info"]["role"] == "assistant"
    )
    assert spent == 600 <= 700
    if result.get("status") is not None:
        assert result["status"]["endReason"] == "budget"


PRESETS = """
[presets.panel]
agents = ["pm", "dev", "rv"]
rounds = 3
until = "converged"
budget = { tokens = 100000 }
title_prefix = "[panel] "
"""


async def test_a_preset_with_overrides(rt: RT, tmp_path: Path) -> None:
    config = tmp_path / "presets.toml"
    config.write_text(PRESETS)
    rt.settings_env["ROUNDTABLED_CONFIG"] = str(config)
    await rt.restart_daemon()
    status, data = await rt.api("GET", "/v1/agents")
    assert status == 200 and "Presets (roundtable's preset argument): panel" in data["text"]
    assert data["presets"] == [{"name": "panel", "agents": AGENTS, "rounds": 3}]

    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {"prompt": "x", "preset": "nope", "directory": rt.directory},
    )
    assert status == 400 and data["field"] == "preset"
    assert "available presets: panel" in data["error"]

    s2 = await rt.start(prompt="Ship on Friday?", preset="panel", rounds=1, until="rounds")
    await rt.result(s2)
    assert seat_turns(rt, s2) == AGENTS  # rounds=1 from the call, agents from the preset
    state = await final_state(rt, s2)
    assert state.title.startswith("[panel] (Roundtable) - Ship on Friday?")
    assert state.options.preset == "panel"
    assert state.options.until == "rounds"  # the call's value beats the preset's
    assert state.options.budget is not None and state.options.budget.tokens == 100000


async def test_extend_of_a_converged_debate_debates_two_rounds_before_stopping_again(
    rt: RT,
) -> None:
    script_rounds(rt, {a: [f"{a} view"] * 2 for a in AGENTS})
    s2 = await rt.start(agents=AGENTS, prompt="Split?", rounds=3, until="converged")
    await rt.result(s2)
    assert seat_turns(rt, s2) == AGENTS * 2
    first = await final_state(rt, s2)
    assert first.end_reason == EndReason.CONVERGED

    script_rounds(rt, {a: [f"{a} view"] * 3 for a in AGENTS}, start=3)
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {"sessionID": s2, "prompt": "Continue: what about the cost?", "rounds": 3},
    )
    assert status == 200, data
    await rt.result(s2)
    # The extension starts right after the converged round 2 and compares only its own rounds:
    # round 3 cannot converge, round 4 (same labels as round 3) does; round 5 never runs.
    assert seat_turns(rt, s2) == AGENTS * 4
    state = await final_state(rt, s2)
    assert state.end_reason == EndReason.CONVERGED
    assert [e.round for e in state.seat_turns()] == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    assert any(n.startswith("converged after round 4 of 5") for n in state.notes)
    assert len(rt.llm.requests_for(session=s2, agent=OBSERVER_AGENT, kind="turn")) == 2


TWIN_PROMPT = "You are a careful analyst in a roundtable debate. Argue your case briefly."


async def test_diversity_warning_when_every_seat_is_the_same_model_and_prompt(
    rt_factory: Any, scripted_llm: Any
) -> None:
    twins = {
        name: {"mode": "subagent", "model": "scripted/debater-1", "prompt": TWIN_PROMPT}
        for name in ("twin1", "twin2")
    }
    rt = await rt_factory(roundtable_config(scripted_llm, extra_agents=twins))
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {"agents": ["twin1", "twin2"], "prompt": "Tabs or spaces?", "directory": rt.directory},
    )
    assert status == 200, data
    s2 = data["sessionID"]
    assert data["notes"][0].startswith("low diversity")  # at once, for the CLI to show
    await rt.result(s2)
    state = await final_state(rt, s2)
    assert any(
        n.startswith("low diversity: every seat (twin1, twin2) runs scripted/debater-1")
        for n in state.notes
    )
    mixed = await rt.start(agents=["pm", "dev"], prompt="Tabs or spaces?")
    await rt.result(mixed)
    assert not any("low diversity" in n for n in (await final_state(rt, mixed)).notes)


async def test_bad_deliberation_arguments_name_the_field(rt: RT) -> None:
    for body, field in (
        ({"until": "forever"}, "until"),
        ({"budget": {"tokens": -5}}, "budget"),
        ({"context": "everything"}, "context"),
    ):
        status, data = await rt.api(
            "POST",
            "/v1/roundtables",
            {"agents": AGENTS, "prompt": "x", "directory": rt.directory, **body},
        )
        assert status == 400 and data["field"] == field, data
        assert data["error"].startswith("Error:")
