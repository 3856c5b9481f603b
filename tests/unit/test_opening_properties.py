"""Property tests of the independent opening round (:mod:`roundtabled.core.opening`).

A small simulated server holds the roundtable's session and its children; hypothesis chooses the
schedule: seats answer, fail or report an error in any order, POSTs are lost, the roundtable's
session is busy with someone else's message, time jumps past the turn timeout, and the daemon
crashes after any command of a decision (it restarts from the last *persisted* round and forgets
which prompts the server accepted). Whatever the schedule:

- each seat's session is created once, its prompt is sent once and its record written once;
- nothing is recorded before every seat is settled, nor into a busy session;
- no seat's prompt carries another seat's text (each sees the topic only);
- the round ends done, with one round-1 entry per seat in seat order.

The same holds for a protocol's second independent round (council's rankings: round 2, its own
entry kind, markers and headers), run on the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roundtabled import ids
from roundtabled.core import opening
from roundtabled.core.commands import (
    AbortSeat,
    CreateSeatSession,
    PersistRound,
    PromptSeat,
    RecordOpening,
    SeatSettled,
)
from roundtabled.core.opening import OpeningObservation, SeatView, Setup
from roundtabled.core.state import Marker, OpeningRound, Signer
from roundtabled.opencode import v1_wire
from tests.states import raw_prompt, raw_reply

SIGNER = Signer(b"k" * 32)
S2 = "ses_roundtable00001"
TIMEOUT_S = 60.0


@dataclass
class Child:
    seat: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    busy_with: str | None = None
    error: tuple[int, str] | None = None


@dataclass
class Sim:
    clock: int = 1_000_000
    s2: list[dict[str, Any]] = field(default_factory=list)
    s2_busy: bool = False
    children: dict[str, Child] = field(default_factory=dict)
    created: dict[int, int] = field(default_factory=dict)
    prompts: dict[int, int] = field(default_factory=dict)
    accepted: set[str] = field(default_factory=set)  # the daemon's memory: lost on a crash

    def answer(self, sid: str, *, error: bool = False, aborted: bool = False) -> None:
        child = self.children[sid]
        assert child.busy_with is not None
        failed = None
        if aborted:
            failed = ("MessageAbortedError", "Aborted")
        elif error:
            failed = ("APIError", "boom")
        text = f"opening of seat {child.seat}"
        child.messages.append(
            raw_reply(child.busy_with, text, at=self.clock, error=failed, step_start=False)
        )
        child.busy_with = None

    def from_id(self, sid: str, mid: str) -> tuple[list[dict[str, Any]], bool]:
        msgs = self.children[sid].messages
        for i, m in enumerate(msgs):
            if m["info"]["id"] == mid:
                return msgs[i:], True
        return [], False


def user_message(message_id: str, text: str, marker: Marker, session: str) -> dict[str, Any]:
    """A seat's prompt as the server stores it, its ``marker`` signed with :data:`SIGNER` for
    ``session`` (:func:`tests.states.raw_prompt`)."""
    return raw_prompt(message_id, text, marker, session, SIGNER)


def setup(n: int, second: bool = False) -> Setup:
    """The opening's setup, or (``second``) a protocol's second independent round (council's
    rankings: round 2, its own entry kind and headers) on the same rules."""
    if second:
        return Setup(
            roundtable=S2,
            prompts=tuple(f"Rank the answers. You are a{i}." for i in range(n)),
            topic_text="The rankings",
            turn_timeout_s=TIMEOUT_S,
            round=2,
            kind="ranking",
            name="ranking",
        )
    return Setup(
        roundtable=S2,
        prompts=tuple(f"[Topic] the topic. You are a{i}." for i in range(n)),
        topic_text="Opening round: the topic",
        turn_timeout_s=TIMEOUT_S,
    )


def observe(sim: Sim, rnd: OpeningRound, *, cancelled: bool = False) -> OpeningObservation:
    views: dict[str, SeatView] = {}
    for s in rnd.seats:
        if s.session_id is None:
            continue
        raw, found = sim.from_id(s.session_id, s.message_id)
        child = sim.children[s.session_id]
        views[s.session_id] = SeatView(
            status="busy" if child.busy_with else "idle",
            messages=tuple(v1_wire.message_view(m, s.session_id, SIGNER) for m in raw),
            found=found,
            accepted=s.message_id in sim.accepted,
            error=child.error,
        )
    return OpeningObservation(
        now=sim.clock,
        status="busy" if sim.s2_busy else "idle",
        messages=tuple(v1_wire.message_view(m, S2, SIGNER) for m in sim.s2),
        children=tuple((sid, c.seat) for sid, c in sim.children.items()),
        seats=views,
        cancelled=cancelled,
    )


ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                *("observe", "observe", "answer", "answer", "fail", "error"),
                *("crash", "drop", "busy", "tick", "dup"),
            ]
        ),
        st.integers(min_value=0, max_value=5),
    ),
    min_size=5,
    max_size=120,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(min_value=1, max_value=4),
    schedule=ACTIONS,
    cancel_at=st.integers(-1, 150),
    second=st.booleans(),
)
def test_each_seat_created_prompted_recorded_once(
    n: int, schedule: list[tuple[str, int]], cancel_at: int, second: bool
) -> None:
    sim = Sim()
    conf = setup(n, second)
    ids_ = [ids.message_id() for _ in range(2 * n + 1)]
    rnd = opening.start([f"a{i}" for i in range(n)], ids_, sim.clock)
    round_no = 2 if second else 1
    if second:
        rnd = rnd.model_copy(update={"round": 2})
    persisted = rnd
    drop_next = False
    records: dict[int, int] = {}

    def run(crash_after: int | None = None, *, cancelled: bool = False) -> None:
        nonlocal rnd, persisted, drop_next
        d = opening.step(rnd, observe(sim, rnd, cancelled=cancelled), conf)
        rnd = d.round
        for i, cmd in enumerate(d.commands):
            if crash_after is not None and i >= crash_after:
                rnd = persisted
                sim.accepted.clear()
                return
            if isinstance(cmd, CreateSeatSession):
                sim.created[cmd.seat] = sim.created.get(cmd.seat, 0) + 1
                sim.children[ids.message_id()] = Child(cmd.seat)
            elif isinstance(cmd, PromptSeat):
                assert persisted.seats[cmd.seat].prompted_at is not None, "prompt before intent"
                assert all(f"seat {j}" not in cmd.text for j in range(n) if j != cmd.seat), (
                    "a seat saw another's text"
                )
                if drop_next:
                    drop_next = False
                    continue
                child = sim.children[cmd.session_id]
                assert all(m["info"]["id"] != cmd.message_id for m in child.messages), "resent"
                sim.prompts[cmd.seat] = sim.prompts.get(cmd.seat, 0) + 1
                child.messages.append(
                    user_message(cmd.message_id, cmd.text, cmd.marker, cmd.session_id)
                )
                child.busy_with = cmd.message_id
                sim.accepted.add(cmd.message_id)
            elif isinstance(cmd, AbortSeat):
                if sim.children[cmd.session_id].busy_with is not None:
                    sim.answer(cmd.session_id, aborted=True)
            elif isinstance(cmd, RecordOpening):
                assert d.round.settled, "recorded before every seat settled"
                assert not sim.s2_busy, "recorded into a busy session"
                if any(m["info"]["id"] == cmd.message_id for m in sim.s2):
                    continue  # the shell posts it only once (post_once)
                seat = cmd.marker.seat
                assert cmd.marker.round == round_no - 1
                records[seat] = records.get(seat, 0) + 1
                sim.s2.append(user_message(cmd.message_id, cmd.text, cmd.marker, S2))
            elif isinstance(cmd, PersistRound):
                persisted = rnd
            else:
                assert isinstance(cmd, SeatSettled)
                assert cmd.entry.round == round_no and cmd.entry.kind == conf.kind

    busy_children = lambda: [sid for sid, c in sim.children.items() if c.busy_with]  # noqa: E731
    for k, (action, arg) in enumerate(schedule):
        sim.clock += 1_000
        cancelled = 0 <= cancel_at <= k
        if action == "observe":
            run(cancelled=cancelled)
        elif action == "dup":
            run(cancelled=cancelled)
            run(cancelled=cancelled)
        elif action == "crash":
            run(crash_after=arg, cancelled=cancelled)
        elif action == "drop":
            drop_next = True
        elif action == "busy":
            sim.s2_busy = not sim.s2_busy
        elif action == "tick":
            sim.clock += int(TIMEOUT_S * 1000) // 2
        elif (busy := busy_children()) and action in ("answer", "fail"):
            sim.answer(busy[arg % len(busy)], error=action == "fail")
        elif busy and action == "error":
            child = sim.children[busy[arg % len(busy)]]
            child.busy_with = None  # the server failed the turn before storing any reply
            child.error = (sim.clock, "ProviderModelNotFoundError: no such model")

    sim.s2_busy = False
    cancelled = 0 <= cancel_at <= len(schedule)
    for _ in range(60):
        if rnd.done:
            break
        sim.clock += 7_000
        run(cancelled=cancelled)
        for sid in busy_children():
            sim.answer(sid)
    assert rnd.done
    for seat in range(n):
        assert sim.created.get(seat, 0) <= 1, f"seat {seat}'s session created twice"
        assert sim.prompts.get(seat, 0) <= 1, f"seat {seat} prompted twice"
        assert records.get(seat, 0) == 1, f"seat {seat} recorded {records.get(seat, 0)} times"
        if not cancelled:
            assert sim.created.get(seat) == 1
    assert records.get(opening.TOPIC_SEAT) == 1
    entries = rnd.entries()
    assert [e.seat for e in entries] == list(range(n))
    assert all(e.round == round_no for e in entries)
    # One more decision after the end changes nothing and writes nothing.
    d = opening.step(rnd, observe(sim, rnd), conf)
    assert not [c for c in d.commands if not isinstance(c, PersistRound)]
