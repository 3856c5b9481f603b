"""The server port's own records (roundtabled/core/server_records.py) and the adapters' pure
parts: turn keys, unknown usage, what a major cannot do, the turn-end hints of both majors."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core.server_records import (
    ServerCapabilities,
    TurnKey,
    TurnOutcome,
    TurnStatus,
    usage_in_out,
)
from roundtabled.core.state import ModelRef, Usage
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.opencode.events import Event
from roundtabled.opencode.port import V1Port, V2Port, v2_prompt_id
from roundtabled.opencode.v2 import V2Client

keys = st.builds(
    TurnKey,
    roundtable=st.text(min_size=1, max_size=40),
    round=st.integers(0, 1000),
    seat=st.integers(-1, 30),
    attempt=st.integers(0, 3),
)


@given(keys)
def test_a_turn_key_round_trips_and_names_one_prompt_id(key: TurnKey) -> None:
    assert TurnKey.from_dict(key.as_dict()) == key
    digest = key.digest()
    assert len(digest) == 26 and all(c in "0123456789abcdef" for c in digest)
    assert key.digest() == digest  # the same turn sent again names the same prompt
    assert v2_prompt_id(key) == "msg_" + digest


@given(keys, keys)
def test_different_turns_get_different_prompt_ids(a: TurnKey, b: TurnKey) -> None:
    assert (a.digest() == b.digest()) == (a == b)


def test_a_turn_s_default_header_counts_rounds_from_one() -> None:
    assert TurnKey("s", 0, 2).header("rv") == "── rv · round 1 ──"
    assert (
        TurnKey("s", 1, TurnKey.OBSERVER).header("judge") == "── judge · observer after round 2 ──"
    )


def test_a_turn_key_from_anything_else_is_none() -> None:
    assert TurnKey.from_dict({"roundtable": "s", "round": True, "seat": 0}) is None
    assert TurnKey.from_dict({"roundtable": "s", "round": "1", "seat": 0}) is None
    assert TurnKey.from_dict({"round": 1, "seat": 0}) is None
    assert TurnKey.from_dict(["s", 1, 0]) is None
    assert TurnKey.from_dict({"roundtable": "s", "round": 1, "seat": 0}) == TurnKey("s", 1, 0)


@given(
    st.builds(
        Usage,
        input=st.integers(0, 10**6),
        output=st.integers(0, 10**6),
        reasoning=st.integers(0, 10**6),
        cache_read=st.integers(0, 10**6),
    ),
    st.booleans(),
)
def test_usage_is_unknown_unless_an_ended_turn_recorded_some(usage: Usage, ended: bool) -> None:
    tokens = usage_in_out(usage, ended=ended)
    if not ended or not usage.recorded:
        assert tokens == (None, None)  # never a 0 that looks measured
    else:
        assert tokens == (
            usage.input + usage.cache_read + usage.cache_write,
            usage.output + usage.reasoning,
        )


def test_an_outcome_in_words() -> None:
    model = ModelRef(providerID="scripted", modelID="debater-2")
    assert TurnOutcome(TurnStatus.ANSWERED, agent="dev", model=model).words() == (
        "answered by dev on scripted/debater-2"
    )
    assert TurnOutcome(TurnStatus.FAILED, agent="dev", error="APIError: boom").words() == (
        "failed by dev: APIError: boom"
    )
    assert TurnOutcome(TurnStatus.FAILED).words() == "failed: the server gave no reason"
    assert TurnOutcome(TurnStatus.ANSWERED, truncated=True).words() == (
        "answered, cut at the output limit"
    )
    assert not TurnOutcome(TurnStatus.QUEUED).over
    assert TurnOutcome(TurnStatus.INTERRUPTED).over


def test_what_each_major_cannot_do_is_said_in_words() -> None:
    v1 = V1Port(OpenCodeClient("http://127.0.0.1:9"), "1.18.33").capabilities
    v2 = V2Port(V2Client("http://127.0.0.1:9"), "2.1.2").capabilities
    assert v1.limits() == ()
    assert [s.split(":")[0] for s in v2.limits()] == [
        "OpenCode 2.1.2 cannot store a message without a model turn",
        "OpenCode 2.1.2 has no HTTP route for a toast",
        "OpenCode 2.1.2 cannot edit a stored message",
    ]
    unknown = ServerCapabilities(2, None, False, True, "edit", False)
    assert unknown.limits() == (
        "OpenCode 2.x cannot store a message without a model turn: the result waits in the "
        "asking session's inbox and its model reads it with the next prompt.",
    )


def test_the_turn_end_hints_of_both_majors() -> None:
    v1 = V1Port(OpenCodeClient("http://127.0.0.1:9"))
    v2 = V2Port(V2Client("http://127.0.0.1:9"))
    idle = Event("session.idle", "ses_a", None, {"sessionID": "ses_a"})
    ended = Event("session.execution.failed", "ses_b", None, {"sessionID": "ses_b"}, "evt_1")
    started = Event("session.execution.started", "ses_b", None, {"sessionID": "ses_b"})
    assert (v1.turn_ended(idle), v1.turn_ended(ended)) == ("ses_a", None)
    assert (v2.turn_ended(idle), v2.turn_ended(ended), v2.turn_ended(started)) == (
        None,
        "ses_b",
        None,
    )
