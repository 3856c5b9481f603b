"""Table-driven tests of :func:`roundtabled.core.machine.decide` for the edge cases of
docs/behaviour.md.

Each case builds a roundtable state with one pending turn, a synthetic S2 (the turn's prompt and
its assistant messages as the real server stores them) and an observation, then checks the
decision: failure (docs/behaviour.md, 'A seat fails'), every agent of a round failed, a retrying
turn, timeout and its
abort, loop detection with the default and a configured threshold, cancel, S2/S1
deleted and a person's interjection in S2. Pure: no server, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from roundtabled.core import lifecycle, machine
from roundtabled.core.commands import (
    Abort,
    Cancel,
    Finalize,
    Observation,
    PersistState,
    Prompt,
    Toast,
)
from roundtabled.core.machine import ABORT_GRACE_MS, ERROR_GRACE_MS
from roundtabled.core.result import CANCELLED_HEADER, REPETITION_TEXT, delivery_text
from roundtabled.core.state import (
    EndReason,
    HistoryEntry,
    Marker,
    Options,
    PendingTurn,
    Phase,
    RoundtableState,
    Signer,
)
from roundtabled.opencode import v1_wire
from tests.states import fresh, raw_prompt

SIGNER = Signer(b"e" * 32)
S2 = "ses_edge000000000001"
T0 = 10_000_000
"""Epoch ms at which the pending turn was prompted."""
TURN_MSG = "msg_turn00000000000001"

LOOP = (
    "I still believe the modular monolith is the right call because it keeps deployment simple "
    "and limits the blast radius."
)


def entry(agent: str, rnd: int, seat: int, text: str, *, error: bool = False) -> HistoryEntry:
    """A finished seat turn (``rnd`` 1-based)."""
    return HistoryEntry(
        agent=agent,
        round=rnd,
        seat=seat,
        response=text,
        has_error=error,
        error="APIError: boom" if error else None,
    )


def state_with(
    agents: list[str],
    *,
    rounds: int,
    pending: tuple[int, int] | None,
    history: list[HistoryEntry] | None = None,
    threshold: float = 0.85,
    timeout: float = 300,
    observing: bool = False,
    **extra: Any,
) -> RoundtableState:
    """A state whose pending seat turn is ``(round0, seat)`` (``None``: no turn in flight)."""
    pend = None
    if pending is not None:
        rnd, seat = pending
        pend = PendingTurn(
            kind="observer" if observing else "turn",
            round=rnd,
            seat=-1 if observing else seat,
            agent="roundtable-observer" if observing else agents[seat],
            messageID=TURN_MSG,
            prompted_at=T0,
        )
    cur_round, cur_seat = pending or (0, 0)
    return fresh(
        S2,
        agents,
        rounds,
        current_round=cur_round,
        current_agent_index=max(cur_seat, 0),
        phase=Phase.OBSERVING if observing else Phase.ACTIVE,
        history=history or [],
        pending=pend,
        options=Options(turn_timeout=timeout, loop_threshold=threshold),
        **extra,
    )


@dataclass
class S2Sim:
    """The messages of S2 from the pending turn's prompt on, as ``GET /message`` returns them."""

    raw: list[dict[str, Any]] = field(default_factory=list)

    def prompt(
        self, agent: str, rnd: int, seat: int, *, mid: str = TURN_MSG, created: int = T0
    ) -> S2Sim:
        marker = Marker(kind="turn", round=rnd, seat=seat, agent=agent, roundtable=S2)
        self.raw.append(raw_prompt(mid, "your turn", marker, S2, SIGNER, created=created))
        return self

    def answer(
        self,
        text: str,
        *,
        parent: str = TURN_MSG,
        agent: str = "x",
        error: str | None = None,
        completed: bool = True,
        finish: str | None = "stop",
        mid: str | None = None,
    ) -> S2Sim:
        info: dict[str, Any] = {
            "id": mid or f"msg_ans{len(self.raw):015d}",
            "role": "assistant",
            "parentID": parent,
            "agent": agent,
            "time": {"created": T0 + 1, **({"completed": T0 + 2} if completed else {})},
        }
        if error:
            info["error"] = {"name": error, "data": {"message": error.lower()}}
        elif finish:
            info["finish"] = finish
        self.raw.append(
            {"info": info, "parts": [{"type": "step-start"}, {"type": "text", "text": text}]}
        )
        return self

    def user(self, text: str, mid: str = "msg_user00000000000001") -> S2Sim:
        self.raw.append(
            {
                "info": {"id": mid, "role": "user", "time": {"created": T0 + 3}},
                "parts": [{"type": "text", "text": text}],
            }
        )
        return self

    def observe(self, *, now: int = T0 + 1000, status: str = "idle", **kw: Any) -> Observation:
        views = tuple(v1_wire.message_view(m, S2, SIGNER) for m in self.raw)
        return Observation(
            now=now,
            status=status,  # type: ignore[arg-type]
            messages=views,
            pending_found=bool(self.raw),
            accepted=True,
            new_id="msg_next00000000000001",
            **kw,
        )


