"""Property tests of the pure transitions around the turns (:mod:`roundtabled.core.lifecycle`) and
of the machine's error observations and prompt hiding.

Phase 4 runs against a simulated S1/S2 under a schedule hypothesis chooses: S1 or S2 busy, the
tool call waiting, taking the result, ending without it (an error, an abort, the shim's timeout)
or gone, and crashes after any command (the next process resumes from the last *written* state,
and forgets that the tool took the result). Whatever the schedule:

- S1 holds the result exactly once, in the tool call's part or as the fallback message, never
  both and never neither (nothing once S1 or S2 is gone);
- S2 gets one delimiter and the concluded title once; nothing is written into a deleted S2;
- every message is posted only after a written state names its id;
- nothing is posted into a busy session;
- phase 4 finishes once the sessions are idle (a crash after S2 is gone leaves nothing to
  resume: the interruption reaches S1 at most once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core import lifecycle, machine
from roundtabled.core.commands import (
    Abort,
    Observation,
    PersistState,
    Prompt,
    ReleaseResult,
    Toast,
)
from roundtabled.core.deliberation import Call
from roundtabled.core.lifecycle import FinalFacts, PostDelimiter, PostResult, SetTitle, WriteState
from roundtabled.core.machine import ERROR_GRACE_MS
from roundtabled.core.messages import UserView
from roundtabled.core.state import (
    END_SUFFIXES,
    Delivery,
    EndReason,
    Extension,
    Finalization,
    HistoryEntry,
    Options,
    PendingTurn,
    PermissionPolicy,
    Phase,
    RoundtableState,
    end_word,
)
from roundtabled.engine import launch
from tests.unit.test_machine_edges import TURN_MSG, S2Sim, state_with

S1 = "ses_parent000000001"
S2 = "ses_child0000000001"
T0 = 1_700_000_000_000


def ended(
    reason: EndReason | None,
    *,
    parent: bool = True,
    tool: bool = False,
    phase: Phase = Phase.DONE,
) -> RoundtableState:
    return RoundtableState(
        sessionID=S2,
        parentSessionID=S1 if parent else None,
        title="(Roundtable) - t",
        agents=["pm", "dev"],
        total_rounds=1,
        prompt="topic",
        phase=phase,
        end_reason=reason,
        summary="the summary",
        delivery=Delivery(
            toolCallID="call_1" if tool else None, toolMessageID="msg_tool" if tool else None
        ),
        stateMessageID="msg_state",
        statePartID="prt_state",
        created_at=T0,
        updated_at=T0,
    )


@dataclass
class World:
    """S1 and S2 as the server holds them, and what survives a crash."""

    s1: dict[str, str] = field(default_factory=dict)
    s2: dict[str, str] = field(default_factory=dict)
    title: str = "(Roundtable) - t"
    written: list[RoundtableState] = field(default_factory=list)
    named: set[str] = field(default_factory=set)  # message ids some written state names
    toasts: int = 0
    released: bool = False
    released_at: int | None = None
    s2_writes_after_deletion: int = 0


end_reasons = st.sampled_from(
    [
        EndReason.COMPLETED,
        EndReason.CANCELLED,
        EndReason.REPETITION,
        EndReason.OBSERVER_FAILED,
        EndReason.SESSION_DELETED,
        EndReason.PARENT_DELETED,
    ]
)
step_facts = st.fixed_dictionaries(
    {
        "s1_busy": st.booleans(),
        "s2_busy": st.booleans(),
        # what happens to the waiting tool call before this step
        "tool": st.sampled_from(["none", "none", "take", "take-lost", "error", "unmarked", "gone"]),
        "pending": st.booleans(),
        "crash_after": st.integers(min_value=-1, max_value=8),
        "wait_ms": st.sampled_from([0, 1_000, 200_000]),
    }
)


@settings(max_examples=400, deadline=None)
@given(
    reason=end_reasons,
    parent=st.booleans(),
    tool=st.booleans(),
    schedule=st.lists(step_facts, max_size=12),
)
def test_phase_4_delivers_once_and_marks_s2_once_under_any_schedule(
    reason: EndReason, parent: bool, tool: bool, schedule: list[dict[str, Any]]
) -> None:
    start = ended(reason, parent=parent, tool=tool)
    world = World()
    state = start
    now = T0
    done = lost = False
    # S1's tool part: running (the shim polls), holds (it returned the result with the mark),
    # ended (it returned without it: an error, an abort, a told "posted as a message"), gone.
    part = "running"
    consumed = False  # this process handed the result to the tool call (lost in a crash)
    calm = {"s1_busy": False, "s2_busy": False, "tool": "error", "pending": False}
    steps = [*schedule, *([{**calm, "crash_after": -1, "wait_ms": 1_000}] * 6)]
    for n, f in enumerate(steps):
        now += f["wait_ms"]
        if tool and part == "running":
            if f["tool"] in ("take", "take-lost") and world.released:
                # Engine.take_result: the result and its mark, or word of the fallback; with
                # "take-lost" the answer never made it into S1 (S1 aborted at that moment, the
                # poll timed out) and the tool call ended without it.
                taken = lifecycle.tool_may_take(state)
                part = "holds" if taken and f["tool"] == "take" else "ended"
                consumed = consumed or taken
            elif f["tool"] in ("error", "unmarked"):
                part = "ended"
            elif f["tool"] == "gone":
                part = "gone"
        tool_call: tuple[str | None, bool] | None = None
        want_tool, _ = lifecycle.final_reads(state)
        if want_tool:
            status = {
                "running": "pending" if f["pending"] else "running",
                "holds": "completed",
                "ended": "completed" if f["tool"] == "unmarked" else "error",
                "gone": None,
            }[part]
            tool_call = (status, part == "holds")
        facts = FinalFacts(
            now=now,
            result_id=f"msg_result{n:03d}",
            delimiter_id=f"msg_delim{n:03d}",
            consumed=consumed,
            tool_call=tool_call,
            s1_busy=f["s1_busy"],
            s2_busy=f["s2_busy"],
            released_at=world.released_at,
        )
        step = lifecycle.finalize(state, facts)
        crashed = False
        for i, cmd in enumerate(step.commands):
            if isinstance(cmd, ReleaseResult):
                if not world.released:
                    world.released, world.released_at = True, now
            elif isinstance(cmd, WriteState):
                if not lifecycle.writes_s2(start):
                    world.s2_writes_after_deletion += 1
                world.written.append(cmd.state)
                world.named |= {
                    m
                    for m in (
                        cmd.state.delivery.no_reply_message_id,
                        cmd.state.finalization.delimiter_message_id,
                    )
                    if m
                }
                state = cmd.state
            elif isinstance(cmd, PostResult):
                assert not f["s1_busy"], "a noReply into a busy S1"
                assert parent and lifecycle.deliver_kind(start) != "none"
                if lifecycle.writes_s2(start):
                    assert cmd.message_id in world.named, "posted before its id was written"
                world.s1.setdefault(cmd.message_id, cmd.text)  # post_once
            elif isinstance(cmd, PostDelimiter):
                assert not f["s2_busy"], "a noReply into a busy S2"
                assert lifecycle.writes_s2(start)
                assert cmd.message_id in world.named, "posted before its id was written"
                world.s2.setdefault(cmd.message_id, "delimiter")
            elif isinstance(cmd, SetTitle):
                assert lifecycle.writes_s2(start)
                world.title = cmd.title
            elif isinstance(cmd, Toast):
                world.toasts += 1
            if i == f["crash_after"]:
                crashed = True
                break
        if crashed and not lifecycle.writes_s2(start):
            # S2 (or S1, and S2 with it) is gone: a new process finds no roundtable to resume.
            lost = True
            break
        if crashed:
            # A new process: the last written state (S2 holds it), or the state the debate ended
            # with (nothing of phase 4 written yet). The result is released again.
            state = world.written[-1] if world.written else start
            world.released, world.released_at = False, None
            consumed = False
            continue
        state = step.state
        if step.done:
            done = True
            break
        assert step.wake_at is not None and step.wake_at > now
    in_tool = tool and part == "holds"
    assert len(world.s1) + in_tool <= 1, f"S1 got the result {len(world.s1)} + {in_tool} times"
    if lost:
        assert world.s2 == {} and world.s2_writes_after_deletion == 0
        return
    assert done, "phase 4 never finished with both sessions idle"
    nobody = not parent or lifecycle.deliver_kind(start) == "none"
    if nobody:
        assert world.s1 == {} and state.delivery.delivered_via == "none"
    if state.delivery.delivered_via == "no-reply":
        assert len(world.s1) == 1
    if not nobody:
        assert len(world.s1) + in_tool == 1, "S1 never got the result"
        assert state.delivery.delivered_via == ("tool" if in_tool else "no-reply")
    if lifecycle.writes_s2(start):
        assert len(world.s2) == 1, "one delimiter"
        word = end_word(start.phase, start.end_reason)
        assert world.title == f"{start.title} · {word}"
        if start.end_reason == EndReason.CANCELLED:
            assert world.title.endswith(" · CANCELLED"), world.title
        assert state.finalization.title_done and state.finalization.toast_done
        assert world.written[-1].finalization.toast_done  # the index says finalized
    else:
        assert world.s2 == {} and world.s2_writes_after_deletion == 0
        assert world.title == start.title
    assert world.toasts >= 1


@given(
    reason=end_reasons,
    title=st.text(min_size=1, max_size=30),
    times=st.integers(min_value=0, max_value=3),
)
def test_the_concluded_title_carries_the_suffix_once(
    reason: EndReason, title: str, times: int
) -> None:
    word = end_word(Phase.DONE, reason)
    marked = title + "".join(END_SUFFIXES[i % len(END_SUFFIXES)] for i in range(times))
    assert lifecycle.concluded_title(marked, word) == lifecycle.concluded_title(title, word)
    assert lifecycle.concluded_title(marked, word).endswith(f" · {word}")
    assert not any(
        lifecycle.concluded_title(marked, word)[: -len(f" · {word}")].endswith(s)
        for s in END_SUFFIXES
    )
    message, variant = lifecycle.end_toast(ended(reason))
    ok = reason in (EndReason.COMPLETED, EndReason.REPETITION, EndReason.OBSERVER_FAILED)
    assert (variant == "success") == ok
    assert message.endswith(ended(reason).title)


@given(
    total=st.integers(min_value=1, max_value=10),
    rounds=st.integers(min_value=1, max_value=5),
    timeout=st.none() | st.floats(min_value=1, max_value=3600),
    policy=st.none() | st.sampled_from(list(PermissionPolicy)),
    had_parent=st.booleans(),
    new_parent=st.none() | st.just("ses_newparent0000001"),
    reason=end_reasons,
)
def test_extend_reopens_a_concluded_roundtable_at_its_next_round(
    total: int,
    rounds: int,
    timeout: float | None,
    policy: PermissionPolicy | None,
    had_parent: bool,
    new_parent: str | None,
    reason: EndReason,
) -> None:
    base = ended(reason, parent=had_parent).model_copy(
        update={
            "total_rounds": total,
            "current_round": total,
            "history": [HistoryEntry(agent="pm", round=1, response="r")],
            "finalization": ended(reason).finalization.model_copy(
                update={"delimiter_message_id": "msg_d", "title_done": True, "toast_done": True}
            ),
            "delivery": Delivery(deliveredVia="tool"),
        }
    )
    ext = Extension(from_round=total, prompt="more", mode="continuation")
    delivery = Delivery(toolCallID="call_2", toolMessageID="msg_tool2")
    new = launch.extended(
        base,
        rounds=rounds,
        extension=ext,
        parent_session_id=new_parent,
        delivery=delivery,
        call=Call(turn_timeout=timeout, permission_policy=policy),
        now=T0 + 5,
    )
    # A debate that stopped early continues right after the last round a seat took a turn in
    # (here round 1): no skipped, never-mentioned round numbers (docs/deliberation.md).
    start = total if reason == EndReason.COMPLETED else min(total, 1)
    assert new.active and new.phase == Phase.ACTIVE
    assert new.total_rounds == start + rounds
    assert (new.current_round, new.current_agent_index) == (start, 0)
    assert new.pending is None and new.end_reason is None and new.summary is None
    assert new.extensions == [*base.extensions, ext.model_copy(update={"from_round": start})]
    assert new.history == base.history  # the earlier rounds stay
    assert new.delivery == delivery and new.finalization == Finalization()
    assert new.parent_session_id == (base.parent_session_id or new_parent)
    assert new.options.turn_timeout == (timeout or base.options.turn_timeout)
    assert new.options.permission_policy == (policy or base.options.permission_policy)
    assert new.updated_at == T0 + 5
    # The machine plans the first seat of the first new round, never a turn of a played round.
    d = machine.decide(new, Observation(now=T0 + 6, status="idle", new_id="msg_next"))
    prompts_ = [c for c in d.commands if isinstance(c, Prompt)]
    assert [(p.agent, p.marker.round, p.marker.seat) for p in prompts_] == [("pm", start, 0)]


@given(
    phase=st.sampled_from([Phase.ACTIVE, Phase.OBSERVING, Phase.DONE]),
    pending=st.booleans(),
    facts=step_facts,
)
def test_an_orphan_is_aborted_written_finalized_and_never_delivered(
    phase: Phase, pending: bool, facts: dict[str, Any]
) -> None:
    state = ended(None, phase=phase)
    if pending:
        state = state.model_copy(
            update={
                "pending": PendingTurn(
                    kind="turn", round=0, seat=1, agent="dev", messageID="msg_p", prompted_at=T0
                )
            }
        )
    d = lifecycle.orphaned(state)
    assert d.commands == [Abort(), PersistState(index=True)]
    assert d.state.phase == Phase.ABORTED and not d.state.active
    assert d.state.end_reason == EndReason.PARENT_DELETED and d.state.pending is None
    assert d.state.finalization.toast_done  # the start-up scan skips it from now on
    assert machine.decide(d.state, Observation(now=T0, status="idle")).commands == []
    step = lifecycle.finalize(
        d.state,
        FinalFacts(
            now=T0,
            result_id="msg_r",
            delimiter_id="msg_d",
            s1_busy=facts["s1_busy"],
            s2_busy=facts["s2_busy"],
        ),
    )
    assert step.done
    assert not [c for c in step.commands if not isinstance(c, ReleaseResult)]
    assert step.state.delivery.delivered_via == "none"


# ------------------------------------------------------------------------------------------------
# Error observations and early hiding (machine)
# ------------------------------------------------------------------------------------------------


def pending_state(prompted_at: int, *, seat: int = 1, rnd: int = 0) -> RoundtableState:
    return ended(None, phase=Phase.ACTIVE).model_copy(
        update={
            "end_reason": None,
            "summary": None,
            "current_round": rnd,
            "current_agent_index": seat,
            "pending": PendingTurn(
                kind="turn",
                round=rnd,
                seat=seat,
                agent=["pm", "dev"][seat],
                messageID="msg_pending",
                prompted_at=prompted_at,
            ),
            "options": Options(turn_timeout=300),
        }
    )


@given(errors=st.lists(st.integers(min_value=0, max_value=5_000), min_size=1, max_size=5))
def test_the_first_error_of_a_turn_is_noted_once(errors: list[int]) -> None:
    """The server often reports a failure twice: the turn keeps the first error it was told of."""
    state = pending_state(T0)
    for n, e in enumerate(errors):
        obs = Observation(
            now=T0 + e, status="busy", pending_found=True, error=(T0 + e, f"UnknownError: {n}")
        )
        state = machine.decide(state, obs).state
    assert state.pending is not None
    assert (state.pending.error_seen_at, state.pending.error) == (T0 + errors[0], "UnknownError: 0")


@given(
    error_after=st.integers(min_value=0, max_value=10_000),
    looked=st.integers(min_value=0, max_value=2 * ERROR_GRACE_MS),
)
def test_a_turn_with_an_error_and_no_reply_settles_after_the_grace_not_before(
    error_after: int, looked: int
) -> None:
    """The server reported an error for S2 and stored no reply (a seat's model not found): the
    error, seen through an observation, settles the turn once S2 has been idle with nothing
    stored for the grace, and never before."""
    state = pending_state(T0)
    error_at = T0 + error_after
    user = UserView(id="msg_pending", created=T0, marker=None, text="prompt")
    first = machine.decide(
        state,
        Observation(
            now=error_at,
            status="idle",
            messages=(user,),
            pending_found=True,
            error=(error_at, "UnknownError: Model not found"),
        ),
    )
    assert first.state.pending is not None and first.state.pending.error_seen_at == error_at
    assert first.wake_at == error_at + ERROR_GRACE_MS
    later = machine.decide(
        first.state,
        Observation(now=error_at + looked, status="idle", messages=(user,), pending_found=True),
    )
    settled = later.state.pending is None or later.state.pending.message_id != "msg_pending"
    assert settled == (looked >= ERROR_GRACE_MS)
    if settled:
        assert later.state.history[-1].has_error
        assert later.state.history[-1].error == "UnknownError: Model not found"


@given(
    seat=st.integers(min_value=0, max_value=1),
    rnd=st.integers(min_value=0, max_value=2),
    hide=st.booleans(),
    observer=st.booleans(),
)
def test_the_prompt_hidden_early_is_the_one_the_next_turn_hides(
    seat: int, rnd: int, hide: bool, observer: bool
) -> None:
    """:func:`machine.hides_prompt` (the early hiding's rule) says yes exactly when the decision
    on the finished turn hides that turn's prompt."""
    agents = ["pm", "dev"]
    state = state_with(agents, rounds=3, pending=(rnd, seat), observing=observer)
    state = state.model_copy(
        update={"options": state.options.model_copy(update={"hide_past_prompts": hide})}
    )
    sim = S2Sim().prompt(agents[seat], rnd, seat).answer(f"a distinct reply {rnd} {seat}")
    d = machine.decide(state, sim.observe())
    hidden = [v.id for c in d.commands if isinstance(c, Prompt) for v in c.hide]
    assert hidden in ([], [TURN_MSG])
    assert (hidden == [TURN_MSG]) == machine.hides_prompt(state)
    assert machine.hides_prompt(state) == (hide and not observer and (rnd, seat) != (0, 0))
