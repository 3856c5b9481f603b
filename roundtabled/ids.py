"""Client-chosen OpenCode identifiers.

OpenCode ids look like ``msg_22d1c649f001hydsaupe2WRtJp``: a prefix, 12 hex digits of
``epoch_ms * 0x1000 + counter`` (so ids ascend with time), and 14 random base62 characters
(docs/opencode-server.md, 'Messages and parts'). The daemon chooses the ``messageID`` of every
prompt it
sends so that a turn's user message is known before the POST (docs/design.md, 'Exactly once').
"""

from __future__ import annotations

import secrets
import string
import threading
import time

_ALPHABET = string.ascii_letters + string.digits
_lock = threading.Lock()
_last = 0


def ascending_id(prefix: str, now_ms: int | None = None) -> str:
    """Return a new id ``<prefix>_<12 hex><14 base62>`` that sorts after every id made before.

    Args:
        prefix: ``"msg"`` or ``"prt"`` (OpenCode validates the prefix; a wrong one is a 400).
        now_ms: wall time in epoch milliseconds; defaults to the current time.

    Ids made in the same millisecond get an increasing counter, so they still ascend.
    """
    global _last
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    with _lock:
        value = max(ms * 0x1000, _last + 1)
        _last = value
    head = format(value, "012x")[-12:]
    tail = "".join(secrets.choice(_ALPHABET) for _ in range(14))
    return f"{prefix}_{head}{tail}"


def message_id() -> str:
    """A fresh ascending ``msg_…`` id for a prompt (see :func:`ascending_id`)."""
    return ascending_id("msg")


def part_id() -> str:
    """A fresh ascending ``prt_…`` id for a part (see :func:`ascending_id`)."""
    return ascending_id("prt")
