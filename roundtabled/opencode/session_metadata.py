"""The daemon's own keys in a session's ``metadata``, the same on both OpenCode majors.

A seat's session of an independent opening is created with :func:`opening_metadata`, so that the
next read adopts it from S2's children (docs/design.md, "Exactly once"). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OPENING_KEY = "roundtabledOpening"
"""The metadata key of a seat's session of an independent opening (not the index's key: the
start-up scan must not take it for a roundtable)."""


def opening_metadata(roundtable: str, seat: int) -> dict[str, Any]:
    """The metadata a seat's session of an independent opening is created with: ``roundtable``
    is S2's id, ``seat`` the index into the roundtable's seats."""
    return {OPENING_KEY: {"roundtable": roundtable, "seat": seat}}


def opening_seat_of(metadata: Mapping[str, Any] | None, roundtable: str) -> int | None:
    """The seat a session whose metadata is ``metadata`` holds in ``roundtable``'s independent
    opening, or ``None``."""
    meta = (metadata or {}).get(OPENING_KEY)
    if not isinstance(meta, dict) or meta.get("roundtable") != roundtable:
        return None
    seat = meta.get("seat")
    return seat if isinstance(seat, int) else None


def opening_roundtable_of(metadata: Mapping[str, Any] | None) -> str | None:
    """S2's id when a session whose metadata is ``metadata`` is a seat's session of that
    roundtable's independent opening, else ``None``."""
    meta = (metadata or {}).get(OPENING_KEY)
    owner = meta.get("roundtable") if isinstance(meta, dict) else None
    return owner if isinstance(owner, str) else None
