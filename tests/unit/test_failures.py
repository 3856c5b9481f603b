"""roundtabled.core.failures: the worker's failure policy (classification, backoff, giving up)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core import failures
from roundtabled.core.failures import (
    BACKOFF_CAP_S,
    MAX_UNEXPECTED,
    FailureKind,
    FailurePolicy,
    classify,
    ended,
)
from roundtabled.core.state import EndReason, Phase
from roundtabled.errors import (
    AuthFailed,
    NotFound,
    StateCorruptError,
    StateVersionError,
    TransportError,
)
from tests.unit.test_machine_edges import T0, state_with

REFUSED = TransportError(
    'PATCH /session/ses_1/message/msg_1/part/prt_1: HTTP 400: {"name":"BadRequest"}',
    status=400,
    retryable=False,
)


def test_classification_of_each_kind() -> None:
    assert classify(TransportError("refused", retryable=True)) is FailureKind.RETRYABLE
    assert classify(TransportError("HTTP 500", status=500, retryable=True)) is (
        FailureKind.RETRYABLE
    )
    assert classify(AuthFailed("401")) is FailureKind.RETRYABLE
    assert classify(NotFound("gone")) is FailureKind.RETRYABLE  # the machine settles a deletion
    assert classify(REFUSED) is FailureKind.PERMANENT
    assert classify(StateCorruptError("bad json")) is FailureKind.PERMANENT
    assert classify(StateVersionError("v9")) is FailureKind.PERMANENT
    assert classify(KeyError("x")) is FailureKind.UNEXPECTED


def test_a_permanent_refusal_gives_up_at_once_naming_the_status_and_the_request() -> None:
    out = FailurePolicy(rng=random.Random(1)).failed(REFUSED)
    assert out.give_up and out.kind is FailureKind.PERMANENT
    assert out.reason is not None
    assert "HTTP 400" in out.reason and "PATCH /session/ses_1" in out.reason
    assert "start a new roundtable" in out.reason


def test_corrupt_state_mid_debate_gives_up_with_what_to_do() -> None:
    out = FailurePolicy().failed(StateCorruptError("the state block does not parse"))
    assert out.give_up and out.reason is not None
    assert "does not parse" in out.reason and "start a new roundtable" in out.reason


def test_the_sixth_unexpected_exception_in_a_row_gives_up_and_a_success_resets() -> None:
    policy = FailurePolicy(rng=random.Random(2))
    for _ in range(MAX_UNEXPECTED):
        assert not policy.failed(ValueError("boom")).give_up
    policy.succeeded()
    for _ in range(MAX_UNEXPECTED):
        assert not policy.failed(ValueError("boom")).give_up
    out = policy.failed(ValueError("boom"))
    assert out.give_up and out.reason is not None
    assert f"{MAX_UNEXPECTED + 1} times in a row" in out.reason and "ValueError" in out.reason
    assert "bug" in out.reason


def test_retryable_failures_never_give_up() -> None:
    policy = FailurePolicy(rng=random.Random(3))
    for _ in range(200):
        assert not policy.failed(TransportError("connection refused", retryable=True)).give_up


def test_unexpected_exceptions_between_transport_failures_still_count_in_a_row() -> None:
    """Only a successful pass resets the count of unexpected exceptions."""
    policy = FailurePolicy()
    outs = []
    for _ in range(MAX_UNEXPECTED + 1):
        policy.failed(TransportError("timed out", retryable=True))
        outs.append(policy.failed(RuntimeError("bug")))
    assert [o.give_up for o in outs] == [False] * MAX_UNEXPECTED + [True]


@given(st.integers(0, 2**32 - 1), st.integers(1, 60))
def test_backoff_is_jittered_below_a_doubling_bound_capped(seed: int, n: int) -> None:
    policy = FailurePolicy(rng=random.Random(seed))
    delays = [policy.failed(TransportError("down", retryable=True)).delay_s for _ in range(n)]
    for i, d in enumerate(delays):
        assert 0.0 <= d <= min(BACKOFF_CAP_S, 0.5 * 2**i)


def test_backoff_is_jittered_not_fixed() -> None:
    policy = FailurePolicy(rng=random.Random(4))
    delays = [policy.failed(TransportError("down", retryable=True)).delay_s for _ in range(40)]
    late = delays[10:]
    assert len(set(late)) == len(late)  # drawn, not a fixed schedule
    assert max(late) <= BACKOFF_CAP_S


def test_ended_makes_a_failed_done_state_with_the_reason_once() -> None:
    state = state_with(["pm", "dev"], rounds=2, pending=(0, 1))
    out = ended(state, "the OpenCode server refused a request", T0 + 5)
    assert out.end_reason == EndReason.FAILED and out.phase == Phase.DONE
    assert out.pending is None and not out.active
    assert out.errors[-1] == "the OpenCode server refused a request"
    assert "the OpenCode server refused a request" in (out.summary or "")
    assert ended(out, "a second reason", T0 + 6) == out  # an ended roundtable stays as it was


@given(
    asks=st.lists(st.booleans(), min_size=1, max_size=40),
)
def test_a_server_is_asked_again_within_its_cap_and_never_sooner_than_before(
    asks: list[bool],
) -> None:
    # each item: whether that ask's answer refused the credentials
    delay = failures.SERVER_WAIT_FIRST_S
    for refused in asks:
        nxt = failures.next_server_wait(delay, credentials_refused=refused)
        cap = failures.CREDENTIALS_WAIT_CAP_S if refused else failures.SERVER_WAIT_CAP_S
        assert nxt <= cap
        assert nxt >= min(delay, cap)  # backs off, never speeds up within one cause
        delay = nxt
