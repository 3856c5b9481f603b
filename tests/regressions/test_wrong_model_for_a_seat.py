"""Regression: wrong model for a seat.

Field failure: OpenCode's ``model`` is sticky per session and ``agent`` is not
(docs/opencode-server.md, 'Prompts and turns'): after
a person typed a plain message into S2 (no agent, no model — it runs as the default agent on
whatever model spoke last), later seats answered on the wrong model or with the wrong system
prompt. Proves: with pm, dev, rv and the built-in observer on four different scripted model ids,
every seat request uses that seat's model and system prompt — before and after a plain message
typed during round 1, after one typed once the debate concluded, and in a one-round extension.
"""

from __future__ import annotations

from typing import Any

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.opencode_server import SEAT_PROMPTS
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import ScriptedLLM
from tests.e2e.conftest import RT, SEAT_MODELS, roundtable_config
from tests.e2e.edge_helpers import wait_for

MODELS = {**SEAT_MODELS, OBSERVER_AGENT: "observer-1"}
OBSERVER_PROMPT_HEAD = "You are the impartial roundtable observer."


async def type_plainly(rt: RT, s2: str, text: str) -> None:
    """What a person typing into S2 in the TUI sends: no agent, no model."""
    await rt.oc("POST", f"/session/{s2}/prompt_async", {"parts": [{"type": "text", "text": text}]})


def check_seat_requests(rt: RT, s2: str) -> list[str | None]:
    """Every request of a seat or the observer used that agent's model and system prompt."""
    seen: list[str | None] = []
    for r in rt.llm.requests_for(session=s2):
        if r.agent not in MODELS:
            continue
        seen.append(r.agent)
        assert r.model == MODELS[r.agent], (r.agent, r.model, r.index)
        head = (
            SEAT_PROMPTS[r.agent].splitlines()[0]
            if r.agent in SEAT_PROMPTS
            else OBSERVER_PROMPT_HEAD
        )
        assert r.system.lstrip().startswith(head), (r.agent, r.system[:120])
    return seen


async def test_each_seat_keeps_its_model_after_plain_messages_and_in_the_extension(
    rt_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """Failing input: pm/dev/rv on debater-1/2/3, the built-in observer on observer-1, server
    default model orchestrator-1; ``agents=["pm","dev","rv"]``, 2 rounds. While rv streams its
    round-1 reply the user posts ``{"parts":[{"type":"text","text":"Consider cost too."}]}`` to
    S2 (no agent/model); after the conclusion another plain message; then extend by 1 round."""
    cfg = roundtable_config(
        scripted_llm, extra_agents={OBSERVER_AGENT: {"model": f"scripted/{MODELS[OBSERVER_AGENT]}"}}
    )
    rt = await rt_factory(cfg)
    rt.llm.script(
        Text(text="RV round 1: the risk is lock-in, said slowly.", chunk_size=4, chunk_delay=0.3),
        agent="rv",
    )
    s2 = await rt.start(agents=["pm", "dev", "rv"], prompt="Which cloud?", rounds=2)
    await rt.llm.wait_for_requests(1, within=60, session=s2, agent="rv")
    await type_plainly(rt, s2, "Consider cost too.")
    await rt.result(s2, timeout=120)
    await rt.finalized(s2)
    await rt.wait_idle(s2)
    n = len(rt.llm.requests_for(session=s2))
    await type_plainly(rt, s2, "Thanks. One more thought: what about egress fees?")
    await wait_for(lambda: len(rt.llm.requests_for(session=s2)) > n, 30, "the reply to it")
    await rt.wait_idle(s2)
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {"sessionID": s2, "prompt": "Go deeper on egress fees.", "rounds": 1},
    )
    assert status == 200, data
    await rt.result(s2, timeout=120)
    seen = check_seat_requests(rt, s2)
    turns = [a for a in seen]
    # every seat spoke once in each of the 3 rounds, the observer twice (conclusion + extension)
    for agent in ("pm", "dev", "rv"):
        assert turns.count(agent) == 3, turns
    assert turns.count(OBSERVER_AGENT) == 2, turns
    # the plain messages really ran on a non-seat agent (what made the model sticky)
    assert [r for r in rt.llm.requests_for(session=s2) if r.agent not in MODELS]