def kinds(cmds: list[Any]) -> list[str]:
    return [type(c).__name__ for c in cmds]


def prompted(cmds: list[Any]) -> list[str]:
    return [c.agent for c in cmds if isinstance(c, Prompt)]


def toasts(cmds: list[Any]) -> list[str]:
    """The messages of the toasts that are always shown (progress toasts: test_progress.py)."""
    return [c.message for c in cmds if isinstance(c, Toast) and c.progress is None]


# ------------------------------------------------------------------------------------------------
# Failure, all-failed, retry (docs/behaviour.md, 'A seat fails')
# ------------------------------------------------------------------------------------------------

FAILURE_CASES = [
    pytest.param(
        ["pm", "dev", "rv"],
        1,
        (0, 1),
        [entry("pm", 1, 0, "ok")],
        ["rv"],
        "DEV failed on Round 1. Skipping to RV.",
        None,
        id="middle-seat-fails-next-seat-speaks",
    ),
    pytest.param(
        ["pm", "dev"],
        2,
        (0, 1),
        [entry("pm", 1, 0, "ok")],
        ["pm"],
        "DEV failed on Round 1. Skipping to PM.",
        None,
        id="last-seat-fails-next-round-starts",
    ),
    pytest.param(
        ["pm", "dev"],
        1,
        (0, 1),
        [entry("pm", 1, 0, "ok")],
        ["roundtable-observer"],
        "DEV failed on Round 1.",
        None,
        id="last-turn-fails-observer-next",
    ),
    pytest.param(
        ["pm", "dev"],
        3,
        (1, 1),
        [entry("pm", 1, 0, "a"), entry("dev", 1, 1, "b"), entry("pm", 2, 0, "", error=True)],
        ["roundtable-observer"],
        "DEV failed on Round 2.",
        EndReason.ALL_FAILED,
        id="every-agent-of-round-2-fails-debate-ends-observer-runs",
    ),
    pytest.param(
        ["pm", "dev"],
        3,
        (1, 1),
        [
            entry("pm", 1, 0, "", error=True),
            entry("dev", 1, 1, "", error=True),
            entry("pm", 2, 0, "fine"),
        ],
        ["pm"],
        "DEV failed on Round 2. Skipping to PM.",
        None,
        id="failures-spread-over-rounds-do-not-end-it",
    ),
]


@pytest.mark.parametrize(
    ("agents", "rounds", "pending", "history", "next_agents", "toast", "end"), FAILURE_CASES
)
def test_provider_error_is_recorded_toasted_and_skipped(
    agents: list[str],
    rounds: int,
    pending: tuple[int, int],
    history: list[HistoryEntry],
    next_agents: list[str],
    toast: str,
    end: EndReason | None,
) -> None:
    state = state_with(agents, rounds=rounds, pending=pending, history=history)
    agent = agents[pending[1]]
    obs = S2Sim().prompt(agent, *pending).answer("", error="APIError", agent=agent).observe()
    d = machine.decide(state, obs)
    assert prompted(d.commands) == next_agents
    assert toasts(d.commands) == [toast]
    last = d.state.history[-1]
    assert last.agent == agent and last.has_error and "APIError" in (last.error or "")
    assert d.state.errors[-1].startswith(f"{agent} (round {pending[0] + 1})")
    assert d.state.end_reason == end
    # The intent is persisted before the prompt (invariant 4).
    assert all(c.persist_first for c in d.commands if isinstance(c, Prompt))


