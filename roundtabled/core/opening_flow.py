"""Round 1 of an ``opening: "independent"`` roundtable, between the state and the machine.

Pure: while the opening round runs, the worker asks :func:`decide` instead of
:func:`roundtabled.core.machine.decide`; it runs :func:`roundtabled.core.opening.step` on the round
kept in
:attr:`~roundtabled.core.state.RoundtableState.openings` and, once every opening is recorded, hands
the debate back to the machine at round 2 (seat 1), or to the observer when the debate ends there: a
cancel, every seat failed, a unanimous opening with ``until: "converged"`` (the rule of
:mod:`roundtabled.core.deliberation`), or a one-round debate (docs/deliberation.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from roundtabled.core import deliberation, machine, opening, prompts
from roundtabled.core.commands import Cancel, Decision, Finalize, Observation, PersistState, Prompt
from roundtabled.core.opening import OpeningCommand, OpeningObservation, Setup
from roundtabled.core.state import EndReason, Phase, RoundtableState


def running(state: RoundtableState) -> bool:
    """Whether the independent opening round drives this roundtable now: an active, independent
    roundtable whose round 1 is not recorded yet and that was never extended."""
    if not state.active or state.phase != Phase.ACTIVE or state.options.opening != "independent":
        return False
    if state.openings is not None:
        return not state.openings.done
    return (
        state.pending is None
        and not state.history
        and not state.extensions
        and state.current_round == 0
        and state.current_agent_index == 0
    )


def setup(state: RoundtableState) -> Setup:
    """Each seat's prompt (the topic only, as the opening turn of a debate), the topic record and
    the turn timeout."""
    texts = tuple(
        prompts.turn_prompt(state, round_index=0, seat=i, since=(), opening=True)
        for i in range(len(state.agents))
    )
    topic = (
        "── independent opening ──\n"
        f"[Topic] {prompts.effective_topic(state, 0)}\n\n"
        "Every seat answered this topic on its own, without seeing the others; their openings "
        "follow."
    )
    return Setup(state.session_id, texts, topic, state.options.turn_timeout)


@dataclass(slots=True)
class FlowDecision:
    """The new state, the opening round's commands in order, then (once the round is done) the
    machine's decision for what follows it, and the next deadline (epoch ms)."""

    state: RoundtableState
    commands: list[OpeningCommand] = field(default_factory=list)
    after: Decision | None = None
    wake_at: int | None = None


def decide(
    state: RoundtableState,
    obs: OpeningObservation,
    *,
    ids: Sequence[str],
    new_id: str,
    cancel: Cancel | None = None,
) -> FlowDecision:
    """One decision of the opening round.

    Args:
        state: the roundtable (:func:`running` is true for it).
        obs: the read of the roundtable's session, its children and each seat's session.
        ids: ``2 * len(state.agents) + 1`` fresh message ids (used when the round starts).
        new_id: a fresh message id for the turn that follows the round.
        cancel: a cancel received since the last pass (also taken from a stored cancel).
    """
    if cancel is not None and state.end_reason != EndReason.CANCELLED:
        state = machine.with_cancel(state, cancel)
    cancelled = state.end_reason == EndReason.CANCELLED
    rnd = state.openings or opening.start(state.agents, ids, obs.now)
    d = opening.step(rnd, replace(obs, cancelled=cancelled), setup(state))
    new = state.model_copy(update={"openings": d.round, "updated_at": obs.now})
    if state.openings is None:
        d.commands.insert(0, opening.PersistRound())  # the ids are chosen: write them first
    if not d.round.done:
        return FlowDecision(new, d.commands, None, d.wake_at)
    return FlowDecision(new, d.commands, _after(new, obs, new_id), None)


def _after(state: RoundtableState, obs: OpeningObservation, new_id: str) -> Decision:
    """Round 1 is recorded: put it into the history and plan the next turn (or the end)."""
    assert state.openings is not None
    entries = state.openings.entries()
    errors = [*state.errors]
    errors += [f"{e.agent} (round 1): {e.error}" for e in entries if e.has_error]
    new = state.model_copy(
        update={
            "history": [*state.history, *entries],
            "errors": errors,
            "current_round": 1,
            "current_agent_index": 0,
        }
    )
    mobs = Observation(now=obs.now, status=obs.status, messages=obs.messages, new_id=new_id)
    end: EndReason | None = None
    if state.end_reason == EndReason.CANCELLED:
        if not state.options.cancel_summarize:
            done = new.model_copy(
                update={"phase": Phase.DONE, "summary": prompts.cancelled_text(new)}
            )
            return Decision(done, [PersistState(index=True), Finalize()])
        end = EndReason.CANCELLED
    elif all(e.has_error for e in entries):
        end = EndReason.ALL_FAILED
    elif stop := deliberation.stop_after_seat_turn(new, obs.now, obs.messages):
        end, new = stop.reason, stop.recorded(new)
    if end is not None:
        new = new.model_copy(update={"end_reason": end, "phase": Phase.OBSERVING})
    elif new.total_rounds <= 1:
        new = new.model_copy(update={"phase": Phase.OBSERVING})
    d = machine.plan_turn(new, mobs, opening=False)
    if new.phase != state.phase:
        d.commands = [
            replace(c, index=True) if isinstance(c, PersistState | Prompt) else c
            for c in d.commands
        ]
    return d
