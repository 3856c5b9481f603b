"""Progress while the tool waits, on the real server: the TUI toasts (``tui.toast.show`` on the
event stream) of a debate whose turns are more than 2 s apart: the start, one per finished
turn with its round and count, one when the observer takes over, the end; S2's title unchanged
until ``· CONCLUDED``. The throttle and the setting are pinned by the engine tests."""

from __future__ import annotations

from roundtabled.core.state import CONCLUDED_SUFFIX, OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text

from .conftest import RT
from .edge_helpers import EventLog


async def test_a_toast_per_finished_turn_and_per_phase_change(rt: RT) -> None:
    async with EventLog(rt) as events:
        rt.llm.script(Text(text="PM answers.", first_byte_delay=2.5), agent="pm")
        rt.llm.script(Text(text="DEV answers.", first_byte_delay=2.5), agent="dev")
        rt.llm.script(Text(text="SUMMARY."), agent=OBSERVER_AGENT)
        s2 = await rt.start(agents=["pm", "dev"], prompt="Toasts please", rounds=1)
        await rt.result(s2)
        # Every toast is shown (no background task left) and its event received.
        await rt.settled(s2)
        await events.flush()
    toasts = [str(p["properties"]["message"]) for _, p in events.of_type("tui.toast.show")]
    ours = [t for t in toasts if "Toasts please" in t or " done — " in t]
    assert ours == [
        "Roundtable started: (Roundtable) - Toasts please",
        "pm · round 1/1 done — 1 of 2 turns",
        "dev · round 1/1 done — 2 of 2 turns",
        "Debate over after round 1/1: the observer consolidates — (Roundtable) - Toasts please",
        "Roundtable concluded: (Roundtable) - Toasts please",
    ], toasts
    info = await rt.session(s2)
    assert info["title"] == "(Roundtable) - Toasts please" + CONCLUDED_SUFFIX
    # S2's title while it ran: unchanged until the CONCLUDED suffix, which comes last.
    titles = [
        str(info_["title"])
        for _, p in events.of_type("session.updated")
        if (info_ := p["properties"].get("info") or {}).get("id") == s2 and "title" in info_
    ]
    assert titles, "no session.updated of S2 seen"
    ran = [t for t in titles if not t.endswith(CONCLUDED_SUFFIX)]
    assert set(ran) <= {"(Roundtable) - Toasts please"}, titles
    assert titles[-1].endswith(CONCLUDED_SUFFIX), titles
    first_concluded = next(i for i, t in enumerate(titles) if t.endswith(CONCLUDED_SUFFIX))
    assert all(t.endswith(CONCLUDED_SUFFIX) for t in titles[first_concluded:]), titles
