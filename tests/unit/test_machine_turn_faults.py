"""The machine on turns the server accepted but did not run as asked (roundtabled.core.machine).

- never started: the prompt was accepted (204), never stored, and the server reported an error
  → failed with the server's message within the grace, once; a busy database → sent again once
  with the same message id;
- folded: the seat's prompt is stored, a later person's message was answered instead and S2 is
  idle → the person's message and its reply recorded once, the seat prompted again once with a
  fresh id (the folded prompt hidden), never a third time; property-tested with the observation
  sequence repeated, duplicated and interleaved with stale observations;
- busy database at the end of a reply: a stored text is kept, nothing stored → one re-prompt.
Pure: no server, no clock.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core import machine
from roundtabled.core.commands import Observation, Prompt, TurnRecorded
from roundtabled.core.machine import MAX_REPROMPTS, NEVER_STARTED_GRACE_MS
from roundtabled.core.state import RoundtableState
from tests.unit.test_machine_edges import T0, TURN_MSG, S2Sim, prompted, state_with

MODEL_NOT_FOUND = "ProviderModelNotFoundError: Model not found: scripted/no-such-model"
BUSY = "UnknownError: effect/sql/SqlError: Failed to execute statement"
PERSON_MSG = "msg_user00000000000002"
FRESH = "msg_next00000000000001"


def with_error(state: RoundtableState, text: str, at: int = T0 + 50) -> RoundtableState:
    pend = state.pending
    assert pend is not None
    return state.model_copy(
        update={"pending": pend.model_copy(update={"error_seen_at": at, "error": text})}
    )


def not_stored(now: int, status: str = "idle") -> Observation:
    """The prompt was accepted in this process but its user message is not in S2."""
    return Observation(
        now=now,
        status=status,
        pending_found=False,
        accepted=True,  # type: ignore[arg-type]
        new_id=FRESH,
    )


def prompts_of(cmds: list[Any]) -> list[Prompt]:
    return [c for c in cmds if isinstance(c, Prompt)]


# -- never started --------------------------------------------------------------------------


def test_a_model_not_found_fails_the_turn_with_the_server_s_message_after_the_grace() -> None:
    state = with_error(state_with(["pm", "dev", "rv"], rounds=1, pending=(0, 1)), MODEL_NOT_FOUND)
    busy = machine.decide(state, not_stored(T0 + 60, status="busy"))
    assert busy.commands == [] and busy.wake_at == T0 + 50 + NEVER_STARTED_GRACE_MS
    early = machine.decide(state, not_stored(T0 + 50 + NEVER_STARTED_GRACE_MS - 1))
    assert early.commands == [] and early.wake_at == T0 + 50 + NEVER_STARTED_GRACE_MS
    late = machine.decide(state, not_stored(T0 + 50 + NEVER_STARTED_GRACE_MS))
    assert prompted(late.commands) == ["rv"]
    failed = late.state.history[-1]
    assert failed.agent == "dev" and failed.has_error and failed.error == MODEL_NOT_FOUND
    assert late.state.errors == [f"dev (round 1): {MODEL_NOT_FOUND}"]


def test_without_an_error_an_accepted_prompt_is_waited_for_until_the_turn_timeout() -> None:
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0), timeout=300)
    d = machine.decide(state, not_stored(T0 + 10_000))
    assert d.commands == [] and d.wake_at == T0 + 300_000


def test_a_busy_database_sends_the_never_stored_prompt_again_once_with_the_same_id() -> None:
    state = with_error(state_with(["pm", "dev"], rounds=1, pending=(0, 0)), BUSY)
    again = machine.decide(state, not_stored(T0 + 6_000))
    [p] = prompts_of(again.commands)
    assert p.agent == "pm" and p.message_id == TURN_MSG  # it was never stored: no duplicate
    pend = again.state.pending
    assert pend is not None and pend.reprompts == 1 and pend.error_seen_at is None
    # The same failure once more: settled as failed, never a third prompt.
    second = with_error(again.state, BUSY, at=T0 + 12_000)
    d = machine.decide(second, not_stored(T0 + 13_000))
    assert prompted(d.commands) == ["dev"]
    assert d.state.history[-1].agent == "pm" and d.state.history[-1].error == BUSY


# -- folded into a later user message --------------------------------------------------------


def folded_s2(answered: bool = True) -> S2Sim:
    sim = S2Sim().prompt("dev", 0, 1)
    sim.user("A person: what about cost?", mid=PERSON_MSG)
    if answered:
        sim.answer("BUILD: cheap.", parent=PERSON_MSG, agent="build", mid="msg_user00000000000002a")
    return sim


def test_a_folded_prompt_records_the_interjection_and_prompts_the_seat_again() -> None:
    state = state_with(["pm", "dev", "rv"], rounds=1, pending=(0, 1))
    d = machine.decide(state, folded_s2().observe(now=T0 + 2_000))
    [p] = prompts_of(d.commands)
    assert p.agent == "dev" and p.message_id == FRESH
    assert [v.id for v in p.hide] == [TURN_MSG]  # the unanswered prompt leaves the context
    kinds = [(e.kind, e.response) for e in d.state.history]
    assert kinds == [("user", "A person: what about cost?"), ("interjection", "BUILD: cheap.")]
    assert [c.entry.kind for c in d.commands if isinstance(c, TurnRecorded)] == [
        "user",
        "interjection",
    ]
    pend = d.state.pending
    assert pend is not None and (pend.round, pend.seat, pend.reprompts) == (0, 1, 1)


def test_a_prompt_folded_twice_fails_the_turn_instead_of_a_third_prompt() -> None:
    state = state_with(["pm", "dev", "rv"], rounds=1, pending=(0, 1))
    pend = state.pending
    assert pend is not None
    state = state.model_copy(
        update={"pending": pend.model_copy(update={"reprompts": MAX_REPROMPTS})}
    )
    d = machine.decide(state, folded_s2().observe(now=T0 + 2_000))
    assert prompted(d.commands) == ["rv"]
    dev = [e for e in d.state.history if e.agent == "dev"]
    assert len(dev) == 1 and dev[0].has_error and "answered instead" in (dev[0].error or "")


def test_not_folded_while_the_person_s_message_is_unanswered_or_s2_busy() -> None:
    state = state_with(["pm", "dev", "rv"], rounds=1, pending=(0, 1), timeout=300)
    for obs in (
        folded_s2(answered=False).observe(now=T0 + 2_000),
        folded_s2().observe(now=T0 + 2_000, status="busy"),
    ):
        d = machine.decide(state, obs)
        assert d.commands == [] and d.wake_at == T0 + 300_000


def test_a_person_s_message_after_an_answered_prompt_is_no_fold() -> None:
    sim = S2Sim().prompt("dev", 0, 1).answer("DEV: my view.", agent="dev")
    sim.user("A person: what about cost?", mid=PERSON_MSG)
    sim.answer("BUILD: cheap.", parent=PERSON_MSG, agent="build", mid="msg_user00000000000002a")
    state = state_with(["pm", "dev", "rv"], rounds=1, pending=(0, 1))
    d = machine.decide(state, sim.observe(now=T0 + 2_000))
    assert prompted(d.commands) == ["rv"]
    assert [e.kind for e in d.state.history] == ["turn", "user", "interjection"]


def after_reprompt(answer: bool) -> S2Sim:
    """S2 from the re-prompt on (what the worker reads once the new prompt is pending)."""
    sim = S2Sim().prompt("dev", 0, 1, mid=FRESH)
    if answer:
        sim.answer("DEV: my view after all.", parent=FRESH, agent="dev", mid=FRESH + "a")
    return sim


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["folded", "folded-busy", "unanswered", "reprompt-busy", "reprompt-done"]),
        min_size=1,
        max_size=12,
    )
)
def test_property_a_folded_prompt_whatever_the_observations(steps: list[str]) -> None:
    """Any sequence of observations of the fold (repeated, stale, S2 still busy) and of the
    re-prompt (running, answered): the person's message is recorded once, dev is prompted again
    at most once, dev's turn is recorded at most once and only from its own reply, and the next
    seat is prompted only after it."""
    state = state_with(["pm", "dev", "rv"], rounds=1, pending=(0, 1), timeout=300)
    now = T0 + 1_000
    dev_prompts = 0
    for step in steps:
        now += 100
        pend = state.pending
        if pend is None or pend.agent != "dev":
            break
        if pend.message_id == TURN_MSG:  # observations of the folded prompt
            sim = folded_s2(answered=step != "unanswered")
            obs = sim.observe(now=now, status="busy" if step == "folded-busy" else "idle")
        else:  # observations from the re-prompt on
            done = step == "reprompt-done"
            obs = after_reprompt(done).observe(now=now, status="idle" if done else "busy")
        d = machine.decide(state, obs)
        dev_prompts += sum(1 for p in prompts_of(d.commands) if p.agent == "dev")
        state = d.state
    persons = [e for e in state.history if e.kind == "user"]
    dev_turns = [e for e in state.history if e.kind == "turn" and e.agent == "dev"]
    assert len(persons) <= 1 and dev_prompts <= 1 and len(dev_turns) <= 1
    if dev_turns:
        assert dev_turns[0].response == "DEV: my view after all." and not dev_turns[0].has_error
        assert state.pending is not None and state.pending.agent == "rv"
    if dev_prompts:
        assert len(persons) == 1


# -- a busy database at the end of a reply ----------------------------------------------------


def test_a_reply_stored_before_a_busy_database_error_keeps_its_text() -> None:
    sim = S2Sim().prompt("pm", 0, 0).answer("PM: ship it.", agent="pm", error="UnknownError")
    sim.raw[-1]["info"]["error"]["data"]["message"] = "Failed to execute statement"
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0))
    d = machine.decide(state, sim.observe(now=T0 + 2_000))
    assert prompted(d.commands) == ["dev"]
    pm = d.state.history[-1]
    assert pm.response == "PM: ship it." and not pm.has_error and not d.state.errors


def test_nothing_stored_before_a_busy_database_error_prompts_again_once() -> None:
    sim = S2Sim().prompt("pm", 0, 0).answer("", agent="pm", error="UnknownError")
    sim.raw[-1]["info"]["error"]["data"]["message"] = "Failed to execute statement"
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0))
    d = machine.decide(state, sim.observe(now=T0 + 2_000))
    [p] = prompts_of(d.commands)
    assert p.agent == "pm" and p.message_id == FRESH
    pend = d.state.pending
    assert pend is not None and pend.reprompts == 1
    # Failing the same way after the re-prompt: recorded as failed, the next seat goes on.
    again = S2Sim().prompt("pm", 0, 0, mid=FRESH)
    again.answer("", parent=FRESH, agent="pm", error="UnknownError")
    d2 = machine.decide(d.state, again.observe(now=T0 + 9_000))
    assert prompted(d2.commands) == ["dev"]
    assert d2.state.history[-1].has_error
