"""roundtabled.opencode.events: envelope unwrapping, session id derivation, accessors, tolerance."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from roundtabled.opencode import events as E
from roundtabled.opencode.events import Event, is_heartbeat, parse_event


def wrap(etype: str, props: Any = None, *, directory: str | None = "/proj", **extra: Any) -> bytes:
    payload: dict[str, Any] = {"id": "evt_1", "type": etype, **extra}
    if props is not None:
        payload["properties"] = props
    if directory is None:
        return orjson.dumps({"payload": payload})
    return orjson.dumps({"directory": directory, "project": "b264", "payload": payload})


def test_global_envelope_is_unwrapped() -> None:
    ev = parse_event(wrap(E.SESSION_IDLE, {"sessionID": "ses_1"}))
    assert ev == Event(E.SESSION_IDLE, "ses_1", "/proj", id="evt_1")
    assert ev is not None and ev.properties == {"sessionID": "ses_1"}


def test_payload_only_envelope_for_connected_and_heartbeat() -> None:
    ev = parse_event(wrap(E.SERVER_CONNECTED, {}, directory=None))
    assert ev is not None and ev.type == E.SERVER_CONNECTED and ev.directory is None
    hb = parse_event(wrap(E.SERVER_HEARTBEAT, {}, directory=None))
    assert hb is not None and is_heartbeat(hb) and not is_heartbeat(ev)


def test_bare_event_frame_and_str_input() -> None:
    raw = (
        '{"id":"evt_2","type":"session.status",'
        '"properties":{"sessionID":"ses_9","status":{"type":"retry","attempt":2}}}'
    )
    ev = parse_event(raw)
    assert ev is not None
    assert (ev.type, ev.session_id, ev.directory, ev.status_type) == (
        E.SESSION_STATUS,
        "ses_9",
        None,
        "retry",
    )


@pytest.mark.parametrize(
    ("etype", "props", "expected"),
    [
        (E.SESSION_CREATED, {"info": {"id": "ses_a", "parentID": "ses_p"}}, "ses_a"),
        (E.SESSION_DELETED, {"sessionID": "ses_b", "info": {"id": "ses_other"}}, "ses_b"),
        (E.MESSAGE_UPDATED, {"info": {"id": "msg_1", "sessionID": "ses_c"}}, "ses_c"),
        (E.MESSAGE_PART_UPDATED, {"part": {"id": "prt_1", "sessionID": "ses_d"}}, "ses_d"),
        (E.SESSION_ERROR, {"error": {"name": "APIError"}}, None),
        (E.SESSION_IDLE, {"sessionID": 42}, None),
        ("tui.toast.show", {"title": "t"}, None),
    ],
)
def test_session_id_derivation(etype: str, props: dict[str, Any], expected: str | None) -> None:
    ev = parse_event(wrap(etype, props))
    assert ev is not None and ev.session_id == expected


def test_accessors() -> None:
    created = parse_event(
        wrap(E.SESSION_UPDATED, {"sessionID": "s", "info": {"parentID": "ses_p"}})
    )
    assert created is not None and created.parent_id == "ses_p" and created.status_type is None
    part = parse_event(
        wrap(
            E.MESSAGE_PART_UPDATED,
            {"sessionID": "s", "part": {"id": "prt_1", "messageID": "msg_1", "type": "tool"}},
        )
    )
    assert part is not None
    assert (part.message_id, part.part_id, part.part_type) == ("msg_1", "prt_1", "tool")
    delta = parse_event(
        wrap(E.MESSAGE_PART_DELTA, {"sessionID": "s", "messageID": "msg_2", "partID": "prt_2"})
    )
    assert delta is not None
    assert (delta.message_id, delta.part_id, delta.part_type) == ("msg_2", "prt_2", None)
    msg = parse_event(wrap(E.MESSAGE_UPDATED, {"sessionID": "s", "info": {"id": "msg_3"}}))
    assert msg is not None and msg.message_id == "msg_3"
    perm = parse_event(wrap(E.PERMISSION_ASKED, {"id": "per_1", "sessionID": "s"}))
    assert perm is not None and perm.permission_id == "per_1" and perm.question_id is None
    replied = parse_event(wrap(E.PERMISSION_REPLIED, {"sessionID": "s", "requestID": "per_1"}))
    assert replied is not None and replied.permission_id == "per_1"
    q = parse_event(wrap(E.QUESTION_ASKED, {"id": "que_1", "sessionID": "s"}))
    assert q is not None and q.question_id == "que_1" and q.permission_id is None
    err = parse_event(wrap(E.SESSION_ERROR, {"sessionID": "s", "error": {"name": "APIError"}}))
    assert err is not None and err.error_name == "APIError"
    # parent_id only for session.* info events, status_type only for session.status
    assert msg.parent_id is None and perm.status_type is None


def test_unknown_type_and_odd_fields_pass_through() -> None:
    ev = parse_event(wrap("future.thing", {"x": 1}, extra_field=True))
    assert ev is not None and ev.type == "future.thing" and ev.properties == {"x": 1}
    odd = parse_event(wrap(E.SESSION_STATUS, {"sessionID": "s", "status": "busy"}))
    assert odd is not None and odd.status_type is None
    no_props = parse_event(wrap(E.SYNC, None, syncEvent={"seq": 0}))
    assert no_props is not None and no_props.properties == {} and no_props.session_id is None
    list_props = parse_event(wrap("x", [1, 2]))
    assert list_props is not None and list_props.properties == {}


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"not json", b"[1,2]", b'"str"', b"{}", b'{"type": 5}', b'{"payload": 3}', b"\xff"],
)
def test_malformed_gives_none(raw: bytes) -> None:
    assert parse_event(raw) is None


def test_event_is_frozen_and_slotted() -> None:
    ev = Event("x")
    with pytest.raises(AttributeError):
        ev.type = "y"  # type: ignore[misc]
    assert not hasattr(ev, "__dict__")


def test_huge_part_parses_intact() -> None:
    text = "word " * 1_700_000  # 8.5 MB
    raw = wrap(E.MESSAGE_PART_UPDATED, {"sessionID": "s", "part": {"type": "text", "text": text}})
    t0 = time.perf_counter()
    ev = parse_event(raw)
    elapsed = time.perf_counter() - t0
    assert ev is not None and ev.session_id == "s" and ev.properties["part"]["text"] == text
    assert elapsed < 1.0


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["type", "payload", "properties", "sessionID", "info", "part", "id", "x"]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@given(json_values)
def test_never_raises_on_any_json(value: Any) -> None:
    ev = parse_event(orjson.dumps(value))
    if ev is not None:
        for name in (
            "status_type",
            "parent_id",
            "message_id",
            "part_id",
            "part_type",
            "permission_id",
            "question_id",
            "error_name",
        ):
            assert getattr(ev, name) is None or isinstance(getattr(ev, name), str)


@given(st.binary(max_size=64))
def test_never_raises_on_bytes(raw: bytes) -> None:
    parse_event(raw)


def test_huge_events_of_lazy_types_are_not_parsed_but_keep_type_session_and_directory() -> None:
    """The daemon never reads the body of ``message.part.*`` events: an 8 MB one is recognised
    from its first bytes (no 6 ms orjson parse on the event loop); other types are parsed."""
    import orjson

    from roundtabled.opencode.events import BODY_UNUSED, PEEK_THRESHOLD, parse_event

    part = {"id": "prt_1", "sessionID": "ses_big1", "type": "text", "text": "x" * (8 << 20)}
    raw = orjson.dumps(
        {
            "directory": "/p",
            "payload": {
                "id": "evt_1",
                "type": "message.part.updated",
                "properties": {"sessionID": "ses_big1", "part": part},
            },
        }
    )
    assert len(raw) > PEEK_THRESHOLD
    lazy = parse_event(raw, lazy_types=BODY_UNUSED)
    assert lazy is not None
    assert (lazy.type, lazy.session_id, lazy.directory, lazy.properties) == (
        "message.part.updated",
        "ses_big1",
        "/p",
        {},
    )
    full = parse_event(raw)
    assert full is not None and full.properties["part"]["text"] == part["text"]
    other = orjson.dumps(
        {
            "payload": {
                "type": "session.updated",
                "properties": {
                    "sessionID": "ses_big1",
                    "info": {"id": "ses_big1", "title": "t" * (1 << 20)},
                },
            }
        }
    )
    parsed = parse_event(other, lazy_types=BODY_UNUSED)
    assert parsed is not None and parsed.properties["info"]["title"].startswith("ttt")


def test_huge_sync_events_are_not_parsed() -> None:
    """OpenCode 1.18 repeats every ``message.part.updated`` whole in a ``sync`` event (a second
    8 MB line per huge part, 10 ms of orjson on the loop); it has no ``properties``, so the peek
    gives exactly what the full parse gives."""
    import orjson

    from roundtabled.opencode.events import BODY_UNUSED, SYNC, parse_event

    raw = orjson.dumps(
        {
            "directory": "/p",
            "project": "abc",
            "payload": {
                "type": SYNC,
                "syncEvent": {
                    "id": "evt_1",
                    "type": "message.part.updated.1",
                    "seq": 15,
                    "aggregateID": "ses_big1",
                    "data": {"part": {"type": "text", "text": "x" * (8 << 20)}},
                },
            },
        }
    )
    lazy = parse_event(raw, lazy_types=BODY_UNUSED)
    full = parse_event(raw)
    assert lazy is not None and full is not None
    assert (lazy.type, lazy.session_id, lazy.directory, lazy.properties) == (SYNC, None, "/p", {})
    assert (full.type, full.session_id, full.directory, full.properties) == (SYNC, None, "/p", {})
