"""The independent opening round: every seat answers the topic at once, each in its own session.

Pure, no I/O and no clock, like :mod:`roundtabled.core.machine`, in two parts:

- the round's rules, :func:`step`: ``(OpeningRound, OpeningObservation) -> OpeningDecision``;
- the round within its roundtable, :func:`decide`: while the round runs (:func:`running`) the
  worker asks it instead of :func:`roundtabled.core.machine.decide`; it runs :func:`step` on the
  round kept in :attr:`~roundtabled.core.state.RoundtableState.openings` and, once every opening
  is recorded (:attr:`OpeningRound.done`), hands the debate back to the machine at round 2 (seat
  1), or to the observer when the debate ends there: a cancel, every seat failed, a unanimous
  opening with ``until: "converged"`` (the rule of :mod:`roundtabled.core.deliberation`), or a
  one-round debate (docs/deliberation.md, "opening: independent").

Each seat runs in a child session of the roundtable's session (created with the roundtable and
the seat in its ``metadata``) and sees only the topic; once every seat answered, failed or timed
out, the answers are recorded in the roundtable's session as visible, attributed ``noReply``
messages (never answered by a model) with signed ``opening`` markers.

Exactly once, across crashes at any point (property-tested in
``tests/unit/test_opening_properties.py``):

1. A seat's session is created once: a child of the roundtable already holding the seat is
   adopted (found by its metadata in :attr:`OpeningObservation.children`), never created again.
2. A seat is prompted once: its message id is chosen when the round starts and kept; a prompt
   found in its session is waited for, one absent is sent again with the same id (it cannot
   exist twice), and one the server accepted in this process is never sent again.
3. A seat's opening is recorded once: records carry client-chosen ids and signed markers, and a
   record found in the roundtable's session is adopted, never written again.
4. Nothing is recorded before every seat is settled, nor while the roundtable's session is busy;
   the round is done only when every record is written (round 2 never starts before).
5. The turn timeout applies to each seat on its own.

Times are epoch milliseconds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from roundtabled.core import deliberation, machine, prompts, protocols
from roundtabled.core.commands import (
    AbortSeat,
    Cancel,
    CreateSeatSession,
    Decision,
    Finalize,
    Observation,
    OpeningCommand,
    PersistRound,
    PersistState,
    Prompt,
    PromptSeat,
    RecordOpening,
    SeatSettled,
)
from roundtabled.core.history import answers_to, entry_from_answers, turn_is_final
from roundtabled.core.messages import MessageView, Status, UserView
from roundtabled.core.protocols import SecondRound
from roundtabled.core.result import cancelled_text
from roundtabled.core.sides import turn_header, turn_title
from roundtabled.core.state import (
    EndReason,
    HistoryEntry,
    Marker,
    OpeningRound,
    OpeningSeat,
    Phase,
    RoundtableState,
    SeatEntryKind,
)

# ── the round's rules ───────────────────────────────────────────────────────────────────────────

REPROMPT_GRACE_MS = 5_000
"""A seat's prompt still absent from its idle session this long after sending is sent again."""
ABORT_GRACE_MS = 5_000
"""After aborting a seat (timeout, cancel): how long to wait for its reply to be stored."""
ERROR_GRACE_MS = 1_000
"""After a ``session.error`` of a seat's session, idle with no reply: how long before it fails."""
TOPIC_SEAT = -1
"""The seat number of the record that carries the topic (it precedes the seats' records)."""


def start(agents: Sequence[str], ids: Sequence[str], now: int) -> OpeningRound:
    """A new opening round for ``agents``; ``ids``: ``2 * len(agents) + 1`` fresh message ids
    (each seat's prompt and record, then the topic record).

    Raises:
        ValueError: too few ids.
    """
    n = len(agents)
    if len(ids) < 2 * n + 1:
        raise ValueError(f"start: {2 * n + 1} message ids needed, {len(ids)} given")
    seats = [
        OpeningSeat(seat=i, agent=a, message_id=ids[2 * i], record_id=ids[2 * i + 1])
        for i, a in enumerate(agents)
    ]
    return OpeningRound(seats=seats, topic_record_id=ids[2 * n], started_at=now)


