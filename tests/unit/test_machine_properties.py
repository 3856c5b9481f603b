"""Property tests of the pure state machine.

A small simulated S2 plays the server: prompts become user messages (signed markers), the model
answers some steps later, and the schedule is chosen by hypothesis: observations may be stale
(status idle before the reply exists — "premature idle"), repeated (duplicated events), skipped
(dropped events), POSTs may fail, handoffs may be fast (the prompt first, the state write after it
or never — :mod:`roundtabled.engine.mirror`), and the daemon may crash and restart from the last
*persisted* state, however stale. Whatever the schedule:

- at most one prompt is in flight;
- the (round, seat) position never goes backwards;
- every seat speaks exactly once per round and the observer exactly once;
- the debate finishes and nothing is prompted after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roundtabled import ids
from roundtabled.core import history, machine, messages
from roundtabled.core.commands import Abort, Finalize, Observation, PersistState, Prompt
from roundtabled.core.state import Options, Phase, RoundtableState, Signer
from roundtabled.opencode import v1_wire
from tests.states import fresh, raw_prompt, raw_reply

SIGNER = Signer(b"k" * 32)
S2 = "ses_test0000000001"


@dataclass
class SimServer:
    """S2 as the server would hold it."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    busy_with: str | None = None  # user message id being answered
    replies: int = 0
    clock: int = 1_000_000
    accepted: set[str] = field(default_factory=set)  # prompts the daemon saw accepted (memory)

    def add_prompt(self, p: Prompt) -> None:
        self.messages.append(
            raw_prompt(p.message_id, p.text, p.marker, S2, SIGNER, created=self.clock)
        )
        self.busy_with = p.message_id
        self.accepted.add(p.message_id)

    def answer(self, *, error: bool = False) -> None:
        assert self.busy_with is not None
        self.replies += 1
        text = f"reply number {self.replies} " + "word" * self.replies
        failed = ("APIError", "boom") if error else None
        self.messages.append(raw_reply(self.busy_with, text, at=self.clock, error=failed))
        self.busy_with = None

    def abort(self) -> None:
        if self.busy_with is not None:
            aborted = ("MessageAbortedError", "Aborted")
            self.messages.append(
                raw_reply(self.busy_with, "partial", at=self.clock, error=aborted, step_start=False)
            )
            self.busy_with = None

    def from_id(self, mid: str) -> tuple[list[dict[str, Any]], bool]:
        for i, m in enumerate(self.messages):
            if m["info"]["id"] == mid:
                return self.messages[i:], True
        return [], False


def new_state(agents: list[str], rounds: int) -> RoundtableState:
    return fresh(S2, agents, rounds, options=Options(turn_timeout=300, loop_threshold=0.99))


def observe(srv: SimServer, state: RoundtableState, *, stale_idle: bool) -> Observation:
    pend = state.pending
    raw, found = srv.from_id(pend.message_id) if pend else ([], False)
    views = tuple(v1_wire.message_view(m, S2, SIGNER) for m in raw)
    status = "idle" if (srv.busy_with is None or stale_idle) else "busy"
    return Observation(
        now=srv.clock,
        status=status,  # type: ignore[arg-type]
        messages=views,
        pending_found=found,
        new_id=ids.message_id(),
        accepted=bool(pend and pend.message_id in srv.accepted),
    )


