"""Roundtables side by side and extend on the real server with the scripted LLM
(docs/behaviour.md).

Proves:
- five roundtables at once (two from the same S1, one whose seat fails, one whose seat hangs)
  each finish with their own agents in their own order and their own result; the hanging table
  does not delay the others;
- extend: rounds accumulate, the history is kept, agents and observer come from the original;
  continuation vs new topic by the prefix heuristic (case-insensitive) or ``extendMode``; a state
  written by an earlier daemon process is extended; ``agents`` with ``sessionID`` is refused unless
  equal to the stored list; still active → ``Error:``; a stuck state (phase active, every expected
  reply present) is recovered to done with an info log; unknown and non-roundtable sessions →
  ``Error:``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from roundtabled.core.state import OBSERVER_AGENT, Phase
from roundtabled.offline.scripted_actions import Hang, HttpError

from .conftest import RT, roundtable_config
from .edge_helpers import memory_state, stored_state, turn_agents, write_state

EXTRA_SEATS = {
    "ops": {
        "mode": "subagent",
        "description": "Operations seat",
        "prompt": "You are ops, the operations engineer in a roundtable debate.",
        "model": "scripted/debater-1",
        "permission": {"*": "deny"},
    },
    "slow": {
        "mode": "subagent",
        "description": "A seat whose model hangs",
        "prompt": "You are slow, a seat that never answers in time.",
        "model": "scripted/debater-2",
        "permission": {"*": "deny"},
    },
}

# ------------------------------------------------------------------------------------------------
# 8. Parallel roundtables (docs/behaviour.md, 'Roundtables side by side')
# ------------------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_five_parallel_roundtables_finish_independently_in_order(
    rt_factory: Any, scripted_llm: Any
) -> None:
    rt: RT = await rt_factory(roundtable_config(scripted_llm, extra_agents=EXTRA_SEATS))
    rt.llm.script(HttpError(status=400, message="ops is down"), agent="ops")
    rt.llm.script(Hang(max_seconds=120), agent="slow")
    s1a, s1b, s1c = await asyncio.gather(rt.new_parent("A"), rt.new_parent("B"), rt.new_parent("C"))
    specs: list[tuple[str, list[str], int, dict[str, Any]]] = [
        (s1a, ["pm", "dev"], 2, {}),
        (s1a, ["rv", "pm", "dev"], 1, {}),  # same S1 as the first
        (s1b, ["dev", "rv"], 2, {}),
        (s1c, ["ops", "pm"], 1, {}),  # ops fails
        (s1c, ["slow", "rv"], 1, {"turnTimeout": 35}),  # slow hangs until its timeout
    ]
    t0 = time.monotonic()
    # The slow table starts first: any serialization of tables would put the others behind it.
    slow_s1, slow_agents, slow_rounds, slow_kw = specs[4]
    slow = await rt.start(
        agents=slow_agents, prompt="Topic 4", rounds=slow_rounds, parentSessionID=slow_s1, **slow_kw
    )
    others = await asyncio.gather(
        *(
            rt.start(agents=agents, prompt=f"Topic {i}", rounds=rounds, parentSessionID=s1, **kw)
            for i, (s1, agents, rounds, kw) in enumerate(specs[:4])
        )
    )
    ids = [*others, slow]
    results = await asyncio.gather(*(rt.result(s2, timeout=120) for s2 in ids[:4]))
    fast_done = time.monotonic() - t0
    # The four others finished while the slow table was still waiting for its seat.
    assert memory_state(rt, ids[4]).active and fast_done < 35, fast_done
    slow_result = await rt.result(ids[4], timeout=90)
    for s2, (s1, agents, rounds, _), result in zip(
        ids, specs, [*results, slow_result], strict=True
    ):
        assert turn_agents(rt, s2) == [*agents * rounds, OBSERVER_AGENT], s2
        assert result["sessionID"] == s2
        obs = rt.llm.requests_for(session=s2, agent=OBSERVER_AGENT)
        assert result["summary"].strip() == obs[0].reply_text.strip()
        info = await rt.session(s2)
        assert info["parentID"] == s1
    assert memory_state(rt, ids[3]).seat_turns()[0].has_error
    assert memory_state(rt, ids[4]).seat_turns()[0].cut_off
    assert len({r["summary"] for r in results}) == 4


# ------------------------------------------------------------------------------------------------
# 10. Extend (docs/behaviour.md, 'Extend')
# ------------------------------------------------------------------------------------------------


async def conclude(rt: RT, **body: Any) -> str:
    s1 = await rt.new_parent()
    s2 = await rt.start(parentSessionID=s1, **body)
    await rt.result(s2)
    await rt.finalized(s2)
    return s2


async def extend(rt: RT, s2: str, **body: Any) -> tuple[int, Any]:
    return await rt.api(
        "POST", "/v1/roundtables", {"sessionID": s2, "directory": rt.directory, **body}
    )


@pytest.mark.parametrize(
    ("prompt", "mode", "expected"),
    [
        pytest.param("DIVE DEEPER into the costs", None, "Continuation: DIVE DEEPER", id="cont"),
        pytest.param("Now plan the migration", None, "New challenge: Now plan", id="new-topic"),
        pytest.param(
            "Continue: but as a new topic",
            "new-topic",
            "New challenge: Continue",
            id="extendMode-overrides",
        ),
    ],
)
async def test_extend_accumulates_rounds_keeps_history_and_picks_the_topic_mode(
    rt: RT, prompt: str, mode: str | None, expected: str
) -> None:
    s2 = await conclude(rt, agents=["pm", "dev"], prompt="Original payments topic", observer="rv")
    first = memory_state(rt, s2)
    body: dict[str, Any] = {"prompt": prompt, "rounds": 2}
    if mode:
        body["extendMode"] = mode
    status, data = await extend(rt, s2, **body)
    assert status == 200, data
    assert data["sessionID"] == s2 and data["extended"] is True
    await rt.result(s2)
    assert turn_agents(rt, s2) == ["pm", "dev", "rv", "pm", "dev", "pm", "dev", "rv"]
    state = memory_state(rt, s2)
    assert state.total_rounds == 3
    assert [(e.agent, e.round) for e in state.seat_turns()] == [
        ("pm", 1),
        ("dev", 1),
        ("pm", 2),
        ("dev", 2),
        ("pm", 3),
        ("dev", 3),
    ]
    assert state.history[: len(first.history)] == first.history  # history preserved
    ext_reqs = rt.llm.requests_for(session=s2, kind="turn")[3:]
    assert expected in ext_reqs[0].last_user_text
    if expected.startswith("Continuation"):
        assert "Original topic: Original payments topic" in ext_reqs[0].last_user_text
    assert "Your role: rv" in ext_reqs[-1].last_user_text  # the original observer


async def test_extend_a_state_written_by_an_earlier_daemon_process(rt: RT) -> None:
    s2 = await conclude(rt, agents=["dev", "pm"], prompt="Topic before the restart")
    await rt.restart_daemon()
    assert s2 not in rt.daemon.engine.recent  # nothing in memory: read from S2
    status, data = await extend(rt, s2, prompt="Continue with the risks", rounds=1)
    assert status == 200, data
    await rt.result(s2)
    assert turn_agents(rt, s2) == ["dev", "pm", OBSERVER_AGENT, "dev", "pm", OBSERVER_AGENT]
    state = memory_state(rt, s2)
    assert state.total_rounds == 2 and len(state.seat_turns()) == 4


async def test_extend_refuses_other_agents_or_observer_and_accepts_the_same(rt: RT) -> None:
    s2 = await conclude(rt, agents=["pm", "dev"], prompt="Agents fixed")
    status, data = await extend(rt, s2, prompt="Continue", agents=["dev", "pm"])
    assert status == 400 and data["error"].startswith("Error:") and data["field"] == "agents"
    assert "pm, dev" in data["error"]
    status, data = await extend(rt, s2, prompt="Continue", observer="rv")
    assert status == 400 and data["field"] == "observer"
    status, data = await extend(rt, s2, prompt="Continue", agents=["pm", "dev"])
    assert status == 200, data
    await rt.result(s2)
    assert turn_agents(rt, s2)[-3:] == ["pm", "dev", OBSERVER_AGENT]


async def test_extend_of_an_active_roundtable_is_an_error(rt: RT) -> None:
    rt.llm.script(Hang(max_seconds=60), agent="pm")
    s1 = await rt.new_parent()
    s2 = await rt.start(agents=["pm", "dev"], prompt="Busy", parentSessionID=s1)
    status, data = await extend(rt, s2, prompt="Continue", rounds=1)
    assert status == 400 and data["error"].startswith("Error:")
    assert "still active" in data["error"]
    await rt.api("POST", f"/v1/roundtables/{s2}/cancel", {"summarize": False})


async def test_extend_recovers_a_stuck_roundtable_to_done(
    rt: RT, caplog: pytest.LogCaptureFixture
) -> None:
    """Phase ``active`` stored, but every expected reply exists (an extend interrupted by a kill
    after the debate ended): the extend recovers it to done, logs at info, and proceeds."""
    s2 = await conclude(rt, agents=["pm", "dev"], prompt="Stuck topic")
    done = await stored_state(rt, s2)
    await rt.restart_daemon()
    await write_state(
        rt, done.model_copy(update={"phase": Phase.ACTIVE, "history": [], "summary": None})
    )
    with caplog.at_level(logging.INFO, logger="roundtabled.engine"):
        status, data = await extend(rt, s2, prompt="Continue after the freeze", rounds=1)
    assert status == 200, data
    assert any(
        "recovering it to done" in r.getMessage() and r.levelno == logging.INFO
        for r in caplog.records
    )
    await rt.result(s2)
    assert turn_agents(rt, s2) == ["pm", "dev", OBSERVER_AGENT, "pm", "dev", OBSERVER_AGENT]


async def test_extend_of_an_unknown_or_non_roundtable_session_is_an_error(rt: RT) -> None:
    plain = await rt.new_parent("Just a chat")
    for sid in (plain, "ses_doesnotexist000000000000"):
        status, data = await extend(rt, sid, prompt="Continue", rounds=1)
        assert status == 400, data
        assert data["error"].startswith("Error:") and data["field"] == "sessionID"