@pytest.mark.parametrize(
    ("status", "answers"),
    [
        pytest.param("retry", [], id="server-retrying-no-message-yet"),
        pytest.param("busy", [("", None, False)], id="retry-reuses-an-open-message"),
        pytest.param("idle", [("", None, False)], id="stale-idle-before-the-message-completes"),
    ],
)
def test_a_turn_still_being_retried_is_not_a_failure(
    status: str, answers: list[tuple[str, str | None, bool]]
) -> None:
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0))
    sim = S2Sim().prompt("pm", 0, 0)
    for text, error, completed in answers:
        sim.answer(text, error=error, completed=completed, finish=None)
    d = machine.decide(state, sim.observe(status=status))
    assert d.commands == []
    assert d.state.history == [] and d.state.errors == []
    if status == "idle" and answers:
        # Idle with an open reply: re-check after the stale-reply grace, not the turn timeout.
        assert d.wake_at == T0 + 1 + machine.STALE_REPLY_GRACE_MS
    else:
        assert d.wake_at == T0 + 300_000  # waits for the turn timeout


def test_an_open_reply_in_an_idle_session_is_settled_after_the_grace() -> None:
    """The server was killed and restarted mid-turn: S2 is idle, the reply never completes.
    The turn is settled as failed after STALE_REPLY_GRACE_MS, not after the turn timeout."""
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0))
    sim = S2Sim().prompt("pm", 0, 0)
    sim.answer("partial words", error=None, completed=False, finish=None)
    obs = sim.observe(status="idle")
    obs = Observation(
        now=T0 + 1 + machine.STALE_REPLY_GRACE_MS,
        status="idle",
        messages=obs.messages,
        pending_found=True,
        accepted=True,
        new_id="msg_next0000000000000000000",
    )
    d = machine.decide(state, obs)
    entry = d.state.history[0]
    assert entry.has_error and "never completed" in (entry.error or "")
    assert entry.response == "partial words"
    assert [c.agent for c in d.commands if isinstance(c, Prompt)] == ["dev"]


def test_session_error_without_a_reply_skips_after_the_grace_period() -> None:
    """``session.error`` with nothing stored (e.g. unknown agent): skip after ERROR_GRACE_MS."""
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0))
    state = state.model_copy(
        update={"pending": state.pending.model_copy(update={"error_seen_at": T0 + 100})}  # type: ignore[union-attr]
    )
    sim = S2Sim().prompt("pm", 0, 0)
    early = machine.decide(state, sim.observe(now=T0 + 100 + ERROR_GRACE_MS - 1))
    assert early.commands == [] and early.wake_at == T0 + 100 + ERROR_GRACE_MS
    late = machine.decide(state, sim.observe(now=T0 + 100 + ERROR_GRACE_MS))
    assert prompted(late.commands) == ["dev"]
    assert late.state.history[-1].has_error
    assert "stored no reply" in (late.state.history[-1].error or "")


# ------------------------------------------------------------------------------------------------
# Timeout (docs/behaviour.md, 'Turn timeout')
# ------------------------------------------------------------------------------------------------

TIMEOUT_CASES = [
    pytest.param(5, T0 + 4_999, "busy", [], id="before-the-timeout-nothing"),
    pytest.param(5, T0 + 5_000, "busy", ["Abort", "PersistState"], id="at-the-timeout-abort"),
    pytest.param(300, T0 + 299_999, "busy", [], id="default-300-s-not-yet"),
    pytest.param(300, T0 + 300_000, "busy", ["Abort", "PersistState"], id="default-300-s"),
]