actions = st.lists(
    st.sampled_from(
        [
            "observe",
            "observe",
            "stale",
            "answer",
            "answer",
            "fail_reply",
            "drop_post",
            "crash",
            "dup",
            "fast",
            "fast",
            "fast_lazy",
            "fast_lazy",
        ]
    ),
    min_size=20,
    max_size=400,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_agents=st.integers(min_value=2, max_value=4),
    rounds=st.integers(min_value=1, max_value=3),
    schedule=actions,
)
def test_exactly_once_turns_under_any_schedule(
    n_agents: int, rounds: int, schedule: list[str]
) -> None:
    agents = [f"a{i}" for i in range(n_agents)]
    srv = SimServer()
    state = new_state(agents, rounds)
    persisted = state
    position = (-1, -1)
    drop_next_post = False
    prompted: list[str] = []
    finished = False

    def run(obs: Observation, *, fast: bool = False, lazy: bool = False) -> None:
        nonlocal state, persisted, position, drop_next_post, finished
        d = machine.decide(state, replace(obs, from_events=fast))
        state = d.state
        for cmd in d.commands:
            if isinstance(cmd, PersistState):
                persisted = state
            elif isinstance(cmd, Prompt) and not cmd.send:
                assert cmd.persist_first
                assert any(m["info"]["id"] == cmd.message_id for m in srv.messages)
                persisted = state
            elif isinstance(cmd, Prompt):
                assert cmd.persist_first or fast
                if cmd.persist_first:
                    persisted = state
                elif not lazy:
                    # The engine's fast handoff: the prompt goes out first; the state write after
                    # it (or, deferred, not before the next handoff: "lazy", never here).
                    persisted = state
                assert not finished, "prompted after the end"
                assert srv.busy_with is None, "prompt while a turn is in flight"
                if any(m["info"]["id"] == cmd.message_id for m in srv.messages):
                    raise AssertionError("prompt re-sent although its message exists")
                pos = (cmd.marker.round, cmd.marker.seat if cmd.marker.kind == "turn" else 99)
                assert pos >= position, f"position went backwards: {pos} < {position}"
                position = pos
                if drop_next_post:
                    drop_next_post = False
                    continue
                srv.add_prompt(cmd)
                prompted.append(cmd.message_id)
            elif isinstance(cmd, Abort):
                srv.abort()
            elif isinstance(cmd, Finalize):
                finished = True

    for action in [*schedule, *(["answer", "observe"] * (n_agents * rounds + 4) * 3)]:
        srv.clock += 1000
        if finished:
            break
        if action in ("fast", "fast_lazy"):
            # A fast handoff decides only from a complete picture of a pending turn (the engine's
            # mirror opens with a prompt): the turn answered, S2 idle.
            if srv.busy_with is None and state.pending is not None:
                run(observe(srv, state, stale_idle=False), fast=True, lazy=action == "fast_lazy")
        elif action in ("observe", "dup"):
            run(observe(srv, state, stale_idle=False))
            if action == "dup":
                run(observe(srv, state, stale_idle=False))
        elif action == "stale":
            run(observe(srv, state, stale_idle=True))
        elif action == "answer":
            if srv.busy_with is not None:
                srv.answer()
        elif action == "fail_reply":
            if srv.busy_with is not None:
                srv.answer(error=True)
        elif action == "drop_post":
            drop_next_post = True
        elif action == "crash":
            # Restart: only what was persisted survives; history is rebuilt from S2.
            views = [v1_wire.message_view(m, S2, SIGNER) for m in srv.messages]
            state = persisted.model_copy(
                update={"history": history.rebuild_history(persisted, views)}
            )
            srv.accepted.clear()  # the new process has accepted nothing yet
        # Time passes so re-prompts after a dropped POST become due.
        srv.clock += machine.REPROMPT_GRACE_MS

    assert finished, f"debate did not finish: phase={state.phase} pending={state.pending}"
    assert state.phase == Phase.DONE
    # Exactly one prompt per (round, seat) for the rounds that ran.
    views = [v1_wire.message_view(m, S2, SIGNER) for m in srv.messages]
    markers = [v.marker for v in views if isinstance(v, messages.UserView) and v.marker]
    turns = [(m.round, m.seat) for m in markers if m.kind == "turn"]
    assert len(turns) == len(set(turns)), f"a seat spoke twice in a round: {turns}"
    # One observer prompt, none when no seat gave an answer (nothing to consolidate:
    # docs/result.md).
    spoke = any(e.kind == "turn" and not e.has_error and e.response for e in state.history)
    assert sum(1 for m in markers if m.kind == "observer") == (1 if spoke else 0)
    last_round = max(r for r, _ in turns)
    # Every round before the last one that ran is complete, in seat order.
    for r in range(last_round):
        assert [s for rr, s in turns if rr == r] == list(range(n_agents))
    if state.end_reason and state.end_reason.value == "completed":
        assert sorted(turns) == [(r, s) for r in range(rounds) for s in range(n_agents)]
    # The history holds each seat turn once.
    seat_entries = [(e.round, e.seat) for e in state.history if e.kind == "turn"]
    assert len(seat_entries) == len(set(seat_entries))
    assert len(seat_entries) == len(turns)


def test_premature_idle_is_not_completion() -> None:
    srv = SimServer()
    state = new_state(["pm", "dev"], 1)
    d = machine.decide(state, observe(srv, state, stale_idle=False))
    prompt = next(c for c in d.commands if isinstance(c, Prompt))
    srv.add_prompt(prompt)
    state = d.state
    # A stale idle arrives: the reply is not there yet.
    d = machine.decide(state, observe(srv, state, stale_idle=True))
    assert not any(isinstance(c, Prompt) for c in d.commands)
    assert d.state.pending is not None and d.state.pending.agent == "pm"


def test_timeout_aborts_then_records_cut_off_once() -> None:
    srv = SimServer()
    state = new_state(["pm", "dev"], 1).model_copy(update={"options": Options(turn_timeout=2)})
    d = machine.decide(state, observe(srv, state, stale_idle=False))
    srv.add_prompt(next(c for c in d.commands if isinstance(c, Prompt)))
    state = d.state
    srv.clock += 3000
    d = machine.decide(state, observe(srv, state, stale_idle=False))
    assert any(isinstance(c, Abort) for c in d.commands)
    state = d.state
    srv.abort()
    obs = observe(srv, state, stale_idle=False)
    d = machine.decide(state, obs)
    prompts_sent = [c for c in d.commands if isinstance(c, Prompt)]
    assert [p.agent for p in prompts_sent] == ["dev"]
    entry = d.state.history[0]
    assert entry.cut_off and entry.has_error and entry.response == "partial"
    # The duplicate idle of the abort changes nothing.
    state = d.state
    srv.add_prompt(prompts_sent[0])
    d2 = machine.decide(state, observe(srv, state, stale_idle=False))
    assert not any(isinstance(c, Prompt) for c in d2.commands)


def test_done_state_prompts_nothing() -> None:
    state = new_state(["pm", "dev"], 1).model_copy(update={"phase": Phase.DONE})
    d = machine.decide(state, Observation(now=1, status="idle", new_id="msg_x"))
    assert d.commands == []
