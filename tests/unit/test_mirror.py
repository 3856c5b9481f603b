"""Unit tests of :class:`roundtabled.engine.mirror.TurnMirror` (the fast handoff's picture of a
turn).

Event sequences follow the server's timelines (docs/opencode-server.md, 'The event stream'): a
normal turn, a tool turn, a
premature idle, and every event that must make the mirror give way to a read of S2.
"""

from __future__ import annotations

from typing import Any

import pytest

from roundtabled.core.state import Signer
from roundtabled.engine.mirror import TurnMirror
from roundtabled.opencode import events as ev
from roundtabled.opencode import v1_wire

S2 = "ses_mirror0000000001"
USER = "msg_22e7a0000001aaaaaaaaaaaaaa"
ANS1 = "msg_22e7a0000002aaaaaaaaaaaaaa"
ANS2 = "msg_22e7a0000003aaaaaaaaaaaaaa"
OLDER = "msg_22e790000001aaaaaaaaaaaaaa"
NEWER_USER = "msg_22e7b0000001aaaaaaaaaaaaaa"


def event(etype: str, **props: Any) -> ev.Event:
    return ev.Event(etype, S2, "/p", {"sessionID": S2, **props})


def user_info(mid: str = USER) -> ev.Event:
    return event(
        ev.MESSAGE_UPDATED,
        info={"id": mid, "role": "user", "sessionID": S2, "time": {"created": 1}},
    )


def answer_info(mid: str, *, completed: bool, finish: str | None = "stop") -> ev.Event:
    info: dict[str, Any] = {
        "id": mid,
        "role": "assistant",
        "parentID": USER,
        "sessionID": S2,
        "time": {"created": 2, **({"completed": 3} if completed else {})},
    }
    if finish and completed:
        info["finish"] = finish
    return event(ev.MESSAGE_UPDATED, info=info)


def part(mid: str, pid: str, ptype: str = "text", **fields: Any) -> ev.Event:
    return event(
        ev.MESSAGE_PART_UPDATED,
        part={"id": pid, "messageID": mid, "sessionID": S2, "type": ptype, **fields},
    )


def status(kind: str) -> ev.Event:
    return event(ev.SESSION_STATUS, status={"type": kind})


def normal_turn(m: TurnMirror) -> list[bool]:
    """The events of a normal turn; returns what each feed said."""
    return [m.feed(e) for e in normal_turn_events()]


def normal_turn_events() -> list[ev.Event]:
    """A normal turn: the prompt, one reply step, ``busy``, ``idle``, ``session.idle``."""
    return [
        user_info(),
        part(USER, "prt_01", text="your turn"),
        part(USER, "prt_02", text="label", ignored=True),
        status("busy"),
        answer_info(ANS1, completed=False),
        part(ANS1, "prt_03", "step-start"),
        part(ANS1, "prt_04", text=""),
        event(ev.MESSAGE_PART_DELTA, messageID=ANS1, partID="prt_04", field="text", delta="he"),
        part(ANS1, "prt_04", text="hello there"),
        part(ANS1, "prt_05", "step-finish"),
        answer_info(ANS1, completed=True),
        status("busy"),
        status("idle"),
        event(ev.SESSION_IDLE),
    ]


def test_a_normal_turn_is_complete_at_idle_and_lists_like_get() -> None:
    m = TurnMirror(S2, USER, 1)
    said = normal_turn(m)
    assert said[-2] is True  # status idle after the completed reply: wake the worker
    msgs = m.messages()
    assert msgs is not None
    assert [x["info"]["id"] for x in msgs] == [USER, ANS1]
    assert [p["id"] for p in msgs[1]["parts"]] == ["prt_03", "prt_04", "prt_05"]
    assert msgs[1]["parts"][1]["text"] == "hello there"
    assert msgs[1]["info"]["time"]["completed"] == 3


