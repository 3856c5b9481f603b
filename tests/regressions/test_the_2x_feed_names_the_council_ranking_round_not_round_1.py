"""On OpenCode 2.x the progress feed announced every seat prompted in a session of its own as
``{"type": "prompt", "round": 1}``: the council's ranking round (round 2) showed in
``roundtabled start``/``watch`` as "round 1" again while the seats ranked. 1.x said round 2. Now
both majors build the item from the prompt's marker (``core.progress.seat_prompt_item``)."""

from __future__ import annotations

from roundtabled.core.commands import PromptSeat
from roundtabled.core.state import Marker, RoundtableState
from roundtabled.engine.v2_features import Feed


def test_the_2x_feed_names_the_council_ranking_round_not_round_1() -> None:
    feed = Feed()
    q = feed.subscribe(None)
    state = RoundtableState.model_validate(
        {
            "session_id": "ses_x",
            "title": "t",
            "agents": ["pm", "dev", "rv"],
            "prompt": "p",
            "total_rounds": 1,
        }
    )
    for rnd in (0, 1):  # the opening answers (marker round 0), then the ranking (round 1)
        marker = Marker(kind="opening", round=rnd, seat=0, agent="pm", roundtable="ses_x")
        feed.opening(PromptSeat(0, "ses_seat", f"msg_{rnd}", "pm", "rank", marker), state)
    got = [q.get_nowait() for _ in range(2)]
    assert [g["round"] for g in got] == [1, 2], got
    assert all(g["type"] == "prompt" and g["agent"] == "pm" for g in got)
