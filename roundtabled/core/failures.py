"""The worker's failure policy: what a failed pass of one roundtable leads to.

A pass of a roundtable's worker (observe S2, decide, execute) can fail three ways:

- **retryable** — the server could not be reached or answered 5xx, timed out, or its database was
  busy (:func:`roundtabled.opencode.client.busy_database`), or it rejected the credentials (a
  password can be fixed while the daemon runs): the same pass may succeed later. It is retried with
  capped, jittered exponential backoff (:data:`BACKOFF_BASE_S` doubling up to
  :data:`BACKOFF_CAP_S`, "full jitter": a uniform draw below that bound), for as long as it takes:
  a server that is down for an hour is a reason to wait, not to give up.
- **permanent** — a failure no retry can cure: the server refused a request (4xx other than 401
  and 404: a 404 means the session is gone, which the machine settles itself), or the stored
  state cannot be trusted or read (corrupt, unknown version) in the middle of a debate. The
  roundtable ends at once with ``endReason: "failed"``.
- **unexpected** — any other exception, i.e. a bug in roundtabled. Retried like a retryable one,
  but more than :data:`MAX_UNEXPECTED` in a row end the roundtable as failed too: a bug that
  repeats on every pass would otherwise hold the caller's tool call for ever.

Each way out carries a reason the user can act on (what failed, what to do). Pure apart from the
random source (pass a seeded one in tests); time is the caller's (the delays are seconds to
sleep). The design is described in docs/design.md ("Failures of the worker").
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import StrEnum

from roundtabled.core.state import EndReason, Phase, RoundtableState
from roundtabled.errors import AuthFailed, NotFound, StateError, TransportError

BACKOFF_BASE_S = 0.5
"""First retry bound after a failed pass (seconds)."""
BACKOFF_CAP_S = 30.0
"""Largest bound between two retries (seconds)."""
MAX_UNEXPECTED = 5
"""Unexpected exceptions in a row that are still retried; the next one ends the roundtable."""


SERVER_WAIT_FIRST_S = 0.5
"""First wait before asking a server that does not answer (yet) again (seconds)."""
SERVER_WAIT_CAP_S = 5.0
"""Longest wait between two asks of a server that does not answer or answers as another major:
asking a loopback address costs nothing, and a daemon started before its server drives it
within this long of it coming up (docs/design.md, "Failures of the worker")."""
CREDENTIALS_WAIT_CAP_S = 30.0
"""Longest wait between two asks of a server that refuses the credentials: only the user's fix
(the password) changes that answer."""


def next_server_wait(delay: float, *, credentials_refused: bool = False) -> float:
    """The wait (seconds) after one of ``delay`` seconds before the next ask of a server that
    did not answer as hoped: doubled, up to :data:`SERVER_WAIT_CAP_S`
    (:data:`CREDENTIALS_WAIT_CAP_S` when ``credentials_refused``)."""
    return min(delay * 2, CREDENTIALS_WAIT_CAP_S if credentials_refused else SERVER_WAIT_CAP_S)


class FailureKind(StrEnum):
    RETRYABLE = "retryable"
    PERMANENT = "permanent"
    UNEXPECTED = "unexpected"


def classify(exc: BaseException) -> FailureKind:
    """The kind of a failed pass's exception (see the module docstring).

    A :class:`~roundtabled.errors.NotFound` is classified retryable: the machine observes the
    deletion on the next pass and settles it; it is never a reason to fail the roundtable.
    """
    if isinstance(exc, StateError):
        return FailureKind.PERMANENT
    if isinstance(exc, (AuthFailed, NotFound)):
        return FailureKind.RETRYABLE
    if isinstance(exc, TransportError):
        return FailureKind.RETRYABLE if exc.retryable else FailureKind.PERMANENT
    return FailureKind.UNEXPECTED


@dataclass(frozen=True)
class Outcome:
    """What to do after a failed pass: sleep ``delay_s`` seconds and retry, or (``give_up``) end
    the roundtable as failed with ``reason`` (a sentence for the user)."""

    kind: FailureKind
    delay_s: float
    give_up: bool = False
    reason: str | None = None


def reason_for(exc: BaseException, kind: FailureKind, count: int = 1) -> str:
    """A sentence saying what failed and what the user can do about it (no secrets: exception
    texts of the client never carry the password)."""
    what = str(exc) or type(exc).__name__
    if isinstance(exc, StateError):
        return (
            f"the roundtable's stored state in its session cannot be used ({what}); the debate "
            "so far stays readable there: start a new roundtable to continue"
        )
    if kind is FailureKind.PERMANENT:
        status = getattr(exc, "status", None)
        return (
            f"the OpenCode server refused a request of the roundtable"
            f"{f' with HTTP {status}' if status else ''} ({what}); retrying cannot help: check "
            "the server's log and that its version is one roundtabled supports (roundtabled "
            "doctor), then start a new roundtable"
        )
    return (
        f"roundtabled failed {count} times in a row on this roundtable "
        f"({type(exc).__name__}: {what}); this is a bug in roundtabled: its log has the "
        "traceback (journalctl --user -u roundtabled); please report it"
    )


@dataclass
class FailurePolicy:
    """Counts one worker's failed passes and says what each leads to.

    Args:
        rng: random source of the jitter.
        base_s, cap_s: backoff bounds (seconds).
        max_unexpected: unexpected exceptions in a row still retried.
    """

    rng: random.Random = field(default_factory=random.Random)
    base_s: float = BACKOFF_BASE_S
    cap_s: float = BACKOFF_CAP_S
    max_unexpected: int = MAX_UNEXPECTED
    failures: int = 0
    """Failed passes since the last successful one."""
    unexpected: int = 0
    """Unexpected exceptions since the last successful pass."""

    def succeeded(self) -> None:
        """A pass went through: the counts and the backoff start over."""
        self.failures = 0
        self.unexpected = 0

    def failed(self, exc: BaseException) -> Outcome:
        """Record a failed pass and decide (see :class:`Outcome`)."""
        kind = classify(exc)
        self.failures += 1
        if kind is FailureKind.PERMANENT:
            return Outcome(kind, 0.0, give_up=True, reason=reason_for(exc, kind))
        if kind is FailureKind.UNEXPECTED:
            self.unexpected += 1
            if self.unexpected > self.max_unexpected:
                return Outcome(
                    kind, 0.0, give_up=True, reason=reason_for(exc, kind, self.unexpected)
                )
        bound = min(self.cap_s, self.base_s * 2 ** min(self.failures - 1, 32))
        return Outcome(kind, self.rng.uniform(0.0, bound))


def ended(state: RoundtableState, reason: str, now: int) -> RoundtableState:
    """``state`` of a roundtable the failure policy ended: ``endReason: "failed"``, ``reason``
    as its last error and in its summary, no turn pending, phase ``done`` (then finalized and
    delivered to S1 once like any other end). ``now``: epoch ms. A roundtable that already
    ended is returned unchanged."""
    if not state.active:
        return state
    return state.model_copy(
        update={
            "end_reason": EndReason.FAILED,
            "errors": [*state.errors, reason],
            "summary": f"(The roundtable failed: {reason}.)",
            "phase": Phase.DONE,
            "pending": None,
            "updated_at": now,
        }
    )