@dataclass(frozen=True, slots=True)
class SeatView:
    """What the shell read of one seat's session: its status, its messages from the seat's
    prompt on (``found``: the prompt is there), whether the server accepted the prompt in this
    process, and a ``session.error`` seen since (epoch ms, the server's text)."""

    status: Status = "unknown"
    messages: tuple[MessageView, ...] = ()
    found: bool = False
    accepted: bool = False
    error: tuple[int, str] | None = None


@dataclass(frozen=True, slots=True)
class OpeningObservation:
    """One read for a decision: ``children`` are the roundtable session's children that carry
    an opening seat in their metadata (session id, seat), oldest first; ``seats`` maps a child
    session id to its :class:`SeatView`; ``status`` and ``messages`` are the roundtable's own
    session (its messages since the round began: the records are looked for there);
    ``cancelled``: a cancel stops the round (unsettled seats are aborted and cut off)."""

    now: int
    status: Status
    messages: tuple[MessageView, ...] = ()
    children: tuple[tuple[str, int], ...] = ()
    seats: dict[str, SeatView] = field(default_factory=dict)
    cancelled: bool = False
    plugin: str | None = None
    """As :attr:`roundtabled.core.commands.Observation.plugin` (round 2's first turn's mode)."""


@dataclass(frozen=True, slots=True)
class Setup:
    """What the round needs of the roundtable: its session id, each seat's prompt text (the topic
    only: no seat sees another's), the topic record's text and the turn timeout (s).

    A protocol's second independent round (:attr:`roundtabled.core.protocols.Protocol.
    second_round`, council's rankings) runs on the same rules in the same seat sessions:
    ``round`` (1-based; its markers carry ``round - 1``), ``kind`` (its entries' kind) and
    ``name`` (the words of its headers and titles; ``None``: "round 1 (independent
    opening)")."""

    roundtable: str
    prompts: tuple[str, ...]
    topic_text: str
    turn_timeout_s: float
    round: int = 1
    kind: SeatEntryKind = "turn"
    name: str | None = None

    def header(self, agent: str, side: str | None = None) -> str:
        """A seat's header in this round (its prompt's label, its record's first line)."""
        if self.name is None:
            return turn_header(agent, self.round, side, independent=True)
        return f"── {agent} · {self.name} ──"

    def title(self, agent: str) -> str:
        """A seat session's title when this round creates it."""
        if self.name is None:
            return turn_title(agent, self.round, independent=True)
        return f"{agent} · {self.name}"


_OPENING = Setup(roundtable="", prompts=(), topic_text="", turn_timeout_s=0.0)
"""The opening round's headers (:func:`record_text` without a setup)."""


@dataclass(slots=True)
class OpeningDecision:
    """The new round state, commands in execution order and the next deadline (epoch ms)."""

    round: OpeningRound
    commands: list[OpeningCommand] = field(default_factory=list)
    wake_at: int | None = None


def record_text(entry: HistoryEntry, setup: Setup | None = None) -> str:
    """The visible text of a seat's record: the turn header (``setup``'s, default the opening's),
    then its answer or its failure."""
    head = (setup or _OPENING).header(entry.agent)
    if entry.has_error:
        body = entry.response.strip()
        failed = f"(failed: {entry.error or 'no reply'})"
        return f"{head}\n{failed}\n\n{body}" if body else f"{head}\n{failed}"
    return f"{head}\n{entry.response.strip()}"


