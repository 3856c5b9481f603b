"""Exception hierarchy of roundtabled.

- :class:`RoundtableError` is the root; its ``str()`` is a message fit for a person.
- :class:`ValidationFailed` — bad input from a tool call, the control API or the CLI. Its message
  starts with ``Error:`` and names the field, the bad value and the allowed values.
- :class:`TransportError` — talking to the OpenCode server failed. ``retryable`` tells whether the
  same request may succeed later (connection refused, timeout, 5xx) or not (4xx).
- :class:`StateError` and subclasses — a state block in S2 cannot be trusted or read; the
  roundtable concerned is reported and skipped, the others go on.
"""

from __future__ import annotations


class RoundtableError(Exception):
    """Root of roundtabled's errors."""


class ValidationFailed(RoundtableError):
    """Invalid input. ``field`` names the offending field; ``str(exc)`` starts with ``Error:``."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        text = message if message.startswith("Error:") else f"Error: {message}"
        super().__init__(text)


class TransportError(RoundtableError):
    """An HTTP call to the OpenCode server failed.

    Attributes:
        status: HTTP status, or ``None`` when no response arrived.
        retryable: whether retrying the same request may succeed.
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class NotFound(TransportError):
    """404 from the server: the session, message or part does not exist (deleted)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=404, retryable=False)


class AuthFailed(TransportError):
    """401 from the server: ``OPENCODE_SERVER_PASSWORD`` is missing or wrong."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=401, retryable=True)


class ServerReplaced(TransportError):
    """The server refused a request, or said a session is gone, and no longer answers as the
    OpenCode major its driver drives: replaced in place by the other major (or still going down
    or coming up). Retryable: the daemon switches driver when it finds the new server, and no
    answer of the new one is taken for the old one's (docs/design.md, "Failures of the
    worker")."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


class StateError(RoundtableError):
    """A persisted roundtable state cannot be used."""


class StateForgedError(StateError):
    """A ``[ROUNDTABLE META]`` block without a valid MAC: written by someone else; ignored."""


class StateVersionError(StateError):
    """A state block of a layout version this daemon does not read."""


class StateCorruptError(StateError):
    """A signed state block whose content does not parse."""
