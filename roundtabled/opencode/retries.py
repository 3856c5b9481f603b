"""When the OpenCode client sends a request again (tenacity callbacks of
:class:`roundtabled.opencode.client.OpenCodeClient`, the one place with retries).

- Other transient failures (connection errors, timeouts, 5xx) of idempotent requests:
  :data:`ATTEMPTS` attempts, 0.2 s → 1 s apart.
- A **busy database** (:func:`busy_database`): OpenCode on SQLite answers 500 ``UnknownError``
  when another process holds the write lock longer than the server's own 5 s lock timeout, and
  nothing was written. Writes keep retrying for up to :data:`BUSY_WINDOW_S` seconds with jittered
  backoff.
"""

from __future__ import annotations

from tenacity import RetryCallState, wait_exponential, wait_random_exponential

from roundtabled.errors import AuthFailed, TransportError


def retryable(exc: BaseException) -> bool:
    return isinstance(exc, TransportError) and exc.retryable and not isinstance(exc, AuthFailed)


BUSY_MARKERS = ("Failed to execute statement", "database is locked", "UnknownError")
"""Texts of a 500 body meaning "the database was locked, nothing was written" (OpenCode on
SQLite; the body names only ``UnknownError``, its log the ``SQLiteError: database is locked``)."""
BUSY_WINDOW_S = 30.0
"""Seconds a write keeps being retried while the server's database is busy."""
ATTEMPTS = 3
"""Attempts of an idempotent request on other transient failures."""


def busy_database(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the server's transient 500 for a locked database (see
    :data:`BUSY_MARKERS`). A malformed path id also gives 500 ``UnknownError``; the daemon only
    sends ids it read from the server or made itself, so there it means a busy database."""
    return isinstance(exc, TransportError) and exc.status == 500 and busy_text(str(exc))


def busy_text(text: str | None) -> bool:
    """Whether an error text (an HTTP body, a ``session.error`` or a step's ``name: message``)
    names the server's transient write failure (see :data:`BUSY_MARKERS`)."""
    return bool(text) and any(marker in str(text) for marker in BUSY_MARKERS)


class RetryPolicy:
    """When to stop and how long to wait (tenacity callbacks): a busy database is retried for
    ``busy_window`` s with jittered backoff from ``busy_wait`` s (×2, at most 8×); other
    retryable failures get :data:`ATTEMPTS` attempts, 0.2 s → 1 s apart."""

    def __init__(self, busy_window: float, busy_wait: float) -> None:
        self.busy_window = busy_window
        self._busy = wait_random_exponential(multiplier=busy_wait, max=busy_wait * 8)
        self._other = wait_exponential(multiplier=0.2, max=1.0)

    @staticmethod
    def failure(state: RetryCallState) -> BaseException | None:
        return state.outcome.exception() if state.outcome is not None else None

    def stop(self, state: RetryCallState) -> bool:
        if busy_database(self.failure(state)):
            return (state.seconds_since_start or 0.0) >= self.busy_window
        return state.attempt_number >= ATTEMPTS

    def wait(self, state: RetryCallState) -> float:
        if busy_database(self.failure(state)):
            return float(self._busy(state))
        return float(self._other(state))