def test_changes_count_what_a_decision_reads_and_not_the_idle_or_the_summary() -> None:
    """A decision taken ahead of the idle stands only while ``changes`` is unchanged: every
    change of a reply or a part counts; the idle and the prompt's summary update do not."""
    m = TurnMirror(S2, USER, 1)
    seq = normal_turn_events()
    for e in seq[:-3]:  # up to the completed reply, before the idle
        m.feed(e)
    assert m.messages() is None
    ahead = m.messages(ahead=True)
    assert ahead is not None and ahead[1]["parts"][1]["text"] == "hello there"
    taken = m.changes
    for e in seq[-3:]:
        m.feed(e)
    summary = dict(user_info().properties["info"], summary={"diffs": []})
    m.feed(event(ev.MESSAGE_UPDATED, info=summary))
    now = m.messages()
    assert m.changes == taken and now is not None
    signer = Signer(b"mirror-unit-tests-key-0123456789")
    assert v1_wire.message_views(now, S2, signer) == v1_wire.message_views(ahead, S2, signer)
    m.feed(part(ANS1, "prt_04", text="hello there, again"))
    assert m.changes == taken + 1


def test_idle_before_any_reply_is_not_completion() -> None:
    """Regression "premature idle": a stale idle right after the prompt wakes nothing."""
    m = TurnMirror(S2, USER, 1)
    m.feed(user_info())
    m.feed(part(USER, "prt_01", text="your turn"))
    assert m.feed(status("idle")) is False
    assert m.feed(event(ev.SESSION_IDLE)) is False
    assert m.messages() is not None  # it lists (the machine then waits), but woke nobody


def test_a_reply_change_after_idle_needs_a_new_idle() -> None:
    m = TurnMirror(S2, USER, 1)
    normal_turn(m)
    m.feed(answer_info(ANS2, completed=False))  # a follow-up step after all
    assert m.messages() is None
    m.feed(answer_info(ANS2, completed=True))
    assert m.messages() is None
    assert m.feed(event(ev.SESSION_IDLE)) is True
    msgs = m.messages()
    assert msgs is not None and [x["info"]["id"] for x in msgs] == [USER, ANS1, ANS2]


def test_older_messages_are_ignored() -> None:
    """The previous turn's trailing updates (summary added after idle) are not this turn's."""
    m = TurnMirror(S2, USER, 1)
    m.feed(user_info(OLDER))
    m.feed(part(OLDER, "prt_00", text="old"))
    normal_turn(m)
    msgs = m.messages()
    assert msgs is not None and [x["info"]["id"] for x in msgs] == [USER, ANS1]


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (user_info(NEWER_USER), "another user message"),
        (
            ev.Event(ev.MESSAGE_PART_UPDATED, S2, "/p", {}),  # a huge payload, peeked not parsed
            "a part update that was not parsed",
        ),
        (event(ev.MESSAGE_REMOVED, messageID=ANS1), "message.removed"),
        (event("message.part.removed", messageID=ANS1, partID="prt_04"), "message.part.removed"),
        (event(ev.SESSION_ERROR, error={"name": "APIError"}), "session.error"),
        (event(ev.SESSION_COMPACTED), "compaction"),
        (event(ev.MESSAGE_UPDATED, info="nonsense"), "message.updated without info"),
        (
            event(
                ev.MESSAGE_UPDATED,
                info={"id": "msg_22e7c0000001", "role": "assistant", "parentID": NEWER_USER},
            ),
            "a reply to another message",
        ),
    ],
)
def test_doubtful_events_make_the_mirror_give_way_to_a_read(extra: ev.Event, why: str) -> None:
    m = TurnMirror(S2, USER, 1)
    normal_turn(m)
    m.feed(extra)
    assert m.doubt == why
    assert m.messages() is None
    assert m.feed(event(ev.SESSION_IDLE)) is False


def test_without_the_user_message_the_mirror_cannot_stand_in() -> None:
    """Subscribed too late to see the prompt stored: its parts are unknown."""
    m = TurnMirror(S2, USER, 1)
    for e in [answer_info(ANS1, completed=True), status("idle")]:
        m.feed(e)
    assert m.messages() is None


def test_parts_of_a_message_whose_info_never_came() -> None:
    m = TurnMirror(S2, USER, 1)
    normal_turn(m)
    m.feed(part(ANS2, "prt_09", text="orphan"))
    m.feed(event(ev.SESSION_IDLE))
    assert m.messages() is None
