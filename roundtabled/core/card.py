"""The visible text of a roundtable's state block: a short card a person reads in S2.

The machine state itself travels signed in the part's ``metadata`` (see
:func:`roundtabled.core.state.encode_state`); the part is ``ignored``, so neither the card nor the
state ever reaches a model. The card is rewritten with each state write, so it shows the
current round and phase. At most :data:`MAX_CARD_LINES` lines, each at most
:data:`MAX_LINE_CHARS` characters (docs/design.md, state format).
"""

from __future__ import annotations

from roundtabled.core.progress import round_position
from roundtabled.core.result import build_result
from roundtabled.core.state import (
    BUILTIN_OBSERVER,
    TITLE_PREFIX,
    Phase,
    RoundtableState,
    end_word,
)
from roundtabled.core.verdict import (
    consensus_line,
    deliberation_line,
    kept_rounds,
    protocol_line,
)

_RUNNING = (Phase.ACTIVE, Phase.OBSERVING)
"""Phases without a result yet."""
MAX_CARD_LINES = 9
MAX_LINE_CHARS = 160
CARD_HEADER = "Roundtable"
"""First word of the card's first line (how a person tells the state card from a turn)."""
CARD_FOOTER = "State of roundtabled (signed, never sent to a model; do not edit)."
"""The card's last line: what the block is (tests and the benchmark look for it in model
requests, where it must never appear)."""


def _cut(text: str, limit: int = MAX_LINE_CHARS) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _seats(state: RoundtableState) -> str:
    names = []
    for i, agent in enumerate(state.agents, 1):
        model = state.models.get(agent)
        side = state.options.sides.get(agent)
        names.append(
            f"{i}. {agent}"
            + (f" ({model.label()})" if model else "")
            + (f" [side: {side}]" if side is not None else "")
        )
    return "Seats in order: " + ", ".join(names)


def _phase(state: RoundtableState) -> str:
    pos = round_position(state)
    if state.phase == Phase.ACTIVE:
        if state.end_reason is not None:
            return f"Phase: stopping ({state.end_reason.value}) — {pos.text()}"
        speaking = f", {state.pending.agent} speaking" if state.pending else ""
        return f"Phase: debating — {pos.text()}{speaking}"
    if state.phase == Phase.OBSERVING:
        return f"Phase: the observer consolidates — {pos.text()}"
    reason = state.end_reason.value if state.end_reason else state.phase.value
    return f"Phase: {state.phase.value} ({reason}) — {pos.text()}"


def live_state(state: RoundtableState) -> str:
    """Whether the roundtable runs, in one capitalised word and where it is: ``LIVE round 2/3``,
    ``LIVE observer after round 3/3``, ``STOPPING``, ``CONCLUDED``, ``CANCELLED``, ``ENDED``
    (any other end) or ``ABORTED``. It opens the card, so that among several roundtables under
    one session (the TUI's child sessions) the live one is told at a glance."""
    pos = round_position(state)
    if state.phase == Phase.ACTIVE:
        return "STOPPING" if state.end_reason is not None else f"LIVE {pos.text()}"
    if state.phase == Phase.OBSERVING:
        return f"LIVE {pos.text()}"
    return end_word(state.phase, state.end_reason)


def state_card(state: RoundtableState) -> str:
    """The card of ``state``: its live state (:func:`live_state`) and title, seats in order
    with their models (and assigned sides), rounds and observer, phase with the round and end
    reason, a degraded result's first note, the consensus line when it is no count of the seats'
    stated positions (or stands on positions kept from before an extension), what deliberation
    changed (:func:`roundtabled.core.verdict.deliberation_line`) and what the block is
    (≤ 9 lines)."""
    observer = "built-in" if state.observer == BUILTIN_OBSERVER else state.observer
    extended = f", {len(state.extensions)} extension(s)" if state.extensions else ""
    lines = [
        # The generated title's own "(Roundtable) - " prefix would repeat the header.
        f"{CARD_HEADER} · {live_state(state)} · "
        f"{state.title.removeprefix(TITLE_PREFIX) or state.title}",
        _seats(state),
        f"Rounds: {state.total_rounds}{extended} · observer: {observer}",
        _phase(state),
    ]
    if state.stop_detail:
        lines.append(f"Stopped early: {state.stop_detail}")
    result = build_result(state) if state.phase not in _RUNNING else None
    status = result.status if result is not None else None
    if status is not None and status.degraded:
        # The result's own verdict on itself (docs/result.md), in words: a degraded debate's
        # card must not read like a healthy one's.
        notes = len(status.notes)
        problems = f", {len(state.errors)} problem(s)" if state.errors else ""
        first = f": {status.notes[0]}" if status.notes else ""
        lines.append(
            f"Result: DEGRADED — {notes} note{'' if notes == 1 else 's'}{problems} "
            f"(roundtabled status {state.session_id}){first}"
        )
    elif state.errors:
        lines.append(f"Problems: {len(state.errors)} (roundtabled status {state.session_id})")
    verdict = result.verdict.dump() if result is not None else None
    if verdict is not None and (verdict.get("observerConsensus") or kept_rounds(verdict)):
        # A consensus no seat stated, or one that stands on positions from before an extension:
        # the card says it as the CLI's verdict line does (docs/result.md, verdict).
        line = consensus_line(verdict)
        lines.append(line[0].upper() + line[1:])
    if verdict is not None and (ran := protocol_line(verdict)) is not None:
        lines.append(ran)  # which protocol ran, and its count (docs/deliberation.md, Protocols)
    if verdict is not None and (deliberated := deliberation_line(verdict)) is not None:
        # What deliberation changed: the opening majority beside the final one (docs/result.md);
        # shortened rather than cut at the card's width.
        for shorter in ({"weights": False}, {"weights": False, "brief": True}):
            if len(deliberated) <= MAX_LINE_CHARS:
                break
            deliberated = deliberation_line(verdict, **shorter) or deliberated
        lines.append(deliberated)
    return "\n".join([*(_cut(line) for line in lines[: MAX_CARD_LINES - 1]), CARD_FOOTER])
