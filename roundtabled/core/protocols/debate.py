"""``debate``: rounds of turns in S2, one seat after another (the default, and every roundtable
written before protocols). Round 1 runs as the independent opening when ``opening`` says so; what
follows it is the debate's own rule (:func:`roundtabled.core.deliberation.stop_after_seat_turn`).
It uses every field of a call but ``adaptiveThreshold``.
"""

from __future__ import annotations

from roundtabled.core.protocols import Protocol
from roundtabled.core.state import Options


def _options(options: Options, rounds: int) -> tuple[Options, int]:
    return options, rounds


PROTOCOL = Protocol(
    name="debate",
    summary="rounds of turns, each seat reading the others (default)",
    refuses={"adaptiveThreshold": "it is adaptive's stop share"},
    options=_options,
    after_opening=lambda state, entries, now, messages: None,
    extendable=True,
)
