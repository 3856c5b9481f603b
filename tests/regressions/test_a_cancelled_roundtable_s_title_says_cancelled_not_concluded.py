"""A cancelled roundtable's session (S2) got the title suffix `` · CONCLUDED``, as did one whose
every seat failed: the TUI's session list read as if both had concluded. Now S2's title ends with
the word its state card opens with (``roundtabled.core.state.end_word``): `` · CANCELLED`` for a
cancelled one, `` · ENDED`` for one whose seats all failed, `` · CONCLUDED`` only for a debate
that completed (the real 1.x server; only the model is scripted).
"""

from __future__ import annotations

from roundtabled.offline.scripted_actions import Hang, HttpError, Text
from tests.e2e.cli_helpers import cli
from tests.e2e.conftest import RT


async def title_of(rt: RT, s2: str) -> str:
    info = await rt.oc("GET", f"/session/{s2}")
    return str(info["title"])


async def test_a_cancelled_roundtable_s_title_ends_with_cancelled(rt: RT) -> None:
    rt.llm.script(Text(text="PM finished its turn."), agent="pm")
    rt.llm.script(Hang(), agent="dev")
    s2 = await rt.start(agents=["pm", "dev"], prompt="Cancel me", rounds=2)
    await rt.llm.wait_for_requests(1, 30, agent="dev")
    run = await cli(rt, "cancel", s2)
    assert run.code == 0, run
    await rt.settled(s2)
    title = await title_of(rt, s2)
    assert title.endswith(" · CANCELLED"), title
    assert "CONCLUDED" not in title, title


async def test_an_all_failed_roundtable_s_title_ends_with_ended(rt: RT) -> None:
    rt.llm.script(HttpError(status=400, message="pm down"), agent="pm")
    rt.llm.script(HttpError(status=400, message="dev down"), agent="dev")
    s2 = await rt.start(agents=["pm", "dev"], prompt="All down?", rounds=1)
    await rt.settled(s2)
    title = await title_of(rt, s2)
    assert title.endswith(" · ENDED"), title
    assert "CONCLUDED" not in title, title
