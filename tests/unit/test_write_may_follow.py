"""When a 2.x turn's state write may follow its prompt (core/hiding.py ``write_may_follow``),
property-tested: only after a recorded turn whose block S2 already holds, for another prompt,
in the plugin's view, with a plugin known to hide by the newest turn prompt's marker; never for
turn 1 (no block yet), a re-send of the same prompt, nor a plugin not known to hide that way (an
earlier 2.x plugin hides only the ids S2's metadata lists)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core import hiding
from roundtabled.core.state import PendingTurn, Phase, RoundtableState

S2 = "ses_writeorder000000000001"
IDS = st.sampled_from(["msg_a", "msg_b", "msg_c"])


def pending(mid: str, kind: str = "turn") -> PendingTurn:
    seat = 1 if kind == "turn" else -1
    return PendingTurn(kind=kind, round=0, seat=seat, agent="dev", message_id=mid)


def planned(mid: str | None, view: str, kind: str = "turn") -> RoundtableState:
    return RoundtableState.model_validate(
        {
            "session_id": S2,
            "title": "Q",
            "agents": ["pm", "dev"],
            "total_rounds": 2,
            "prompt": "Q?",
            "phase": Phase.ACTIVE,
            "pending": pending(mid, kind) if mid is not None else None,
            "view": view,
        }
    )


@given(
    written=st.none() | IDS,
    ended=st.none() | IDS,
    nxt=st.none() | IDS,
    view=st.sampled_from(["plugin", "patch"]),
    recorded=st.booleans(),
    kind=st.sampled_from(["turn", "observer"]),
    marker_hiding=st.booleans(),
)
def test_the_write_follows_only_when_a_restart_and_the_plugin_need_nothing_of_it(
    written: str | None,
    ended: str | None,
    nxt: str | None,
    view: str,
    recorded: bool,
    kind: str,
    marker_hiding: bool,
) -> None:
    got = hiding.write_may_follow(
        written,
        pending(ended) if ended is not None else None,
        planned(nxt, view, kind),
        recorded=recorded,
        marker_hiding=marker_hiding,
    )
    safe = (
        written is not None  # S2 holds a block (never before turn 1's write)
        and written == ended  # ... and it names the turn just ended: a restart re-decides it
        and recorded
        and nxt is not None
        and nxt != ended  # another prompt, not a re-send of the same one
        and kind == "turn"  # the observer keeps replies the seats' lists drop
        and view == "plugin"  # the plugin hides by the prompts' markers
        and marker_hiding  # ... which its trusted report says it does
    )
    assert got is safe


def test_turn_one_writes_first() -> None:
    """Nothing written yet (the start's first turn): the write goes first."""
    assert not hiding.write_may_follow(
        None, None, planned("msg_a", "plugin"), recorded=False, marker_hiding=True
    )


def test_a_seat_turn_after_a_recorded_one_writes_after_its_prompt() -> None:
    st_ = planned("msg_b", "plugin")
    assert hiding.write_may_follow(
        "msg_a", pending("msg_a"), st_, recorded=True, marker_hiding=True
    )


def test_a_plugin_not_known_to_hide_by_the_marker_keeps_the_write_first() -> None:
    """No trusted report of the marker-hiding plugin (an earlier 2.x plugin, none reported
    yet, a report dropped on a reconnect): until the write lands, the plugin would hide only
    the ended turn's list, which leaves that turn's prompt in (docs/plugin.md)."""
    st_ = planned("msg_b", "plugin")
    assert not hiding.write_may_follow(
        "msg_a", pending("msg_a"), st_, recorded=True, marker_hiding=False
    )


def test_the_observer_s_turn_writes_first() -> None:
    """The seats' last list hides replies the observer's request keeps."""
    st_ = planned("msg_b", "plugin", "observer")
    assert not hiding.write_may_follow(
        "msg_a", pending("msg_a"), st_, recorded=True, marker_hiding=True
    )
