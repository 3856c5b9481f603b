"""Regression (the engine test of the same name, then on the real server): a stale idle during a
turn never hands off early.

Failure: the turn mirror took a stale ``session.status idle`` + ``session.idle`` that came while
pm's model had not sent its first byte; the next pass (the resync) decided from the mirror with
status idle although pm's reply was not completed, and after the 10 s grace for a reply that
never completes pm was settled as "never completed" and dev was prompted while pm still ran:
two prompts in flight.

Proves, on the real ``opencode serve`` with the scripted model: pm's slow reply (first byte
after 20 s) is recorded, and dev is prompted only after it.
"""

from __future__ import annotations

from typing import Any

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from tests.e2e.edge_helpers import memory_state

from .conftest import idle_events, inject_after_prompts, proxied_rt


async def test_a_stale_idle_while_pm_thinks_never_prompts_dev_early(rt_factory: Any) -> None:
    """Exact input: pm, dev × 1; pm's first byte after 20 s; 11 s after pm's prompt (past the
    grace for a reply that never completes) the proxy injects a stale ``session.status`` idle
    and a ``session.idle`` for S2; the daemon resyncs every 2 s."""
    rt, proxy = await proxied_rt(rt_factory)

    def after_pm_s_prompt(session: str) -> list[dict[str, Any]]:
        return idle_events(rt.directory, session) if len(prompted) == 1 else []  # the first

    prompted = inject_after_prompts(proxy, 11.0, after_pm_s_prompt)
    rt.llm.script(Text(text="PM: thinking slowly, then sure.", first_byte_delay=20), agent="pm")
    rt.llm.script(Text(text="DEV: agreed."), agent="dev")
    rt.llm.script(Text(text="SUMMARY."), agent=OBSERVER_AGENT)
    try:
        s2 = await rt.start(agents=["pm", "dev"], prompt="Stale idle during a turn", rounds=1)
        await rt.result(s2, timeout=120)
    finally:
        await proxy.stop()
    assert prompted[:1] == [s2]
    pm = memory_state(rt, s2).seat_turns()[0]
    assert pm.response == "PM: thinking slowly, then sure.", pm
    reqs = rt.llm.requests_for(session=s2, kind="turn")
    assert [r.agent for r in reqs] == ["pm", "dev", OBSERVER_AGENT]
    assert "PM: thinking slowly, then sure." in reqs[1].last_user_text
