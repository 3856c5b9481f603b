"""Crash points for the fault-injection suite (``kill -9`` at ≥ 20 points).

``ROUNDTABLED_FAULT=<point>:<n>`` makes the daemon SIGKILL itself the ``n``-th time it passes
``checkpoint("<point>")`` — the same as an external ``kill -9`` at exactly that point, without
races. Unset (always, outside tests), :func:`checkpoint` is one comparison.

Points (see :data:`POINTS`) sit between each effect on the server and the record of it, where a
crash is most likely to duplicate or lose a turn. The 2.x shell (:mod:`roundtabled.engine.v2run`,
:mod:`roundtabled.engine.v2_delivery`) passes those that apply to it: ``intent-persisted``,
``switched``, ``prompted``, ``observer-prompted``, ``turn-recorded``, ``final-persisted``,
``result-taken``, ``delivered`` and ``title-set`` (docs/design.md, "The 2.x shell").
"""

from __future__ import annotations

import os
import signal

POINTS = (
    "state-created",  # S2 and its state block exist: inside turn 1's prompt, sent with it (the
    # block names turn 1's intent), or a message of its own (a start without a first prompt)
    "intent-persisted",  # the state naming the pending turn is written (before its prompt on a
    # handoff decided from a read; for turn 1, by its prompt, which carries the state block;
    # after it, deferred, on a fast handoff)
    "prompted",  # the prompt is accepted; on a fast handoff the stored state is still behind
    "turn-recorded",  # a finished turn is in memory; the next intent not yet persisted
    "opening-session-created",  # a seat's session of an independent opening exists, unadopted
    "opening-prompted",  # a seat's opening prompt is accepted (its intent was written before)
    "opening-answered",  # a seat's opening is settled in memory; not yet written
    "opening-recorded",  # one opening record is in S2; the state saying so not yet written
    "observer-prompted",  # the observer's prompt is accepted
    "switched",  # 2.x: the next turn's agent and model are S2's, switched beside the write of
    # its intent (landed or not yet); its prompt not sent
    "final-persisted",  # phase done persisted; nothing delivered yet
    "result-taken",  # the waiting tool call's poll took the result; its answer not yet sent
    "delivered",  # the result is in S1 (posted, or seen in the tool call's part); the delivery
    # not yet recorded
    "verdict-shown",  # the observer's reply in S2 shows the verdict in words, not its JSON
    # block; the state saying so not yet written (passed only when the reply held a block)
    "delimiter-posted",  # the delimiter is in S2; the title not yet changed
    "title-set",  # the title has " · CONCLUDED"; the final toast/state not yet written
)

_spec: tuple[str, int] | None = None
_count = 0


def _load() -> tuple[str, int] | None:
    raw = os.environ.get("ROUNDTABLED_FAULT", "")
    name, _, n = raw.partition(":")
    if not name:
        return None
    if name not in POINTS:
        raise ValueError(f"ROUNDTABLED_FAULT: unknown point {name!r}; known: {', '.join(POINTS)}")
    return name, int(n or "1")


_spec = _load()


def checkpoint(name: str) -> None:
    """SIGKILL this process at the configured point and count (no-op when not configured)."""
    global _count
    if _spec is None or _spec[0] != name:
        return
    _count += 1
    if _count >= _spec[1]:
        os.kill(os.getpid(), signal.SIGKILL)