@pytest.mark.parametrize(("timeout", "now", "status", "expected"), TIMEOUT_CASES)
def test_turn_timeout_aborts_at_the_configured_time(
    timeout: float, now: int, status: str, expected: list[str]
) -> None:
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0), timeout=timeout)
    sim = S2Sim().prompt("pm", 0, 0).answer("partial", completed=False, finish=None)
    d = machine.decide(state, sim.observe(now=now, status=status))
    assert kinds(d.commands) == expected
    if expected:
        assert d.state.pending is not None and d.state.pending.abort_requested_at == now


def test_aborted_turn_is_recorded_cut_off_with_its_partial_text_once() -> None:
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0), timeout=5)
    sim = S2Sim().prompt("pm", 0, 0).answer("partial", completed=False, finish=None)
    d = machine.decide(state, sim.observe(now=T0 + 5_000, status="busy"))
    aborted_state = d.state
    # The server stores the aborted reply: completed, MessageAbortedError, partial text.
    sim = S2Sim().prompt("pm", 0, 0).answer("partial", error="MessageAbortedError")
    d = machine.decide(aborted_state, sim.observe(now=T0 + 5_100))
    assert prompted(d.commands) == ["dev"]
    cut = d.state.history[-1]
    assert cut.cut_off and cut.has_error and cut.response == "partial"
    assert cut.error == "timed out after 5 s"
    assert toasts(d.commands) == ["PM failed on Round 1. Skipping to DEV."]
    # The second idle of the abort (same observation again) advances nothing.
    d2 = machine.decide(d.state, sim.observe(now=T0 + 5_200))
    assert prompted(d2.commands) == []
    assert len(d2.state.history) == 1


def test_abort_without_a_stored_reply_skips_after_the_grace_period() -> None:
    """Abort during a server retry wait stores nothing: skip once idle for ABORT_GRACE_MS."""
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0), timeout=5)
    state = state.model_copy(
        update={"pending": state.pending.model_copy(update={"abort_requested_at": T0 + 5_000})}  # type: ignore[union-attr]
    )
    sim = S2Sim().prompt("pm", 0, 0)
    wait = machine.decide(state, sim.observe(now=T0 + 5_000 + ABORT_GRACE_MS - 1))
    assert wait.commands == []
    done = machine.decide(state, sim.observe(now=T0 + 5_000 + ABORT_GRACE_MS))
    assert prompted(done.commands) == ["dev"] and done.state.history[-1].cut_off


# ------------------------------------------------------------------------------------------------
# Loop detection (docs/behaviour.md, 'Loops')
# ------------------------------------------------------------------------------------------------

LOOP_CASES = [
    pytest.param(0.85, (1, 1), LOOP, "**" + LOOP + "**", True, id="same-text-other-formatting"),
    pytest.param(
        0.85, (1, 1), LOOP, "Totally different words, 42 of them.", False, id="different-text"
    ),
    pytest.param(0.85, (0, 1), LOOP, LOOP, False, id="round-1-has-no-previous-round"),
    pytest.param(1.0, (1, 1), LOOP, LOOP, False, id="threshold-1-never-loops"),
    pytest.param(
        0.2,
        (1, 1),
        LOOP,
        "the modular monolith keeps deployment simple",
        True,
        id="low-threshold-configured",
    ),
    pytest.param(
        0.85, (1, 0), LOOP, LOOP, True, id="first-seat-repeats-last-response-of-previous-round"
    ),
]