def _settle(
    s: OpeningSeat, view: SeatView, now: int, setup: Setup, cancelled: bool
) -> tuple[OpeningSeat, list[OpeningCommand], int | None]:
    """One running seat: settled, aborted, prompted or waited for."""
    timeout_ms = int(setup.turn_timeout_s * 1000)
    assert s.session_id is not None
    answers = answers_to(view.messages, s.message_id) if view.found else []
    idle = view.status == "idle"

    def settle(cut: bool, error: str | None = None) -> tuple[OpeningSeat, list[OpeningCommand]]:
        entry = entry_from_answers(
            answers,
            agent=s.agent,
            round_number=setup.round,
            seat=s.seat,
            kind=setup.kind,
            message_id=s.message_id,
            cut_off=cut,
            timeout_s=None if cancelled else setup.turn_timeout_s,
        )
        if cancelled and cut:
            entry = entry.model_copy(update={"error": "cut off by the cancel"})
        elif error is not None:
            entry = entry.model_copy(update={"has_error": True, "error": error})
        new = s.model_copy(update={"entry": entry})
        return new, [SeatSettled(entry)]

    if view.found and idle and turn_is_final(answers, idle=True):
        cut = answers[-1].error_name == "MessageAbortedError" and s.abort_requested_at is not None
        new, cmds = settle(cut)
        return new, cmds, None
    if s.abort_requested_at is not None:
        if idle and now - s.abort_requested_at >= ABORT_GRACE_MS:
            new, cmds = settle(True)
            return new, cmds, None
        return s, [], s.abort_requested_at + ABORT_GRACE_MS
    if cancelled:
        if s.prompted_at is None and not view.found:
            new, cmds = settle(False, "cancelled before its turn started")
            return new, cmds, None
        aborted = s.model_copy(update={"abort_requested_at": now})
        return aborted, [AbortSeat(s.session_id), PersistRound()], now + ABORT_GRACE_MS
    if s.prompted_at is not None and now - s.prompted_at >= timeout_ms:
        aborted = s.model_copy(update={"abort_requested_at": now})
        return aborted, [AbortSeat(s.session_id), PersistRound()], now + ABORT_GRACE_MS
    if not view.found:
        if view.accepted:
            return s, [], (s.prompted_at or now) + timeout_ms
        waited = now - (s.prompted_at or 0)
        if s.prompted_at is None or (idle and waited >= REPROMPT_GRACE_MS):
            marker = Marker(
                kind="opening",
                round=setup.round - 1,
                seat=s.seat,
                agent=s.agent,
                roundtable=setup.roundtable,
            )
            sent = s.model_copy(update={"prompted_at": now})
            prompt = PromptSeat(
                s.seat,
                s.session_id,
                s.message_id,
                s.agent,
                setup.prompts[s.seat],
                marker,
                # The opening's label is the executor's (it knows the seat's side).
                setup.header(s.agent) if setup.name is not None else "",
            )
            return sent, [PersistRound(), prompt], now + REPROMPT_GRACE_MS
        return s, [], (s.prompted_at or now) + REPROMPT_GRACE_MS
    if view.error is not None and idle and not answers:
        seen, text = view.error
        if now - seen >= ERROR_GRACE_MS:
            new, cmds = settle(False, text)
            return new, cmds, None
        return s, [], seen + ERROR_GRACE_MS
    return s, [], (s.prompted_at or now) + timeout_ms


def _recorded(
    messages: Sequence[MessageView], message_id: str, seat: int, round_index: int = 0
) -> bool:
    return any(
        isinstance(m, UserView)
        and (
            m.id == message_id
            or (
                m.marker is not None
                and m.marker.kind == "opening"
                and m.marker.seat == seat
                and m.marker.round == round_index
            )
        )
        for m in messages
    )


