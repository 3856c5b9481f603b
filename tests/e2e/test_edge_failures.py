"""Failing seats, turn timeouts and loops on the real server with the scripted LLM
(docs/behaviour.md).

Proves:
- a provider error ends the turn as a failure: recorded in ``errors``, the history entry has
  ``hasError``, the toast ``"DEV failed on Round 1. Skipping to RV."`` is shown and the next agent
  speaks; a turn the server is still retrying (``GET /session/status`` ``retry``) is not a failure;
  when every agent of a round fails the debate ends, the observer still consolidates and the result
  says why (docs/behaviour.md, 'A seat fails');
- a turn longer than the per-call ``turnTimeout`` is aborted, its partial text stays in the history
  marked as cut off, the debate goes on, and the abort's duplicate idle events never advance the
  debate twice; the daemon-wide ``turn_timeout`` applies when no per-call value is given;
- two near-identical responses (Jaccard bigrams > 0.85) end the debate with the spec's repetition
  text, after the observer consolidated the partial debate.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from roundtabled.core.result import REPETITION_TEXT
from roundtabled.core.state import OBSERVER_AGENT, EndReason, Phase
from roundtabled.offline.scripted_actions import Hang, HttpError, Text

from .conftest import RT
from .edge_helpers import Toasts, memory_state, stored_state, turn_agents, wait_for

# ------------------------------------------------------------------------------------------------
# 1. Agent failure (docs/behaviour.md, 'A seat fails')
# ------------------------------------------------------------------------------------------------


async def test_agent_failure_is_recorded_toasted_and_skipped_to_the_next_agent(rt: RT) -> None:
    s1 = await rt.new_parent()
    rt.llm.script(Text(text="PM: we should ship it."), agent="pm")
    rt.llm.script(HttpError(status=400, message="dev provider exploded"), agent="dev")
    rt.llm.script(Text(text="RV: ship it with a kill switch."), agent="rv")
    rt.llm.script(Text(text="SUMMARY: ship with a kill switch."), agent=OBSERVER_AGENT)
    async with Toasts(rt) as toasts:
        s2 = await rt.start(agents=["pm", "dev", "rv"], prompt="Ship it?", parentSessionID=s1)
        result = await rt.result(s2)
        await toasts.wait_for("DEV failed on Round 1. Skipping to RV.")
    assert "SUMMARY: ship with a kill switch." in result["summary"]
    assert result["endReason"] == "completed"
    assert turn_agents(rt, s2) == ["pm", "dev", "rv", OBSERVER_AGENT]
    state = memory_state(rt, s2)
    entries = {e.agent: e for e in state.seat_turns()}
    assert entries["dev"].has_error and "dev provider exploded" in (entries["dev"].error or "")
    assert not entries["pm"].has_error and not entries["rv"].has_error
    assert any("dev" in e and "round 1" in e for e in state.errors), state.errors
    # The failure survives in the final state block written to S2.
    stored = await stored_state(rt, s2)
    assert [e.has_error for e in stored.seat_turns()] == [False, True, False]
    # rv was told who failed.
    rv_req = rt.llm.requests_for(session=s2, agent="rv", kind="turn")[0]
    assert "dev (round 1) failed" in rv_req.last_user_text


async def test_every_agent_failing_in_a_round_ends_the_debate_observer_consolidates(
    rt: RT,
) -> None:
    s1 = await rt.new_parent()
    rt.llm.script(
        Text(text="PM round 1: fine."), HttpError(status=400, message="pm down"), agent="pm"
    )
    rt.llm.script(
        Text(text="DEV round 1: fine."), HttpError(status=400, message="dev down"), agent="dev"
    )
    rt.llm.script(Text(text="SUMMARY of a debate that lost its panel."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Rewrite?", rounds=3, parentSessionID=s1)
    result = await rt.result(s2)
    # Round 3 never ran; the observer consolidated rounds 1–2.
    assert turn_agents(rt, s2) == ["pm", "dev", "pm", "dev", OBSERVER_AGENT]
    assert result["endReason"] == EndReason.ALL_FAILED.value
    assert "Roundtable aborted: every agent failed in round 2" in result["text"]
    assert "SUMMARY of a debate that lost its panel." in result["summary"]
    obs_prompt = rt.llm.requests_for(session=s2, agent=OBSERVER_AGENT)[0].last_user_text
    assert "every agent failed in round 2" in obs_prompt
    assert "PM round 1: fine." in obs_prompt
    state = memory_state(rt, s2)
    assert state.phase == Phase.DONE
    assert len([e for e in state.errors if "down" in e]) == 2


async def test_a_turn_the_server_is_retrying_is_not_a_failure(rt: RT) -> None:
    """429 with ``retry-after: 3``: the server shows ``retry`` for S2 while the daemon waits;
    the retried turn then succeeds and counts as a normal turn (no failure, no toast)."""
    s1 = await rt.new_parent()
    rt.llm.script(
        HttpError(status=429, message="overloaded, retry", retry_after=3),
        Text(text="PM after the retry: ship it."),
        agent="pm",
    )
    async with Toasts(rt) as toasts:
        s2 = await rt.start(agents=["pm", "dev"], prompt="Retry?", parentSessionID=s1)

        async def retrying() -> bool:
            st = await rt.oc("GET", "/session/status", params={"directory": rt.directory})
            return (st.get(s2) or {}).get("type") == "retry"

        seen_retry = False
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not seen_retry:
            seen_retry = await retrying()
            if not seen_retry:
                await asyncio.sleep(0.1)
        assert seen_retry, "the server never reported retry for S2"
        # While the server retries, the daemon records nothing and prompts nobody else.
        state = memory_state(rt, s2)
        assert state.pending is not None and state.pending.agent == "pm"
        assert state.history == [] and state.errors == []
        result = await rt.result(s2)
    assert result["endReason"] == "completed"
    assert turn_agents(rt, s2) == ["pm", "pm", "dev", OBSERVER_AGENT]  # pm = 1 try + 1 retry
    pm = memory_state(rt, s2).seat_turns()[0]
    assert not pm.has_error and pm.response == "PM after the retry: ship it."
    assert memory_state(rt, s2).errors == []
    assert not any("failed" in m for m in toasts.messages), toasts.messages


# ------------------------------------------------------------------------------------------------
# 2. Timeout (docs/behaviour.md, 'Turn timeout')
# ------------------------------------------------------------------------------------------------


async def test_turn_timeout_aborts_keeps_partial_text_cut_off_and_advances_once(rt: RT) -> None:
    await rt.warm_up()  # pm's model request must come inside its 3 s
    s1 = await rt.new_parent()
    partial = "PM partial words that stream slowly and never finish " * 4
    rt.llm.script(Text(text=partial, chunk_size=10, chunk_delay=0.25), agent="pm")
    rt.llm.script(Text(text="DEV after the cut: fine."), agent="dev")
    rt.llm.script(Text(text="SUMMARY after a timeout."), agent=OBSERVER_AGENT)
    async with Toasts(rt) as toasts:
        t_start = time.monotonic()
        s2 = await rt.start(agents=["pm", "dev"], prompt="Slow?", parentSessionID=s1, turnTimeout=3)
        result = await rt.result(s2)
        await toasts.wait_for("PM failed on Round 1. Skipping to DEV.")
    pm_req = rt.llm.requests_for(session=s2, agent="pm")[0]
    assert pm_req.disconnected, "the timed-out turn was not aborted"
    assert pm_req.disconnected_at is not None
    # Aborted at the timeout (3 s after the prompt), not before, not much later.
    assert 2.9 <= pm_req.disconnected_at - t_start < 15
    pm = memory_state(rt, s2).seat_turns()[0]
    assert pm.cut_off and pm.has_error and "timed out after 3 s" in (pm.error or "")
    assert pm.response and partial.startswith(pm.response.strip()[:20])
    # The abort's extra idle events did not advance the debate twice (counted once nothing
    # is left that could prompt: finalized, the worker retired, S2 idle).
    await rt.settled(s2)
    assert turn_agents(rt, s2) == ["pm", "dev", OBSERVER_AGENT]
    assert result["endReason"] == "completed"
    obs_prompt = rt.llm.requests_for(session=s2, agent=OBSERVER_AGENT)[0].last_user_text
    assert "CUT OFF at the time limit" in obs_prompt
    dev_req = rt.llm.requests_for(session=s2, agent="dev")[0]
    assert "pm (round 1) was cut off at the time limit" in dev_req.last_user_text
    stored = await stored_state(rt, s2)
    assert stored.seat_turns()[0].cut_off


async def test_daemon_turn_timeout_setting_applies_without_a_per_call_value(
    rt_factory: Any,
) -> None:
    rt = await rt_factory(daemon={"turn_timeout": 3})
    await rt.warm_up()  # pm's model request must come inside its 3 s
    rt.llm.script(Hang(max_seconds=120), agent="pm")
    s2 = await rt.start(agents=["pm", "dev"], prompt="Hang?")
    t0 = time.monotonic()
    result = await rt.result(s2)
    assert time.monotonic() - t0 < 30
    assert turn_agents(rt, s2) == ["pm", "dev", OBSERVER_AGENT]
    pm = memory_state(rt, s2).seat_turns()[0]
    assert pm.cut_off and pm.response == ""
    assert rt.llm.requests_for(session=s2, agent="pm")[0].disconnected
    assert result["endReason"] == "completed"


# ------------------------------------------------------------------------------------------------
# 3. Loop detection (docs/behaviour.md, 'Loops')
# ------------------------------------------------------------------------------------------------

LOOP = (
    "I still believe the modular monolith is the right call because it keeps deployment simple, "
    "limits the blast radius of payment failures and lets the team move fast."
)


async def test_repetition_ends_the_debate_observer_consolidates_result_states_why(
    rt: RT,
) -> None:
    s1 = await rt.new_parent()
    rt.llm.script(
        Text(text="PM r1: we need microservices for team autonomy and independent scaling."),
        Text(text="PM r2: fine, a modular monolith with strict module boundaries then."),
        agent="pm",
    )
    rt.llm.script(Text(text=LOOP), Text(text="**" + LOOP + "**"), agent="dev")
    rt.llm.script(Text(text="SUMMARY: impasse on the monolith."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Architecture?", rounds=4, parentSessionID=s1)
    result = await rt.result(s2)
    # dev repeated itself in round 2: rounds 3–4 never ran, the observer still ran.
    assert turn_agents(rt, s2) == ["pm", "dev", "pm", "dev", OBSERVER_AGENT]
    assert result["endReason"] == EndReason.REPETITION.value
    assert REPETITION_TEXT in result["text"]
    assert "SUMMARY: impasse on the monolith." in result["summary"]
    obs_prompt = rt.llm.requests_for(session=s2, agent=OBSERVER_AGENT)[0].last_user_text
    assert "repetition detected" in obs_prompt and "PM r2" in obs_prompt
    await rt.finalized(s2)
    msgs = await rt.messages(s1)
    assert any(REPETITION_TEXT in str(m) for m in msgs)


async def test_loop_threshold_is_configurable(rt_factory: Any) -> None:
    """The same repetition with ``loop_threshold = 1.0`` (nothing is a loop) runs every round."""
    rt = await rt_factory(daemon={"loop_threshold": 1.0})
    rt.llm.script(Text(text="PM r1: microservices."), Text(text="PM r2: monolith."), agent="pm")
    rt.llm.script(Text(text=LOOP), Text(text=LOOP), agent="dev")
    s2 = await rt.start(agents=["pm", "dev"], prompt="Architecture?", rounds=2)
    result = await rt.result(s2)
    assert turn_agents(rt, s2) == ["pm", "dev", "pm", "dev", OBSERVER_AGENT]
    assert result["endReason"] == "completed"
    await wait_for(lambda: memory_state(rt, s2).phase == Phase.DONE, 5, "done")
