"""The independent opening round on OpenCode 2.x: the pure rules of :mod:`roundtabled.core.
opening` (``decide``), read and carried out through the server port.

While :func:`roundtabled.core.opening.running` holds (the opening, then a protocol's second
independent round), the 2.x shell hands each pass of a roundtable here instead of to the machine
(docs/design.md, "The 2.x shell"): :func:`observe` reads S2 (running or not, the ids of what it
holds), its children (a seat's session created before a crash is adopted by its metadata) and
each unsettled seat's turn (:meth:`~roundtabled.opencode.port.V2Port.turn_outcome`), as the views
the rules read; the commands are carried out by :func:`execute`. What 2.x does differently:

- a seat's prompt id is derived from its turn key (the round's index, the seat;
  :func:`opening_ids`), as every 2.x prompt's: sent again after a crash, it is the same prompt;
  a protocol's second round (council's ranking, in the same seat sessions) has its own keys and
  ids, so its prompts are never taken for the opening's;
- a seat's record goes into S2 as a ``synthetic`` record parked in S2's inbox (2.x stores no
  message without a model turn): it is delivered, before the prompt, with the next turn's
  prompt in S2 (round 2's first seat), so every later seat reads the openings as user messages
  in S2, in the order they were written; a record in the inbox counts as written.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from roundtabled.core import opening
from roundtabled.core.commands import (
    AbortSeat,
    Cancel,
    CreateSeatSession,
    OpeningCommand,
    PersistRound,
    PromptSeat,
    RecordOpening,
    SeatSettled,
)
from roundtabled.core.messages import AnswerView, MessageView, UserView
from roundtabled.core.opening import OpeningObservation, SeatView
from roundtabled.core.server_records import SessionRef, TurnKey, TurnOutcome, stable_digest
from roundtabled.core.server_records import TurnStatus as TS
from roundtabled.core.sides import turn_header
from roundtabled.core.state import Marker, RoundtableState, Signer, Usage, sign_marker
from roundtabled.errors import NotFound
from roundtabled.opencode.port import V2Port, replaced, v2_prompt_id
from roundtabled.opencode.session_metadata import opening_metadata, opening_seat_of

__all__ = ["OpeningStep", "execute", "observe", "opening_ids", "owner"]

log = logging.getLogger("roundtabled.engine.v2")


def opening_ids(s2: str, seats: int, index: int = 0) -> list[str]:
    """The ``2 * seats + 1`` message ids an independent round of ``s2`` starts with (each seat's
    prompt and record, then the topic record), each derived from what it names: a seat's
    prompt id is its turn key's (the round's 0-based ``index``, the seat), the one
    :meth:`V2Port.start_turn` gives. ``index``: 0 for the opening, 1 for a protocol's second
    round (council's ranking, round 2 of the history): its own ids, since 2.x answers a prompt
    sent with a used id with the first admission and starts no turn (docs/opencode-server.md,
    the 2.x table), and a record found by its id counts as written. Round 1's seat keys are
    free for it: a protocol with a second round (council) runs no seat turn in S2 after it,
    only the observer's (whose key's seat is the observer's)."""
    out: list[str] = []
    tail: tuple[int, ...] = (index,) if index else ()  # the opening's ids as they always were
    for seat in range(seats):
        out.append(v2_prompt_id(TurnKey(s2, index, seat)))
        out.append("msg_" + stable_digest("opening-record", s2, seat, *tail))
    out.append("msg_" + stable_digest("opening-topic", s2, *tail))
    return out


def owner(states: Iterable[RoundtableState], session_id: str) -> str | None:
    """S2's id of the roundtable whose independent round (the opening, or a protocol's second
    round) runs in seat session ``session_id``."""
    for st in states:
        rnd = opening.current(st) if opening.running(st) else None
        if rnd is not None and not rnd.done and any(s.session_id == session_id for s in rnd.seats):
            return st.session_id
    return None


def _seat_views(
    prompt_id: str, agent: str, out: TurnOutcome, now: int
) -> tuple[tuple[MessageView, ...], bool]:
    """The views of a seat's turn as the opening's rules read them (the prompt and, once the
    turn is over, one completed reply), and whether the prompt is on the server."""
    if out.status is TS.MISSING:
        return (), False
    prompt = UserView(id=prompt_id, created=now, marker=None, text="")
    if not out.over:
        return (prompt,), True
    error = None
    if out.status is TS.FAILED:
        error = "OpenCodeError"
    elif out.status is TS.INTERRUPTED:
        error = "MessageAbortedError"
    finish = out.finish if out.finish not in (None, "tool-calls", "unknown") else "stop"
    reply = AnswerView(
        id=f"{prompt_id}-reply",
        parent_id=prompt_id,
        agent=out.agent or agent,
        created=now,
        completed=True,
        finish=finish,
        error_name=error,
        error_message=out.error,
        text=out.text,
        tool_calls=(),
        files=(),
        usage=Usage(input=out.tokens_in or 0, output=out.tokens_out or 0),
        summary=False,
    )
    return (prompt, reply), True


async def observe(
    port: V2Port,
    state: RoundtableState,
    s2: SessionRef,
    accepted: set[str],
    now: int,
    plugin: str,
) -> OpeningObservation:
    """Read S2, its children and each unsettled seat's turn for one pass of the opening.

    Raises:
        NotFound: S2 is gone. TransportError: the server could not be reached.
    """
    running = await port.client.active()
    rnd = opening.current(state)  # the opening, else the second round (None: not started yet)
    kids: tuple[tuple[str, int], ...] = ()
    if rnd is None or any(s.session_id is None for s in rnd.seats):
        children = sorted(
            await port.client.children(s2.id), key=lambda c: int(c.time.get("created") or 0)
        )
        kids = tuple(
            (c.id, seat)
            for c in children
            if (seat := opening_seat_of(c.metadata, s2.id)) is not None
        )
    seats: dict[str, SeatView] = {}
    for s in rnd.seats if rnd is not None else ():
        if s.session_id is None or s.entry is not None:
            continue
        where = SessionRef(s.session_id, s2.directory, s2.id)
        try:
            out = await port.turn_outcome(where, s.message_id)
        except NotFound:
            # the other major's 404 (a server replaced in place) says nothing of the seat
            if (
                other := await replaced(port, f"seat session {s.session_id} answered 404")
            ) is not None:
                raise other from None
            out = TurnOutcome(TS.MISSING)
        views, found = _seat_views(s.message_id, s.agent, out, now)
        busy = s.session_id in running or out.status in (TS.QUEUED, TS.RUNNING)
        seats[s.session_id] = SeatView(
            status="busy" if busy else "idle",
            messages=views,
            found=found,
            accepted=s.message_id in accepted,
        )
    # S2's records are looked for by id (the rules find a record by its id): what its history
    # holds and what waits in its inbox
    held = [r.id for r in await port.client.all_messages(s2.id)]
    held += [str(i.get("id")) for i in await port.client.inbox(s2.id) if i.get("id")]
    messages = tuple(UserView(id=i, created=0, marker=None, text="") for i in held)
    return OpeningObservation(
        now=now,
        status="busy" if s2.id in running else "idle",
        messages=messages,
        children=kids,
        seats=seats,
        plugin=plugin,
    )


@dataclass(slots=True)
class OpeningStep:
    """What one pass needs from the 2.x shell: the port, the signer, the roundtable's state
    write (``write``: the state as it stands, with the hidden ids) and where the seats' settled
    turns and the sent prompts go (``recorded``)."""

    port: V2Port
    signer: Signer
    write: Callable[[], Awaitable[None]]
    recorded: Callable[[object], None]


async def execute(
    step: OpeningStep,
    state: RoundtableState,
    s2: SessionRef,
    commands: list[OpeningCommand],
    accepted: set[str],
) -> bool:
    """Carry out one decision's opening commands in order; returns whether a seat's session was
    created (the next pass adopts it from S2's children).

    Raises:
        TransportError: the server could not be reached.
    """
    created = False
    for cmd in commands:
        if isinstance(cmd, PersistRound):
            await step.write()
        elif isinstance(cmd, CreateSeatSession):
            await step.port.create_child(
                s2, cmd.title, state.agents[cmd.seat], opening_metadata(s2.id, cmd.seat)
            )
            created = True
        elif isinstance(cmd, PromptSeat):
            seat = SessionRef(cmd.session_id, s2.directory, s2.id)
            sent = await step.port.start_turn(
                seat,
                cmd.agent,
                state.models.get(cmd.agent),
                cmd.text,
                # the round's own key (its marker's 0-based round), as opening_ids derives it
                TurnKey(s2.id, cmd.marker.round, cmd.seat),
                label=cmd.label or turn_header(cmd.agent, 1, independent=True),
                marker=sign_marker(cmd.marker, cmd.session_id, step.signer),
            )
            if sent != cmd.message_id:  # the ids are derived alike (opening_ids)
                log.warning("%s: seat %d prompted as %s", s2.id, cmd.seat, sent)
            accepted.add(cmd.message_id)
            step.recorded(cmd)
        elif isinstance(cmd, AbortSeat):
            with contextlib.suppress(NotFound):  # a seat session deleted runs nothing
                await step.port.abort(SessionRef(cmd.session_id, s2.directory, s2.id))
        elif isinstance(cmd, RecordOpening):
            await step.port.client.synthetic(
                s2.id,
                cmd.text,
                message_id=cmd.message_id,
                description="roundtable opening",
                metadata=_signed(cmd.marker, s2.id, step.signer),
                resume=False,
            )
        elif isinstance(cmd, SeatSettled):
            step.recorded(cmd)
    return created


def _signed(marker: Marker, session_id: str, signer: Signer) -> dict[str, object]:
    return dict(sign_marker(marker, session_id, signer))


def decide(
    state: RoundtableState, obs: OpeningObservation, cancel: Cancel | None, new_id: str
) -> opening.FlowDecision:
    """The opening's decision (:func:`roundtabled.core.opening.decide`) with the round's ids
    derived from S2 (:func:`opening_ids`): the opening's while it runs, then the second
    round's (the rules take the ids when a round starts)."""
    second = state.openings is not None and state.openings.done
    return opening.decide(
        state,
        obs,
        ids=opening_ids(state.session_id, len(state.agents), 1 if second else 0),
        new_id=new_id,
        cancel=cancel,
    )
