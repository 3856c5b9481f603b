"""What a model request of a roundtable leaves out on OpenCode 2.x: the ids listed in S2's metadata.

OpenCode 2.x has no message edit, so the roundtabled plugin's ``context`` hook drops from each
model request exactly the message ids the daemon lists under ``metadata.roundtabled.hidden`` of
S2 (docs/plugin.md, "The context hook"), and the same set the newest turn prompt's marker
names (the plugin derives it from the messages alone). The daemon writes that list with the
state (one PATCH) for the turn a prompt starts: before the prompt, or right after it where
:func:`write_may_follow` allows. Which ids it lists is the 1.x plugin's rule
(``roundtabled/tools/roundtable-plugin.ts``, docs/plugin.md "What it changes"), decided here from
the state and S2's turn prompts:

- the answered turn prompts the machine keeps out of later requests (``state.unhidden``: every
  seat's prompt but the opening one, which carries the topic);
- for a seat's turn with ``context: "recent"`` (docs/deliberation.md), the seat turns of the
  rounds :func:`roundtabled.core.deliberation.rounds_to_hide` names, their prompts and the
  replies to them (the turn's prompt carries their digest instead): the same span the 1.x
  marker's ``hide`` carries;
- for a seat's turn, every observer prompt and its reply (an extension's seats argue from the
  debate, not from the verdict before it).

The observer's request keeps every reply. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from roundtabled.core import deliberation
from roundtabled.core.server_records import PromptRecord
from roundtabled.core.state import MODE_NOTES, PLUGIN_MISSING_V2, PendingTurn, RoundtableState

__all__ = [
    "PLUGIN_MISSING",
    "hidden_ids",
    "needs_prompts",
    "recent_span",
    "said_notes",
    "write_may_follow",
]

PLUGIN_MISSING = PLUGIN_MISSING_V2
"""How the start's note begins when the plugin is not loaded for S2's directory (the engine adds
where and what to run)."""


def said_notes(state: RoundtableState) -> RoundtableState:
    """``state`` without the note that the plugin shaped the requests when its notes say the
    plugin is not loaded (:data:`PLUGIN_MISSING`): on 2.x every turn is planned in plugin mode,
    and the mode's note would claim what did not happen."""
    if not any(n.startswith(PLUGIN_MISSING) for n in state.notes):
        return state
    plugin_note = MODE_NOTES["plugin"]
    if plugin_note not in state.notes:
        return state
    return state.model_copy(update={"notes": [n for n in state.notes if n != plugin_note]})


def recent_span(state: RoundtableState) -> tuple[int, int] | None:
    """The 0-indexed first and last round whose seat turns the pending turn's requests leave out
    (``context: "recent"``), or ``None``: the pending turn is no seat turn, the context is
    ``full``, or no round is hidden yet (before round 4). The machine writes the same span into
    a 1.x turn's marker (``Marker.hide``)."""
    pend = state.pending
    if pend is None or pend.kind != "turn" or state.options.context != "recent":
        return None
    rounds = deliberation.rounds_to_hide(pend.round)
    if not rounds:
        return None
    return rounds[0] - 1, rounds[-1] - 1


def needs_prompts(state: RoundtableState) -> bool:
    """Whether :func:`hidden_ids` needs S2's turn prompts for the pending turn (a seat's turn
    with a round to leave out, or after an extension, whose earlier verdicts it leaves out);
    else ``state.unhidden`` is the whole list and S2 need not be read."""
    pend = state.pending
    if pend is None or pend.kind != "turn":
        return False
    return recent_span(state) is not None or bool(state.extensions)


def hidden_ids(state: RoundtableState, prompts: Sequence[PromptRecord] = ()) -> list[str]:
    """The message ids the pending turn's model requests leave out, in a stable order (the
    machine's ``unhidden`` first, then by ``prompts``' order).

    Args:
        state: the roundtable's state (its pending turn, options and ``unhidden``).
        prompts: S2's user messages, oldest first (needed only when :func:`needs_prompts`).

    Returns:
        Message ids; never the pending turn's own prompt, never the opening prompt (round 0,
        seat 0), and, for the observer's turn or with nothing pending, only ``state.unhidden``.
    """
    out = dict.fromkeys(state.unhidden)
    pend = state.pending
    if pend is None or pend.kind != "turn":
        return list(out)
    span = recent_span(state)
    for p in prompts:
        key = p.key
        if key is None or key.roundtable != state.session_id or p.id == pend.message_id:
            continue
        if key.round == 0 and key.seat == 0:
            continue  # the opening prompt: it carries the topic
        observer = key.seat < 0
        in_span = span is not None and span[0] <= key.round <= span[1]
        if observer or in_span:
            out.update(dict.fromkeys((p.id, *p.replies)))
    out.pop(pend.message_id, None)
    return list(out)


def write_may_follow(
    written: str | None,
    ended: PendingTurn | None,
    planned: RoundtableState,
    *,
    recorded: bool,
    marker_hiding: bool,
) -> bool:
    """Whether the state write of the turn planned in ``planned`` may go after its prompt
    instead of before it (docs/design.md, "The 2.x shell": when the state is written).

    Both reasons for the write to land first are gone when all of these hold:

    - hiding: the plugin loaded for S2's directory hides by the newest turn prompt's marker
      (``marker_hiding``: the daemon trusts its report of the 2.x plugin protocol that does,
      :data:`roundtabled.engine.plugins.PLUGIN_VERSION_V2`; an earlier 2.x plugin hides only the
      ids S2's metadata lists, so until the write lands it would let the ended turn's prompt
      into this turn's requests), and the planned prompt's marker says ``view: "plugin"``, so
      that plugin derives from the prompts' markers alone every id :func:`hidden_ids` lists for
      it (the earlier turn prompts but the opening one, and for a seat's turn the observer
      prompts and the ``context: "recent"`` span, each with its replies: the plugin's
      ``markedHidden``);
    - a restart: the block S2 already holds (``written``: the pending prompt id of the last
      state written, ``None`` when none is known, as before turn 1) is the state this decision
      was taken from, its pending turn ``ended`` and now ``recorded``: a daemon killed before
      the write resumes from that block, reads the same ended turn and decides the same next
      turn, whose prompt id names the turn (the prompt it finds already sent is not sent again);
    - the planned turn is another prompt than the ended one (not a re-send of the same id);
    - the planned turn is a seat's: until the write lands, S2's metadata still lists the ended
      seat turn's ids, a subset of the planned seat turn's (``unhidden`` and the ``recent`` span
      only grow from one seat turn to the next), so the union the plugin drops is exactly the
      planned turn's list. The observer's request keeps every reply the seats' lists drop, so
      its write lands first.

    Args:
        written: the pending prompt id of the block last written into S2, or ``None``.
        ended: the pending turn of the state the decision was taken from, or ``None``.
        planned: the decision's state (its new pending turn and view).
        recorded: the decision recorded ``ended``'s turn (a ``TurnRecorded`` command).
        marker_hiding: the plugin loaded for S2's directory is known to hide by the newest
            turn prompt's marker (docs/plugin.md, "The context hook"); ``False`` when unknown.

    Returns:
        ``True`` when the write may follow the prompt; ``False`` keeps it before.
    """
    pend = planned.pending
    return (
        marker_hiding
        and recorded
        and written is not None
        and ended is not None
        and written == ended.message_id
        and pend is not None
        and pend.message_id != ended.message_id
        and pend.kind == "turn"
        and planned.view == "plugin"
    )
