"""Regression "premature idle": a stale ``session.idle`` right after a prompt never ends a turn.

Field failure: the server (or a slow stream) delivered an old ``session.status idle`` +
``session.idle`` for S2 a few milliseconds after the daemon had sent the next prompt, while the
model had not even sent its first byte. The daemon took the turn as done, recorded an empty reply
and prompted the next seat while the first was still thinking.

Proves, on the real ``opencode serve`` with the scripted model: a turn is done only when S2 holds
a completed assistant message answering that turn's own user message, so exactly 6 seat requests
and 1 observer request reach the model, in order, each seat seeing the previous seat's complete
reply, and no history entry is empty.
"""

from __future__ import annotations

import itertools
from typing import Any

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from tests.e2e.edge_helpers import memory_state
from tests.fakes.daemon_proc import assert_each_turn_once

from .conftest import idle_events, inject_after_prompts, proxied_rt

AGENTS = ["pm", "dev", "rv"]
ROUNDS = 2


async def test_stale_idle_after_each_prompt_never_completes_the_turn(rt_factory: Any) -> None:
    """Exact failing input: 3 seats × 2 rounds; every reply's first byte is delayed 1.5 s
    (``Text(..., first_byte_delay=1.5)``); ~20 ms after each ``prompt_async`` the proxy injects a
    stale ``session.status`` idle and a ``session.idle`` for S2."""
    rt, proxy = await proxied_rt(rt_factory)
    inject_after_prompts(proxy, 0.02, lambda session: idle_events(rt.directory, session))
    replies = {
        (agent, r): f"{agent.upper()} round {r + 1}: a complete, considered answer #{agent}{r}."
        for r in range(ROUNDS)
        for agent in AGENTS
    }
    for agent in AGENTS:
        rt.llm.script(
            *[Text(text=replies[(agent, r)], first_byte_delay=1.5) for r in range(ROUNDS)],
            agent=agent,
        )
    rt.llm.script(
        Text(text="SUMMARY: all six turns heard.", first_byte_delay=1.5), agent=OBSERVER_AGENT
    )
    try:
        s1 = await rt.new_parent()
        s2 = await rt.start(
            agents=AGENTS, prompt="Premature idle: pick a queue", rounds=ROUNDS, parentSessionID=s1
        )
        result = await rt.result(s2, timeout=120)
        await rt.finalized(s2)
    finally:
        await proxy.stop()
    # The fault was really injected after every prompt (6 seats + observer).
    assert proxy.prompts.get(s2, 0) == len(AGENTS) * ROUNDS + 1, proxy.prompts
    assert "SUMMARY: all six turns heard." in result["summary"]
    msgs = await rt.messages(s2)
    assert_each_turn_once(msgs, s2, rt.daemon.signer, rt.llm, AGENTS, ROUNDS, label="premature")
    reqs = rt.llm.requests_for(session=s2, kind="turn")
    assert [r.agent for r in reqs] == AGENTS * ROUNDS + [OBSERVER_AGENT]
    # None empty: every request carried a prompt, and each seat after the first saw the complete
    # reply of the seat before it (it would see nothing, or a partial, after a premature idle).
    assert all(r.last_user_text.strip() for r in reqs)
    order = [(a, r) for r in range(ROUNDS) for a in AGENTS]
    for prev, req in zip(order, reqs[1:], strict=False):
        seen = "\n".join(str(m.get("content")) for m in req.messages)
        assert replies[prev] in seen, f"{req.agent} did not see {prev}'s reply"
    # A request is only sent once the previous reply has fully finished.
    for a, b in itertools.pairwise(reqs):
        assert a.finished_at is not None and a.finished_at <= b.t_mono, (a.agent, b.agent)
    history = memory_state(rt, s2).seat_turns()
    assert [e.response.strip() for e in history] == [replies[k] for k in order]
    assert not any(e.has_error for e in history)