@pytest.mark.parametrize(("threshold", "pending", "previous", "latest", "loops"), LOOP_CASES)
def test_loop_detection_against_the_last_response_of_the_previous_round(
    threshold: float, pending: tuple[int, int], previous: str, latest: str, loops: bool
) -> None:
    agents = ["pm", "dev"]
    rnd, seat = pending
    history = [entry("pm", 1, 0, "pm opening words"), entry("dev", 1, 1, previous)]
    if rnd == 0:
        history = [entry("pm", 1, 0, previous)]
    elif seat == 1:
        history.append(entry("pm", 2, 0, "pm says something new in round two"))
    state = state_with(agents, rounds=4, pending=pending, history=history, threshold=threshold)
    sim = S2Sim().prompt(agents[seat], rnd, seat).answer(latest, agent=agents[seat])
    d = machine.decide(state, sim.observe())
    if loops:
        assert d.state.end_reason == EndReason.REPETITION
        assert d.state.phase == Phase.OBSERVING
        assert prompted(d.commands) == ["roundtable-observer"]
        obs_prompt = next(c for c in d.commands if isinstance(c, Prompt)).text
        assert "repetition detected" in obs_prompt
    else:
        assert d.state.end_reason is None
        assert prompted(d.commands) == [agents[(seat + 1) % 2]]


def test_repetition_result_states_the_spec_reason() -> None:
    state = state_with(
        ["pm", "dev"], rounds=3, pending=(1, 0), observing=True, end_reason=EndReason.REPETITION
    )
    sim = S2Sim().prompt("roundtable-observer", 1, -1).answer("SUMMARY", agent="obs")
    d = machine.decide(state, sim.observe())
    assert d.state.phase == Phase.DONE and d.state.summary == "SUMMARY"
    assert d.state.end_reason == EndReason.REPETITION
    assert REPETITION_TEXT in delivery_text(d.state)


# ------------------------------------------------------------------------------------------------
# Cancel, deletions (docs/behaviour.md, 'S2 deleted', 'S1 deleted')
# ------------------------------------------------------------------------------------------------

END_CASES = [
    pytest.param(
        {"deleted": True},
        ["Abort", "Finalize"],
        Phase.ABORTED,
        EndReason.SESSION_DELETED,
        "interruption",
        id="s2-deleted-abort-first-then-interruption-to-s1",
    ),
    pytest.param(
        {"deleted": True, "parent_deleted": True},
        ["Abort", "Finalize"],
        Phase.ABORTED,
        EndReason.PARENT_DELETED,
        "none",
        id="s1-deleted-abort-first-nothing-delivered",
    ),
    pytest.param(
        {"parent_deleted": True},
        ["Abort", "PersistState", "Finalize"],
        Phase.ABORTED,
        EndReason.PARENT_DELETED,
        "none",
        id="s1-deleted-s2-still-there",
    ),
    pytest.param(
        {"cancel": Cancel(summarize=False)},
        ["Abort", "PersistState"],
        Phase.ACTIVE,
        EndReason.CANCELLED,
        None,
        id="cancel-aborts-the-turn-in-flight",
    ),
]


@pytest.mark.parametrize(("obs_kw", "expected", "phase", "reason", "deliver"), END_CASES)
def test_deletion_and_cancel(
    obs_kw: dict[str, Any],
    expected: list[str],
    phase: Phase,
    reason: EndReason,
    deliver: str | None,
) -> None:
    state = state_with(["pm", "dev"], rounds=2, pending=(0, 1), history=[entry("pm", 1, 0, "a")])
    sim = S2Sim().prompt("dev", 0, 1).answer("", completed=False, finish=None)
    d = machine.decide(state, sim.observe(status="busy", **obs_kw))
    assert kinds(d.commands) == expected
    assert d.state.phase == phase and d.state.end_reason == reason
    assert prompted(d.commands) == []
    if deliver is not None:
        assert any(isinstance(c, Finalize) for c in d.commands)
        assert lifecycle.deliver_kind(d.state) == deliver
        # Phase 4 writes nothing into S2 once S1 or S2 is gone (the final state above is
        # written while S2 still exists).
        assert not lifecycle.writes_s2(d.state)
        assert d.state.history == state.history  # the partial history is kept for S1