def step(rnd: OpeningRound, obs: OpeningObservation, setup: Setup) -> OpeningDecision:
    """One decision of the opening round (see the module docstring for its invariants).

    Args:
        rnd: the round as last decided (or as last persisted, after a restart).
        obs: what the shell just read (the roundtable's session, its children, each seat's).
        setup: the roundtable's session id, the seats' prompts, the topic record, the timeout.

    Returns:
        The new round state, the commands in order and the next deadline. Once
        :attr:`OpeningRound.done`, the caller takes :meth:`OpeningRound.entries` as round 1.
    """
    seats: list[OpeningSeat] = []
    cmds: list[OpeningCommand] = []
    wakes: list[int] = []
    adopted = False
    for s in rnd.seats:
        if s.entry is not None:
            seats.append(s)
            continue
        if s.session_id is None:
            child = next((sid for sid, seat in obs.children if seat == s.seat), None)
            if child is None:
                if obs.cancelled:
                    entry = entry_from_answers(
                        [],
                        agent=s.agent,
                        round_number=setup.round,
                        seat=s.seat,
                        kind=setup.kind,
                        message_id=s.message_id,
                    ).model_copy(update={"error": "cancelled before its turn started"})
                    seats.append(s.model_copy(update={"entry": entry}))
                    cmds.append(SeatSettled(entry))
                    continue
                title = setup.title(s.agent)
                cmds.append(CreateSeatSession(s.seat, title))
                seats.append(s)
                continue
            s = s.model_copy(update={"session_id": child})
            adopted = True
        view = obs.seats.get(s.session_id or "", SeatView())
        new, more, wake = _settle(s, view, obs.now, setup, obs.cancelled)
        seats.append(new)
        cmds.extend(more)
        if wake is not None:
            wakes.append(wake)
    out = rnd.model_copy(update={"seats": seats})
    if adopted and not any(isinstance(c, PersistRound) for c in cmds):
        cmds.append(PersistRound())
    if any(isinstance(c, CreateSeatSession) for c in cmds):
        # The created sessions are adopted from the next read of the children.
        wakes.append(obs.now)
    if out.settled and not out.done and obs.status == "idle":
        # The records, then the one write that says so (a crash in between finds them in the
        # session): no write before them in this decision may claim what is not done yet.
        cmds = [c for c in cmds if not isinstance(c, PersistRound)]
        out, records = _records(out, obs, setup)
        cmds.extend(records)
    else:
        if out.settled and not out.done:
            wakes.append(obs.now + REPROMPT_GRACE_MS)  # never write into a busy session
        if any(isinstance(c, SeatSettled) for c in cmds):
            cmds.append(PersistRound())
    # Every write of a decision writes its final state: the first one is all it takes (it comes
    # before any prompt the state names).
    first = next((i for i, c in enumerate(cmds) if isinstance(c, PersistRound)), None)
    if first is not None:
        cmds = [c for i, c in enumerate(cmds) if i == first or not isinstance(c, PersistRound)]
    return OpeningDecision(out, cmds, min(wakes) if wakes else None)


def _records(
    rnd: OpeningRound, obs: OpeningObservation, setup: Setup
) -> tuple[OpeningRound, list[OpeningCommand]]:
    """The records of a settled round not yet in the roundtable's session (topic first, then
    the seats in order), and the round marked as recorded (the state is written after them)."""
    cmds: list[OpeningCommand] = []
    index = setup.round - 1
    if not _recorded(obs.messages, rnd.topic_record_id, TOPIC_SEAT, index):
        marker = Marker(kind="opening", round=index, seat=TOPIC_SEAT, roundtable=setup.roundtable)
        cmds.append(RecordOpening(rnd.topic_record_id, setup.topic_text, marker))
    seats: list[OpeningSeat] = []
    for s in rnd.seats:
        assert s.entry is not None
        if not s.recorded and not _recorded(obs.messages, s.record_id, s.seat, index):
            marker = Marker(
                kind="opening",
                round=index,
                seat=s.seat,
                agent=s.agent,
                roundtable=setup.roundtable,
            )
            cmds.append(RecordOpening(s.record_id, record_text(s.entry, setup), marker))
        seats.append(s.model_copy(update={"recorded": True}))
    cmds.append(PersistRound())
    return rnd.model_copy(update={"seats": seats, "topic_recorded": True}), cmds


# ── the round within its roundtable (see the module docstring) ──────────────────────────────────


