"""`start --agents pm,ghost` where ghost's configured model is not among the server's providers ran
every round, failed that seat each time and said nothing at the start (exit 0). The seat still
runs and fails honestly (its turns are the server's "Model not found"), but the start answer's
``notes`` now say so at once, from the server's ``GET /config/providers``."""

from __future__ import annotations

from typing import Any

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import ScriptedLLM
from tests.e2e.conftest import RT, roundtable_config

MISSING = "scripted/does-not-exist"


async def test_a_seat_on_a_missing_model_is_named_in_the_start_notes(
    rt_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """Exact failing input: agents pm, ghost, 1 round; ghost's model scripted/does-not-exist."""
    cfg = roundtable_config(scripted_llm, extra_agents={"ghost": {"model": MISSING}})
    rt: RT = await rt_factory(cfg)
    rt.llm.script(Text(text="PM: a view."), agent="pm")
    rt.llm.script(Text(text="SUMMARY: ghost never spoke."), agent=OBSERVER_AGENT)
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {"agents": ["pm", "ghost"], "prompt": "Ghost seat", "rounds": 1, "directory": rt.directory},
    )
    assert status == 200, data
    warning = f"ghost's model {MISSING} is not among the server's providers: its turns will fail"
    assert warning in data["notes"], data["notes"]
    assert not any("pm's model" in n for n in data["notes"]), data["notes"]
    result = await rt.result(str(data["sessionID"]), timeout=60)
    assert "ghost never spoke" in result["summary"]  # the seat still ran (and failed)