def test_cancelled_turn_ends_the_debate_without_the_observer() -> None:
    state = state_with(["pm", "dev"], rounds=2, pending=(0, 1), history=[entry("pm", 1, 0, "a")])
    sim = S2Sim().prompt("dev", 0, 1).answer("", completed=False, finish=None)
    d = machine.decide(state, sim.observe(status="busy", cancel=Cancel(summarize=False)))
    sim = S2Sim().prompt("dev", 0, 1).answer("half", error="MessageAbortedError")
    d = machine.decide(d.state, sim.observe(now=T0 + 2000))
    assert prompted(d.commands) == []
    assert any(isinstance(c, Finalize) for c in d.commands)
    assert d.state.phase == Phase.DONE and d.state.end_reason == EndReason.CANCELLED
    assert (d.state.summary or "").startswith(CANCELLED_HEADER)


def test_cancel_before_any_reply_settles_within_a_second_as_cut_off_by_the_cancel() -> None:
    """Regression "cancel right after start": the abort came before the server created pm's
    reply, so S2 is idle with no reply; the turn is settled after ``CANCEL_SETTLE_MS``, not the
    5 s abort grace, and never labelled a timeout."""
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0))
    sim = S2Sim().prompt("pm", 0, 0)
    d = machine.decide(state, sim.observe(now=T0 + 10, cancel=Cancel(summarize=False)))
    assert d.state.pending is not None and d.state.pending.abort_requested_at == T0 + 10
    assert d.wake_at == T0 + 10 + machine.CANCEL_SETTLE_MS
    d = machine.decide(d.state, sim.observe(now=T0 + 10 + machine.CANCEL_SETTLE_MS))
    assert d.state.phase == Phase.DONE and d.state.end_reason == EndReason.CANCELLED
    (pm,) = d.state.history
    assert pm.cut_off and pm.error == "cut off by the cancel", pm
    assert prompted(d.commands) == []


def test_stored_cancel_without_its_abort_time_records_the_turn_as_cut_off_by_it() -> None:
    """After a crash between ``Engine.cancel``'s write and the worker's decision: the stored
    state is cancelled, the turn's reply was aborted; no further seat is prompted."""
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0), end_reason=EndReason.CANCELLED)
    sim = S2Sim().prompt("pm", 0, 0).answer("half", error="MessageAbortedError")
    d = machine.decide(state, sim.observe())
    assert d.state.phase == Phase.DONE and d.state.end_reason == EndReason.CANCELLED
    (pm,) = d.state.history
    assert pm.cut_off and pm.error == "cut off by the cancel", pm
    assert prompted(d.commands) == []


def test_finished_roundtable_ignores_everything() -> None:
    """docs/behaviour.md, 'After the conclusion': after the conclusion nothing changes whatever S2
    holds."""
    state = state_with(["pm", "dev"], rounds=1, pending=None).model_copy(
        update={"phase": Phase.DONE, "summary": "S"}
    )
    sim = S2Sim().prompt("pm", 0, 0).user("hello after the end").answer("late", parent="x")
    for kw in ({}, {"deleted": True}, {"cancel": Cancel()}):
        d = machine.decide(state, sim.observe(**kw))
        assert d.commands == [] and d.state == state


# ------------------------------------------------------------------------------------------------
# A person writes in S2 (docs/behaviour.md, 'A person writes in S2')
# ------------------------------------------------------------------------------------------------


def test_interjection_becomes_history_and_the_next_seat_waits_for_idle() -> None:
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0))
    sim = (
        S2Sim()
        .prompt("pm", 0, 0)
        .answer("PM reply", agent="pm")
        .user("I, the user, say: consider costs")
        .answer("", agent="build", completed=False, finish=None, parent="msg_user00000000000001")
    )
    # S2 is busy answering the person: never prompt while busy.
    busy = machine.decide(state, sim.observe(status="busy"))
    assert prompted(busy.commands) == []
    # A stale idle while the interjection reply is still open: still nothing.
    stale = machine.decide(state, sim.observe(status="idle"))
    assert prompted(stale.commands) == []
    sim = (
        S2Sim()
        .prompt("pm", 0, 0)
        .answer("PM reply", agent="pm")
        .user("I, the user, say: consider costs")
        .answer("BUILD answers the user", agent="build", parent="msg_user00000000000001")
    )
    d = machine.decide(state, sim.observe(status="idle"))
    assert prompted(d.commands) == ["dev"]
    hist = [(e.kind, e.agent, e.response) for e in d.state.history]
    assert hist == [
        ("turn", "pm", "PM reply"),
        ("user", "user", "I, the user, say: consider costs"),
        ("interjection", "build", "BUILD answers the user"),
    ]
    dev_prompt = next(c for c in d.commands if isinstance(c, Prompt)).text
    assert "the user (a person at the table) wrote" in dev_prompt
    # Observed again (duplicate idle): no second prompt, no duplicated entries.
    again = machine.decide(d.state, sim.observe(status="idle"))
    assert prompted(again.commands) == [] and len(again.state.history) == 3