def running(state: RoundtableState) -> bool:
    """Whether the independent opening round drives this roundtable now: an active, independent
    roundtable whose round 1 is not recorded yet and that was never extended."""
    if not state.active or state.phase != Phase.ACTIVE or state.options.opening != "independent":
        return False
    if state.openings is not None:
        if not state.openings.done:
            return True
        # Recorded: a second round of the protocol runs until it is recorded too.
        return state.current_round == 0 and _second(state) is not None
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
    obs = replace(obs, cancelled=cancelled)
    second = _second(state) if state.openings is not None and state.openings.done else None
    if second is not None:
        # The opening is recorded: the protocol's second round.
        rnd = state.second_round or _start_second(state, ids, obs.now)
        d = step(rnd, obs, _second_setup(state, second))
        new = state.model_copy(update={"second_round": d.round, "updated_at": obs.now})
        if state.second_round is None:
            d.commands.insert(0, PersistRound())
        if not d.round.done:
            return FlowDecision(new, d.commands, None, d.wake_at)
        return FlowDecision(new, d.commands, _after(new, obs, new_id), None)
    rnd = state.openings or start(state.agents, ids, obs.now)
    d = step(rnd, obs, setup(state))
    new = state.model_copy(update={"openings": d.round, "updated_at": obs.now})
    if state.openings is None:
        d.commands.insert(0, PersistRound())  # the ids are chosen: write them first
    if not d.round.done:
        return FlowDecision(new, d.commands, None, d.wake_at)
    if _second(new) is not None:
        return FlowDecision(new, d.commands, None, obs.now)  # the second round starts at once
    return FlowDecision(new, d.commands, _after(new, obs, new_id), None)


def _second(state: RoundtableState) -> SecondRound | None:
    """The protocol's second round after a recorded opening, unless the roundtable is cancelled
    or every opening failed (the observer, or nobody, is next)."""
    if state.end_reason == EndReason.CANCELLED or state.openings is None:
        return None
    if all(e.has_error for e in state.openings.entries()):
        return None
    return protocols.running(state).second_round(state)


def _second_setup(state: RoundtableState, second: SecondRound) -> Setup:
    return Setup(
        state.session_id,
        second.prompts,
        second.topic_text,
        state.options.turn_timeout,
        round=2,
        kind=second.kind,
        name=second.name,
    )


def _start_second(state: RoundtableState, ids: Sequence[str], now: int) -> OpeningRound:
    """The second round: the seats that take part (a prompt of their own), each in its opening
    session; ``ids`` as for :func:`start`."""
    second = _second(state)
    assert second is not None and state.openings is not None
    rnd = start(state.agents, ids, now)
    sessions = {s.seat: s.session_id for s in state.openings.seats}
    seats = [
        s.model_copy(update={"session_id": sessions.get(s.seat)})
        for s in rnd.seats
        if second.prompts[s.seat]
    ]
    return rnd.model_copy(update={"seats": seats, "round": 2})


def current(state: RoundtableState) -> OpeningRound | None:
    """The independent round that runs now (the opening, else the second round), if any."""
    if state.openings is not None and state.openings.done:
        return state.second_round
    return state.openings


def _after(state: RoundtableState, obs: OpeningObservation, new_id: str) -> Decision:
    """Round 1 is recorded: put it into the history and plan the next turn (or the end)."""
    assert state.openings is not None
    entries = state.openings.entries()
    errors = [*state.errors]
    errors += [f"{e.agent} (round 1): {e.error}" for e in entries if e.has_error]
    seconds = state.second_round.entries() if state.second_round is not None else []
    errors += [f"{e.agent} ({e.kind}): {e.error}" for e in seconds if e.has_error]
    new = state.model_copy(
        update={
            "history": [*state.history, *entries, *seconds],
            "errors": errors,
            "current_round": 1,
            "current_agent_index": 0,
        }
    )
    mobs = Observation(
        now=obs.now, status=obs.status, messages=obs.messages, new_id=new_id, plugin=obs.plugin
    )
    end: EndReason | None = None
    if state.end_reason == EndReason.CANCELLED:
        if not state.options.cancel_summarize:
            done = new.model_copy(update={"phase": Phase.DONE, "summary": cancelled_text(new)})
            return Decision(done, [PersistState(index=True), Finalize()])
        end = EndReason.CANCELLED
    elif all(e.has_error for e in entries):
        end = EndReason.ALL_FAILED
    elif opened := protocols.running(state).after_opening(new, entries, obs.now, obs.messages):
        # The protocol decides what follows its opening (docs/deliberation.md, "Protocols").
        new = opened.state
        if opened.stop is not None:
            end, new = opened.stop.reason, opened.stop.recorded(new)
        elif opened.observer:
            new = new.model_copy(update={"phase": Phase.OBSERVING})
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