def test_commands_of_a_finished_turn_persist_before_prompting() -> None:
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0))
    d = machine.decide(state, S2Sim().prompt("pm", 0, 0).answer("ok").observe())
    idx = [i for i, c in enumerate(d.commands) if isinstance(c, PersistState | Prompt | Abort)]
    assert [type(d.commands[i]).__name__ for i in idx] == ["Prompt"]
    prompt = d.commands[idx[0]]
    assert isinstance(prompt, Prompt) and prompt.persist_first and not prompt.index
    # From the event mirror (a fast handoff) the same turn is prompted first, written after.
    obs = replace(S2Sim().prompt("pm", 0, 0).answer("ok").observe(), from_events=True)
    fast = machine.decide(state, obs)
    assert [c.persist_first for c in fast.commands if isinstance(c, Prompt)] == [False]


def test_a_fresh_roundtable_opens_with_the_intent_then_turn_1_without_a_read() -> None:
    """``Engine.start`` writes the state block with this decision's intent and sends its prompt
    without reading S2 (it created S2 a moment ago: idle and empty)."""
    state = state_with(["pm", "dev"], rounds=2, pending=None)
    d = machine.decide(state, Observation(now=T0, status="idle", new_id="msg_first0000000001"))
    assert [type(c).__name__ for c in d.commands] == ["Prompt"]
    prompt = d.commands[0]
    assert isinstance(prompt, Prompt) and prompt.send and not prompt.hide
    assert prompt.persist_first
    assert (prompt.agent, prompt.marker.round, prompt.marker.seat) == ("pm", 0, 0)
    assert d.state.pending is not None and d.state.pending.message_id == prompt.message_id


# ------------------------------------------------------------------------------------------------
# A stale stored state after a fast handoff (machine invariant 4, last clause)
# ------------------------------------------------------------------------------------------------


def test_stale_stored_turn_is_recorded_and_the_running_next_turn_adopted_not_aborted() -> None:
    """The stored state names pm's turn (prompted long ago, beyond the turn timeout), but S2
    already holds dev's prompt (sent by a fast handoff whose state write was lost) and is busy
    running it: pm's turn is recorded, dev's prompt adopted — no abort, no second prompt."""
    state = state_with(["pm", "dev"], rounds=1, pending=(0, 0), timeout=60)
    sim = S2Sim().prompt("pm", 0, 0).answer("pm's view")
    sim.prompt("dev", 0, 1, mid="msg_sentbeforecrash01", created=T0 + 5)
    sim.answer("dev half", parent="msg_sentbeforecrash01", completed=False, finish=None)
    now = T0 + 61_000 * 10
    d = machine.decide(state, sim.observe(now=now, status="busy"))
    assert not any(isinstance(c, Abort) for c in d.commands)
    sent = [c for c in d.commands if isinstance(c, Prompt)]
    assert [(c.agent, c.send, c.message_id, c.persist_first) for c in sent] == [
        ("dev", False, "msg_sentbeforecrash01", True)
    ]
    assert d.state.pending is not None
    assert d.state.pending.message_id == "msg_sentbeforecrash01"
    assert d.state.pending.prompted_at == T0 + 5
    assert [e.response for e in d.state.history] == ["pm's view"]
