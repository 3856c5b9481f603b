"""The engine: one worker per roundtable, dispatch from events, reconcile, recovery, delivery.

Shape (kopf-like): the event stream only *wakes* the roundtable an event concerns; the worker then
reads S2's truth (status + messages from the pending turn on), feeds it to the pure
:func:`roundtabled.machine.decide`, and executes the returned commands. Workers are serial within a
roundtable and parallel across roundtables; one failing roundtable cannot hurt another (its errors
are logged and retried with backoff inside its own task).

Level-triggered: every worker re-observes at its next deadline (turn timeout, grace periods) and at
least every ``resync_period`` seconds, and all workers are woken on every (re)connect of the event
stream. A lost ``session.idle`` costs at most one resync period; a stale or duplicated one costs one
cheap read.

Exactly-once effects:
- turns: see the machine's invariants (intent persisted, then prompted; markers found on recovery);
- the result in S1: delivered through the waiting tool call when there is one, else as one
  ``noReply`` message whose id is persisted before it is posted (and looked for before posting
  again), only while S1 is idle (a noReply into a busy session triggers a model turn, API notes §4);
- finalization steps (delimiter, title, toast) each carry a persisted flag or message id.

A job may run more than once (arq's rule): after a crash between an effect and its record, the
effect is looked for on the server before it is repeated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from roundtabled import events as ev
from roundtabled import faults, ids, machine, prompts
from roundtabled.errors import (
    AuthFailed,
    NotFound,
    StateError,
    StateForgedError,
    TransportError,
    ValidationFailed,
)
from roundtabled.machine import (
    Abort,
    Cancel,
    Decision,
    Finalize,
    Observation,
    PersistState,
    Prompt,
    Toast,
    TurnRecorded,
    UserView,
)
from roundtabled.mirror import TurnMirror
from roundtabled.state import (
    BUILTIN_OBSERVER,
    CONCLUDED_SUFFIX,
    DELIMITER_TEXT,
    META_KEY,
    OBSERVER_AGENT,
    STATE_VERSION,
    Delivery,
    EndReason,
    Extension,
    Finalization,
    HistoryEntry,
    Marker,
    ModelRef,
    Options,
    PermissionPolicy,
    Phase,
    RoundtableState,
    Signer,
    decode_state,
    encode_state,
    has_meta_text,
    persisted_form,
    sign_marker,
)
from roundtabled.validation import RoundtableRequest, check_agents, check_extend_rounds

if True:  # typing-only import kept at runtime for clarity of the dependency direction
    from roundtabled.opencode import HTTP_CLOCK, HttpClock, OpenCodeClient

log = logging.getLogger("roundtabled.engine")

RECENT_MAX = 200
"""Finished roundtables kept in memory for status, results and export."""
TOOL_POLL_GRACE_S = 130.0
"""How long a finished result waits for the tool shim to poll before going to S1 as a noReply
(the shim retries for up to 120 s while the daemon restarts)."""
NO_HUMAN_ANSWER = (
    "No human is at this roundtable to answer questions (it is run by roundtabled). "
    "Do not ask; state your own assumption and continue the debate."
)
"""The answer given to a seat's ``question`` tool call."""
PROGRESS_QUEUE_MAX = 256
"""Bounded queue per progress subscriber; a slow subscriber loses events, never blocks a worker."""


PERSIST_DELAY_MS = 500
"""After a fast handoff the state write waits this long (ms): turns that end sooner (an instant
model) are handed off without a write; a crash in between is recovered from the prompts' signed
markers (machine invariant 4)."""


def now_ms() -> int:
    """Wall clock in epoch milliseconds (the machine's time unit)."""
    return int(time.time() * 1000)


@dataclass
class Settings:
    """The engine's knobs (a projection of :class:`roundtabled.config.Settings`).

    Seconds throughout.
    """

    turn_timeout: float = 300.0
    loop_threshold: float = 0.85
    resync_period: float = 15.0
    permission_policy: PermissionPolicy = PermissionPolicy.REJECT
    usage_footer: bool = True
    hide_past_prompts: bool = True
    state_dir: Path | None = None
    directories: tuple[str, ...] = ()
    recovery_concurrency: int = 8


@dataclass
class Table:
    """Runtime wrapper of one roundtable (in the engine's dict, keyed by S2's id)."""

    state: RoundtableState
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    deadline_ms: int | None = None
    cancel: Cancel | None = None
    deleted_hint: bool = False
    error_seen_at: int | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    result: dict[str, Any] | None = None
    tool_polled_at: float | None = None
    finished_at: float | None = None
    subscribers: list[asyncio.Queue[dict[str, Any]]] = field(default_factory=list)
    started_monotonic: float = field(default_factory=time.monotonic)
    handoff_ms: list[float] = field(default_factory=list)
    handoff_server_ms: list[float] = field(default_factory=list)
    """Per handoff: the part of ``handoff_ms`` spent awaiting the server (ms)."""
    clock: HttpClock = field(default_factory=HttpClock)
    woke_at: float | None = None
    """``time.perf_counter()`` of the first poke since the worker last began a pass (None: no
    poke since), with ``woke_clock``, the ``clock.reading()`` at that moment."""
    woke_clock: tuple[float, float] = (0.0, 0.0)
    answering: tuple[float, float, float] | None = None
    """The wake the current pass answers, ``(woke_at, *woke_clock)``: the start of the handoff
    its prompt completes. A pass that sends no prompt drops it: the next handoff starts at the
    next poke (a stale or early event whose pass finds the turn still running is not the wake
    of the turn that ends later; the wait for the server in between is neither daemon time nor
    a request's)."""
    accepted: set[str] = field(default_factory=set)
    pokes: int = 0
    disposed_at: int | None = None
    """When OpenCode last disposed S2's instance (config reload; epoch ms): it aborts S2's turn."""
    persist_at: int | None = None
    """When the deferred state write of a fast handoff is due (epoch ms)."""
    pokes_at_prompt: int = 0
    mirror: TurnMirror | None = None
    """The pending turn as the event stream reports it (fast handoff, :mod:`roundtabled.mirror`)."""
    unpersisted: bool = False
    """The in-memory state names a prompt the state block in S2 does not (a fast handoff whose
    state write failed): written at the next step."""
    log: logging.LoggerAdapter[logging.Logger] = field(init=False)

    def __post_init__(self) -> None:
        self.log = _TableAdapter(log, {"table": self})

    def poke(self) -> None:
        """Wake the worker (coalesced: many pokes before it runs are one wake)."""
        self.pokes += 1
        if self.woke_at is None:
            self.woke_at = time.perf_counter()
            self.woke_clock = self.clock.reading()
        self.wake.set()


class Engine:
    """Holds every roundtable this daemon drives and the machinery around them.

    Args:
        client: the OpenCode client (shared by all workers).
        signer: the daemon's MAC key (state blocks and markers).
        settings: engine settings.
    """

    def __init__(self, client: OpenCodeClient, signer: Signer, settings: Settings) -> None:
        self.client = client
        self.signer = signer
        self.settings = settings
        self.tables: dict[str, Table] = {}
        self.recent: OrderedDict[str, Table] = OrderedDict()
        self.by_parent: dict[str, set[str]] = {}
        self.descendants: dict[str, str] = {}
        self.handled_requests: set[str] = set()
        self.ready = asyncio.Event()
        self.server_version: str | None = None
        self.last_error: str | None = None
        self.on_change: Callable[[], None] | None = None
        self._bg: set[asyncio.Task[Any]] = set()
        self._closing = False
        self.handoffs: list[float] = []
        self.handoff_server: list[float] = []
        """Server share (ms) of each entry of ``handoffs`` (same index)."""
        self.handoff_queued: list[float] = []
        """Of which waiting for a slot of the client's request pool (ms, same index)."""
        self.stream_epoch = 0
        """Connections of the event stream so far (a mirror opened in an earlier one is void)."""
        self.fast_handoffs = 0
        """Handoffs decided from the event mirror (no read of S2 before the prompt)."""
        self.read_handoffs = 0
        """Handoffs decided from a read of S2."""

    # ------------------------------------------------------------------------------------------
    # Events (hints)
    # ------------------------------------------------------------------------------------------

    def on_event(self, event: ev.Event) -> None:
        """Dispatch one server event: wake the roundtable it concerns. Cheap; never raises."""
        sid = event.session_id
        etype = event.type
        if etype == ev.SERVER_CONNECTED:
            # First event of every connection, handled before the events after it: a mirror
            # opened on an earlier connection may have missed events in the gap.
            self.stream_epoch += 1
            return
        if etype == ev.PERMISSION_ASKED:
            self._spawn(self._on_permission(event))
            return
        if etype == ev.QUESTION_ASKED:
            self._spawn(self._on_question(event))
            return
        if etype == ev.SERVER_INSTANCE_DISPOSED:
            # A config reload: the server aborts the directory's running turns (regression
            # "event stream closed by a config reload"). A reason, not an error; resync.
            where = event.properties.get("directory") or event.directory
            log.info("OpenCode disposed the instance of %s (config reload); resyncing", where)
            for reloaded in list(self.tables.values()):
                if reloaded.state.directory == where:
                    reloaded.disposed_at = now_ms()
                    reloaded.poke()
            return
        if sid is None:
            return
        table = self.tables.get(sid)
        if table is not None:
            mirror = table.mirror
            if mirror is not None and mirror.epoch == self.stream_epoch:
                if mirror.feed(event):
                    table.poke()  # the turn looks finished: decide from the mirror
                    return
                if mirror.doubt is None and etype in (
                    ev.MESSAGE_UPDATED,
                    ev.SESSION_STATUS,
                    ev.SESSION_IDLE,
                ):
                    # The mirror's idle after a finished reply wakes the worker; a read now (an
                    # idle before any reply, a step's end) would find the turn still running.
                    # Deadlines and the resync period still wake it whatever the events say.
                    return
            if etype in (ev.SESSION_IDLE, ev.SESSION_COMPACTED):
                table.poke()
            elif etype == ev.SESSION_STATUS:
                if event.status_type == "idle":
                    table.poke()
            elif etype == ev.SESSION_ERROR:
                table.error_seen_at = now_ms()
                table.poke()
            elif etype == ev.SESSION_DELETED:
                table.deleted_hint = True
                table.poke()
            elif etype == ev.MESSAGE_UPDATED and _completed_assistant(event):
                table.poke()
            return
        if etype == ev.SESSION_CREATED:
            parent = event.parent_id
            if parent and (parent in self.tables or parent in self.descendants):
                self.descendants[sid] = self.descendants.get(parent, parent)
            return
        parents = self.by_parent.get(sid)
        if parents:
            for s2 in list(parents):
                child = self.tables.get(s2)
                if child is None:
                    continue
                if etype == ev.SESSION_DELETED:
                    child.deleted_hint = True  # S2 goes with its parent; confirmed by reads
                    child.poke()
                elif etype in (ev.SESSION_IDLE, ev.SESSION_STATUS):
                    child.poke()

    async def on_connect(self) -> None:
        """After every (re)connect of the stream: resync every roundtable (no replay exists)."""
        self.stream_epoch += 1  # events may have been lost: every open mirror is void
        for table in list(self.tables.values()):
            table.poke()
        self._spawn(self.sweep_requests())

    # ------------------------------------------------------------------------------------------
    # Starting, extending, cancelling
    # ------------------------------------------------------------------------------------------

    async def start(self, req: RoundtableRequest) -> RoundtableState:
        """Start a fresh roundtable (spec §4 phase 1) and return its state once turn 1 is sent.

        Raises:
            ValidationFailed: bad agents/observer (names the available agents), missing models.
            TransportError: the server could not be reached.
        """
        if req.extend:
            return await self.extend(req)
        assert req.agents is not None
        directory = req.directory
        if directory is not None and not Path(directory).is_dir():
            raise ValidationFailed(
                "directory",
                f"directory {directory!r} does not exist (give the project "
                "directory OpenCode serves, or omit it for the server's own)",
            )
        # The three reads are independent: one round trip instead of three.
        parent_task = (
            asyncio.ensure_future(self.client.get_session(req.parent_session_id))
            if req.parent_session_id
            else None
        )
        config_task = asyncio.ensure_future(self.client.config(directory))
        try:
            available = await self.client.agents(directory)
            config = await config_task
            try:
                parent = await parent_task if parent_task is not None else None
            except NotFound:
                raise ValidationFailed(
                    "parentSessionID", f"parent session {req.parent_session_id!r} does not exist"
                ) from None
        finally:
            for task in (parent_task, config_task):
                if task is not None and not task.done():
                    task.cancel()
            await asyncio.gather(
                *(t for t in (parent_task, config_task) if t is not None), return_exceptions=True
            )
        observer = req.observer or BUILTIN_OBSERVER
        check_agents(req.agents, req.observer, available)
        by_name = {str(a.get("name")): a for a in available}
        if observer == BUILTIN_OBSERVER and OBSERVER_AGENT not in by_name:
            raise ValidationFailed(
                "observer",
                f"the built-in observer agent '{OBSERVER_AGENT}' is not installed for this "
                "project; run `roundtabled install-tool --project DIR` (or --global), or name "
                "an observer agent",
            )
        default_model = _model_ref(config.get("model"))
        models: dict[str, ModelRef] = {}
        for name in [*req.agents, observer if observer != BUILTIN_OBSERVER else OBSERVER_AGENT]:
            ref = _model_ref(by_name.get(name, {}).get("model")) or default_model
            if ref is None:
                raise ValidationFailed(
                    "agents",
                    f"agent {name!r} has no model and the server has no default "
                    "model; set `model` in opencode.json",
                )
            models[name] = ref
        if parent is not None:
            directory = directory or parent.get("directory")
        title = req.title or prompts.default_title(req.prompt)
        state_msg, state_part = ids.message_id(), ids.part_id()
        session = await self.client.create_session(
            directory=directory,
            parent_id=req.parent_session_id,
            title=title,
            metadata=_index_metadata(Phase.ACTIVE, state_msg, state_part, finalized=False),
        )
        s2 = str(session["id"])
        options = Options(
            turn_timeout=req.turn_timeout or self.settings.turn_timeout,
            loop_threshold=self.settings.loop_threshold,
            permission_policy=req.permission_policy or self.settings.permission_policy,
            usage_footer=self.settings.usage_footer,
            hide_past_prompts=self.settings.hide_past_prompts,
        )
        t = now_ms()
        state = RoundtableState(
            sessionID=s2,
            parentSessionID=req.parent_session_id,
            directory=session.get("directory") or directory,
            title=title,
            agents=list(req.agents),
            models=models,
            total_rounds=req.rounds,
            observer=observer,
            prompt=req.prompt,
            delivery=Delivery(toolCallID=req.tool_call_id, toolMessageID=req.tool_message_id),
            options=options,
            stateMessageID=state_msg,
            statePartID=state_part,
            created_at=t,
            updated_at=t,
        )
        # Turn 1 is decided before the state block is written, and the block is written with
        # its intent in it: this daemon created S2 a moment ago, so S2 is idle and empty, and a
        # read (GET /session/status) plus a second write (the intent) would only put two round
        # trips (~11 ms) before the debate (issue 5, figure 1).
        first = machine.decide(
            state, Observation(now=now_ms(), status="idle", new_id=ids.message_id())
        )
        opening: Prompt | None = None
        match first.commands:
            case [PersistState(), Prompt(send=True, hide=()) as prompt]:
                opening, state = prompt, first.state
            case _:  # never for a fresh S2; then turn 1 is decided from a read like any other
                pass
        await self._create_state_block(state)
        faults.checkpoint("state-created")
        if opening is not None:
            faults.checkpoint("intent-persisted")
        self._remember_directory(state.directory)
        table = self._adopt(state)
        table.log.info(
            "roundtable started: %s (%s, %d round(s))",
            title,
            " → ".join(state.agents),
            state.total_rounds,
        )
        self._spawn(self._toast(state, f"Roundtable started: {title}", "info"))
        # Send turn 1 before answering, so the caller sees a running debate.
        if opening is not None:
            table.deadline_ms = first.wake_at
            await self._prompt(table, opening)
        else:
            await self._step(table)
        # The worker waits for the first wake (an event of turn 1, or its deadline): a pass now
        # would only read S2 while turn 1 is starting on the server.
        self._run(table, wait_first=True)
        return table.state

    async def extend(self, req: RoundtableRequest) -> RoundtableState:
        """Continue a concluded roundtable with more rounds (spec §9).

        Raises:
            ValidationFailed: not a roundtable, still active, agents/observer differ.
        """
        assert req.session_id is not None
        s2 = req.session_id
        live = self.tables.get(s2)
        if live is not None and live.state.active:
            raise ValidationFailed(
                "sessionID",
                f"roundtable {s2} is still active (round "
                f"{live.state.current_round + 1}/{live.state.total_rounds}); "
                "wait for it to conclude",
            )
        if live is not None and live.task is not None and not live.task.done():
            # Concluded but still finalizing (delimiter, title, state): let that worker finish
            # first, or it would overwrite the extended state with its own "done" state.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(live.task), 30)
            if not live.task.done():
                raise ValidationFailed(
                    "sessionID", f"roundtable {s2} is still finishing; retry in a few seconds"
                )
        try:
            state = await self.load_state(s2)
        except NotFound:
            raise ValidationFailed("sessionID", f"session {s2!r} does not exist") from None
        except StateError as exc:
            raise ValidationFailed(
                "sessionID", f"session {s2!r} is not a roundtable this daemon can extend ({exc})"
            ) from None
        if state.active:
            messages = await self._read_all(state)
            if self._stuck(state, messages):
                log.info(
                    "roundtable %s: stored phase %s but every expected reply exists; "
                    "recovering it to done",
                    s2,
                    state.phase.value,
                )
                state = state.model_copy(update={"phase": Phase.DONE, "pending": None})
            else:
                raise ValidationFailed(
                    "sessionID", f"roundtable {s2} is still active; wait for it to conclude"
                )
        if req.agents is not None and list(req.agents) != state.agents:
            raise ValidationFailed(
                "agents",
                "agents cannot change when extending; omit it (the "
                f"roundtable's agents are {', '.join(state.agents)})",
            )
        if req.observer is not None and req.observer != state.observer:
            raise ValidationFailed(
                "observer",
                "observer cannot change when extending; omit it "
                f"(the roundtable's observer is {state.observer})",
            )
        check_extend_rounds(state.total_rounds, req.rounds)
        messages = await self._read_all(state)
        _warn_pasted_meta(s2, messages, state.state_message_id)
        if not state.history:
            views = [machine.message_view(m, s2, self.signer) for m in messages]
            state = state.model_copy(update={"history": machine.rebuild_history(state, views)})
        mode = req.extend_mode or prompts.infer_extend_mode(req.prompt)
        ext = Extension(from_round=state.total_rounds, prompt=req.prompt, mode=mode)
        # Hide the old delimiter from later models; a new one is written at the new end.
        if state.finalization.delimiter_message_id:
            await self._hide_message(s2, state.finalization.delimiter_message_id)
        t = now_ms()
        state = state.model_copy(
            update={
                "phase": Phase.ACTIVE,
                "extensions": [*state.extensions, ext],
                "total_rounds": state.total_rounds + req.rounds,
                "current_round": state.total_rounds,
                "current_agent_index": 0,
                "pending": None,
                "end_reason": None,
                "summary": None,
                "parent_session_id": state.parent_session_id or req.parent_session_id,
                "delivery": Delivery(
                    toolCallID=req.tool_call_id, toolMessageID=req.tool_message_id
                ),
                "finalization": Finalization(),
                "updated_at": t,
            }
        )
        if req.turn_timeout:
            state = state.model_copy(
                update={
                    "options": state.options.model_copy(update={"turn_timeout": req.turn_timeout})
                }
            )
        if req.permission_policy:  # per call, like on a fresh roundtable (issue 3, item 12)
            opts = state.options.model_copy(update={"permission_policy": req.permission_policy})
            state = state.model_copy(update={"options": opts})
        await self.client.update_session(s2, title=state.title)
        await self._persist(state, index=True)
        self.recent.pop(s2, None)
        table = self._adopt(state)
        table.log.info("roundtable extended by %d round(s) (%s)", req.rounds, mode)
        self._spawn(self._toast(state, f"Roundtable extended: {state.title}", "info"))
        await self._step(table)
        self._run(table)
        return table.state

    def _stuck(self, state: RoundtableState, messages: list[dict[str, Any]]) -> bool:
        """Spec §9 4b: phase active, but every expected reply is there (count ≥ expected)."""
        views = [machine.message_view(m, state.session_id, self.signer) for m in messages]
        answered = sum(
            1
            for v in views
            if isinstance(v, UserView)
            and v.marker is not None
            and v.marker.kind in ("turn", "observer")
            and any(
                isinstance(a, machine.AnswerView) and a.parent_id == v.id and a.completed
                for a in views
            )
        )
        expected = state.total_rounds * len(state.agents) + 1
        return answered >= expected

    async def cancel(self, s2: str, *, summarize: bool, reason: str) -> RoundtableState:
        """Stop a roundtable: abort the turn in flight; the observer runs only if ``summarize``.

        Raises:
            ValidationFailed: no active roundtable with that id.
        """
        table = self.tables.get(s2)
        if table is None or not table.state.active:
            raise ValidationFailed("sessionID", f"no active roundtable {s2!r}")
        table.cancel = Cancel(summarize=summarize, reason=reason)
        # Durable before the abort and before the answer: a crash from here on must not resume
        # the debate (regression "cancelled result is never released before it is written").
        # The worker's own decision on the cancel writes the full record shortly after.
        with contextlib.suppress(TransportError, NotFound):
            await self._persist(machine.with_cancel(table.state, table.cancel))
        # Abort at once (stop must stop within 2 s), the worker records it.
        with contextlib.suppress(TransportError):
            await self.client.abort(s2)
        table.poke()
        return table.state

    # ------------------------------------------------------------------------------------------
    # Workers
    # ------------------------------------------------------------------------------------------

    def _adopt(self, state: RoundtableState) -> Table:
        table = Table(state=state)
        self.tables[state.session_id] = table
        if state.parent_session_id:
            self.by_parent.setdefault(state.parent_session_id, set()).add(state.session_id)
        self._changed()
        return table

    def _run(self, table: Table, *, wait_first: bool = False) -> None:
        """Start the worker of ``table``; ``wait_first``: its first pass waits for a wake (a
        poke or ``table.deadline_ms``) instead of running at once."""
        table.task = asyncio.create_task(
            self._worker(table, wait_first=wait_first), name=f"rt-{table.state.session_id}"
        )

    async def _worker(self, table: Table, *, wait_first: bool = False) -> None:
        HTTP_CLOCK.set(table.clock)  # this task's requests count as the table's server time
        backoff = 0.5
        if wait_first:
            await self._sleep(table)
        while not self._closing:
            try:
                finished = await self._step(table)
                backoff = 0.5
                if finished:
                    break
            except asyncio.CancelledError:
                raise
            except AuthFailed as exc:
                self.last_error = str(exc)
                table.log.error("%s", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            except TransportError as exc:
                table.log.warning("server call failed, retrying in %.1f s: %s", backoff, exc)
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, 30.0)
                continue
            except Exception:
                table.log.exception("unexpected error; retrying")
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            await self._sleep(table)
        self._retire(table)

    async def _sleep(self, table: Table) -> None:
        period = self.settings.resync_period
        timeout = period
        deadline = table.deadline_ms
        if table.unpersisted and table.persist_at is not None:
            deadline = table.persist_at if deadline is None else min(deadline, table.persist_at)
        if deadline is not None:
            timeout = min(period, max(0.0, (deadline - now_ms()) / 1000))
        if table.wake.is_set():
            table.wake.clear()
            return
        # asyncio.timeout, not wait_for: wait_for (3.11) runs the wait in a task of its own, so
        # a poke reached this worker only two loop iterations later, behind every other ready
        # callback each time (p50 5.6 ms from the waking event to the pass at 20 roundtables).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await table.wake.wait()
        table.wake.clear()

    async def _step(self, table: Table) -> bool:
        """One reconcile pass. Returns True when the roundtable needs no more work."""
        table.answering = None if table.woke_at is None else (table.woke_at, *table.woke_clock)
        table.woke_at = None  # a poke from now on wakes the next pass
        state = table.state
        if state.active:
            fast = self._fast_decision(table)
            if fast is not None:
                if any(isinstance(c, Prompt) for c in fast.commands):
                    await self._execute_fast(table, fast)
                    return False
                await self._execute(table, fast)  # the observer's turn: finalize
                if table.state.active:
                    return False
                return await self._finalize(table)
            if table.unpersisted:
                persist_wake = (
                    table.persist_at is not None
                    and now_ms() >= table.persist_at
                    and table.pokes == table.pokes_at_prompt
                )
                try:
                    await self._persist(state)
                    faults.checkpoint("intent-persisted")
                except NotFound:
                    table.deleted_hint = True  # S2 is gone: the read below confirms and ends it
                    persist_wake = False
                table.unpersisted = False
                table.persist_at = None
                if persist_wake and table.mirror is not None and table.mirror.doubt is None:
                    # Woken only to write the state of the running turn, and its events are
                    # being collected: nothing to read yet.
                    return False
            obs = await self._observe(table)
            decision = machine.decide(state, obs)
            await self._execute(table, decision)
            if table.state.active:
                return False
            # The debate just ended: finalize now, not at the next wake (up to resync_period).
        return await self._finalize(table)

    def _fast_decision(self, table: Table) -> Decision | None:
        """The handoff decided from the event mirror, or ``None`` to read S2 instead.

        Taken only when the mirror is complete (see :mod:`roundtabled.mirror`) and nothing else is
        pending for this roundtable (cancel, deletion or error hint, abort, instance disposal), and
        only when the machine then prompts the next turn; every other decision is taken from a
        read of S2.
        """
        mirror = table.mirror
        state = table.state
        pend = state.pending
        if mirror is None:
            return None
        if mirror.epoch != self.stream_epoch or mirror.doubt is not None:
            table.mirror = None  # void for good: this turn is decided from reads
            return None
        if (
            pend is None
            or pend.message_id != mirror.since
            or pend.abort_requested_at is not None
            or pend.error_seen_at is not None
            or table.cancel is not None
            or table.deleted_hint
            or table.error_seen_at is not None
            or (
                table.disposed_at is not None
                and table.disposed_at >= (pend.prompted_at or 0)  # disposed during this turn
            )
        ):
            return None
        raw = mirror.messages()
        if raw is None:
            return None  # not finished yet: keep collecting
        last = raw[-1]["info"] if len(raw) > 1 else {}
        if last.get("finish") == "tool-calls" and not last.get("error"):
            # Only S2's real status can tell a refused-tools end from an idle *event* that
            # came between two steps (stale or duplicated): read S2.
            return None
        s2 = state.session_id
        obs = Observation(
            now=now_ms(),
            status="idle",
            messages=tuple(machine.message_view(m, s2, self.signer) for m in raw),
            pending_found=True,
            new_id=ids.message_id(),
            accepted=True,
        )
        d = machine.decide(state, obs)
        table.mirror = None  # used (the next prompt opens a new one)
        if any(isinstance(c, Abort) for c in d.commands):
            return None
        if any(isinstance(c, Prompt) and c.send for c in d.commands):
            return d
        if any(isinstance(c, Finalize) for c in d.commands):
            return d
        return None

    async def _execute_fast(self, table: Table, d: Decision) -> None:
        """Execute a handoff decided from the mirror: the prompt first (with the hiding of the
        previous turn's prompt sent just before it), then the state that names it.

        A crash between the prompt and the state write leaves the previous turn pending in S2's
        state block; recovery finds the new prompt by its signed marker and adopts it (machine
        invariant 4). The hiding PATCH completes before the prompt POST, so the next model never
        sees the previous prompt (checked by the tests that record every model request).
        """
        prev = table.state
        table.state = d.state
        table.deadline_ms = d.wake_at
        self.fast_handoffs += 1
        prompt: Prompt | None = None
        for cmd in d.commands:
            if isinstance(cmd, TurnRecorded):
                self._on_turn(table, cmd.entry)
                faults.checkpoint("turn-recorded")
            elif isinstance(cmd, Toast):
                self._spawn(self._toast(table.state, cmd.message, cmd.variant))
            elif isinstance(cmd, Prompt):
                prompt = cmd
        assert prompt is not None
        s2 = table.state.session_id
        table.unpersisted = True
        table.pokes_at_prompt = table.pokes
        # The hiding PATCH(es) complete before the POST: sent beside it, a slow or retried
        # PATCH could land after the server built the next model request (regression "hide
        # patch lands before the next model request").
        try:
            await self._hide_all(s2, prompt.hide)
        except TransportError as exc:
            table.log.warning("could not hide the previous turn prompt: %s", exc)
        await self._prompt(table, prompt)
        if prev.phase != table.state.phase:
            # The index of the start-up scan changes only here; write it now.
            await self._persist(table.state, index=True)
            table.unpersisted = False
            faults.checkpoint("intent-persisted")
            self._changed()
        else:
            # The state write is deferred (PERSIST_DELAY_MS): the prompt's signed marker is the
            # durable record of the turn, and a write now would compete with the turn on the
            # server. A turn that ends sooner is handed off without it.
            table.persist_at = now_ms() + PERSIST_DELAY_MS

    async def _observe(self, table: Table) -> Observation:
        state = table.state
        s2 = state.session_id
        pend = state.pending
        cancel, table.cancel = table.cancel, None
        if cancel is not None and state.end_reason == EndReason.CANCELLED:
            cancel = None
        deleted = False
        parent_deleted = False
        if table.deleted_hint:
            deleted, parent_deleted = await self._check_deleted(state)
            table.deleted_hint = deleted
            if deleted:
                return Observation(
                    now=now_ms(),
                    status="unknown",
                    deleted=True,
                    parent_deleted=parent_deleted,
                    new_id=ids.message_id(),
                )
        status_task = asyncio.ensure_future(self.client.statuses(state.directory))
        try:
            try:
                if pend is not None:
                    msgs, found = await self._read_from(s2, pend.message_id)
                else:
                    msgs, found = [], False
            except BaseException:
                # Never leave the concurrent read unawaited ("exception never retrieved").
                status_task.cancel()
                await asyncio.gather(status_task, return_exceptions=True)
                raise
            statuses = await status_task
        except NotFound:
            deleted, parent_deleted = await self._check_deleted(state)
            if deleted:
                return Observation(
                    now=now_ms(),
                    status="unknown",
                    deleted=True,
                    parent_deleted=parent_deleted,
                    new_id=ids.message_id(),
                )
            raise
        st = statuses.get(s2)
        raw_status = "idle" if st is None else str(st.get("type") or "busy")
        status: machine.Status = "busy"
        if raw_status in ("idle", "retry"):
            status = "idle" if raw_status == "idle" else "retry"
        views = tuple(machine.message_view(m, s2, self.signer) for m in msgs)
        last = views[-1] if views else None
        if (
            status == "idle"
            and pend is not None
            and found
            and isinstance(last, machine.AnswerView)
            and last.finish == "tool-calls"
        ):
            # Messages and status were read concurrently, and the machine takes an idle
            # tool-calls step as the turn's last (a refused tool ends it): re-read now that S2
            # is known idle, so a follow-up step that ended in between is not missed.
            msgs, found = await self._read_from(s2, pend.message_id)
            views = tuple(machine.message_view(m, s2, self.signer) for m in msgs)
        if (
            pend is not None
            and table.error_seen_at is not None
            and (pend.prompted_at is None or table.error_seen_at >= pend.prompted_at)
            and pend.error_seen_at is None
        ):
            table.state = state = state.model_copy(
                update={"pending": pend.model_copy(update={"error_seen_at": table.error_seen_at})}
            )
        table.error_seen_at = None
        return Observation(
            now=now_ms(),
            status=status,
            messages=views,
            pending_found=found,
            cancel=cancel,
            new_id=ids.message_id(),
            accepted=pend is not None and pend.message_id in table.accepted,
        )

    async def _check_deleted(self, state: RoundtableState) -> tuple[bool, bool]:
        """A 404 means deleted, never completed (regression "deletion mid-turn")."""
        try:
            await self.client.get_session(state.session_id)
            deleted = False
        except NotFound:
            deleted = True
        parent_deleted = False
        if state.parent_session_id:
            try:
                await self.client.get_session(state.parent_session_id)
            except NotFound:
                parent_deleted = True
        return deleted or parent_deleted, parent_deleted

    async def _read_from(self, s2: str, message_id: str) -> tuple[list[dict[str, Any]], bool]:
        """S2's messages from ``message_id`` on (inclusive), reading backwards from the newest in
        growing pages so that a turn reads about its own messages only (message ids ascend)."""
        collected: list[dict[str, Any]] = []
        limit = 2
        before: str | None = None
        while True:
            page, cursor = await self.client.messages(s2, limit=limit, before=before)
            collected[:0] = page
            for i, m in enumerate(collected):
                if (m.get("info") or {}).get("id") == message_id:
                    return collected[i:], True
            oldest = (page[0].get("info") or {}).get("id") if page else None
            if cursor is None or not page or (isinstance(oldest, str) and oldest < message_id):
                return [], False
            before = cursor
            limit = min(limit * 2, 64)

    async def _read_all(self, state: RoundtableState) -> list[dict[str, Any]]:
        msgs, _ = await self.client.messages(state.session_id)
        return msgs

    async def _execute(self, table: Table, d: Decision) -> None:
        prev = table.state
        table.state = d.state
        table.deadline_ms = d.wake_at
        cmds = list(d.commands)
        i = 0
        while i < len(cmds):
            cmd = cmds[i]
            if isinstance(cmd, PersistState):
                nxt = cmds[i + 1] if i + 1 < len(cmds) else None
                if isinstance(nxt, Prompt):
                    # The intent and the hiding of old prompts go first (concurrently), then the
                    # prompt: a crash in between is recovered from the persisted intent.
                    await asyncio.gather(
                        self._persist(table.state, index=prev.phase != table.state.phase),
                        self._hide_all(table.state.session_id, nxt.hide),
                    )
                    table.unpersisted = False
                    faults.checkpoint("intent-persisted")
                    if nxt.send:
                        self.read_handoffs += 1
                        await self._prompt(table, nxt)
                    else:
                        # Already in S2 (sent before a crash): adopted; look at it right away.
                        table.log.info("the prompt for %s was already sent; adopted", nxt.agent)
                        table.poke()
                    i += 2
                    continue
                if not table.state.active and table.state.end_reason in (
                    None,
                    EndReason.COMPLETED,
                ):
                    # Completed: the result before the state write (see _release_result), after
                    # the turn events above, so a watcher sees the last turn before "done".
                    self._release_result(table)
                await self._persist(table.state, index=prev.phase != table.state.phase)
                table.unpersisted = False
            elif isinstance(cmd, Prompt):
                await self._hide_all(table.state.session_id, cmd.hide)
                if cmd.send:
                    await self._prompt(table, cmd)
            elif isinstance(cmd, Abort):
                with contextlib.suppress(TransportError):
                    await self.client.abort(table.state.session_id)
            elif isinstance(cmd, Toast):
                self._spawn(self._toast(table.state, cmd.message, cmd.variant))
            elif isinstance(cmd, TurnRecorded):
                self._on_turn(table, cmd.entry)
                faults.checkpoint("turn-recorded")
            elif isinstance(cmd, Finalize):
                table.log.info(
                    "debate over (%s); finalizing",
                    (table.state.end_reason or EndReason.COMPLETED).value,
                )
                self._publish(
                    table,
                    {
                        "type": "phase",
                        "phase": table.state.phase.value,
                        "endReason": _enum(table.state.end_reason),
                    },
                )
            i += 1
        if prev.phase != table.state.phase:
            self._changed()

    async def _prompt(self, table: Table, cmd: Prompt) -> None:
        state = table.state
        model = state.models.get(cmd.agent)
        label = (
            f"── {cmd.agent} · Round {cmd.marker.round + 1}/{state.total_rounds} ──"
            if cmd.marker.kind == "turn"
            else f"── observer ({cmd.agent}) ──"
        )
        body: dict[str, Any] = {
            "messageID": cmd.message_id,
            "agent": cmd.agent,
            "parts": [
                {"type": "text", "text": cmd.text},
                {
                    "type": "text",
                    "text": label,
                    "ignored": True,
                    "metadata": sign_marker(cmd.marker, state.session_id, self.signer),
                },
            ],
        }
        if model is not None:
            # `model` is sticky per session (API notes §4): always send the seat's own model.
            body["model"] = {"providerID": model.provider_id, "modelID": model.model_id}
        pokes_before = table.pokes
        # Collect the new turn's events from before the server can emit any of them.
        table.mirror = TurnMirror(state.session_id, cmd.message_id, self.stream_epoch)
        try:
            await self.client.prompt_async(state.session_id, body)
        except NotFound:
            table.deleted_hint = True
            table.poke()
            return
        except TransportError as exc:
            # Not retried blindly: the machine re-prompts only if the message is absent.
            table.log.warning("prompt for %s failed: %s", cmd.agent, exc)
            table.poke()
            return
        if table.answering is not None:
            woke_at, busy_at, queued_at = table.answering
            table.answering = None
            busy, queued = table.clock.reading()
            dt = (time.perf_counter() - woke_at) * 1000
            server = (busy - busy_at) * 1000
            table.handoff_ms.append(dt)
            table.handoff_server_ms.append(server)
            self.handoffs.append(dt)
            self.handoff_server.append(server)
            self.handoff_queued.append((queued - queued_at) * 1000)
            if len(self.handoffs) > 100_000:
                del self.handoffs[:50_000]
                del self.handoff_server[:50_000]
                del self.handoff_queued[:50_000]
        table.accepted.add(cmd.message_id)
        if (
            table.pokes == pokes_before
            and table.cancel is None
            and not table.deleted_hint
            and table.error_seen_at is None
        ):
            # Wakes that came in before the prompt was sent were about the turn just recorded
            # (one arriving during the POST may be about the new turn: kept). Re-reading now
            # would only find the new turn not started (and load the server while it runs
            # it). The new turn's own events, deadlines and the resync period still wake the
            # worker.
            table.wake.clear()
            table.woke_at = None
        faults.checkpoint("observer-prompted" if cmd.marker.kind == "observer" else "prompted")
        table.log.debug("prompted %s (%s)", cmd.agent, cmd.message_id)
        self._publish(
            table,
            {
                "type": "prompt",
                "agent": cmd.agent,
                "round": cmd.marker.round + 1,
                "kind": cmd.marker.kind,
            },
        )

    def _on_turn(self, table: Table, entry: HistoryEntry) -> None:
        if has_meta_text(entry.response):
            table.log.warning(
                "%s's %s contains a [ROUNDTABLE META] block: text, never state (ignored)",
                entry.agent,
                "message" if entry.kind == "user" else "reply",
            )
        lg = table.log
        if entry.has_error and table.disposed_at is not None and "Aborted" in (entry.error or ""):
            lg.info(
                "%s (round %d) was aborted by OpenCode: instance disposed (config reload)",
                entry.agent,
                entry.round,
            )
        elif entry.has_error:
            lg.warning(
                "%s (round %d) %s: %s",
                entry.agent,
                entry.round,
                "cut off" if entry.cut_off else "failed",
                entry.error,
                extra={"agent": entry.agent, "round": entry.round},
            )
        else:
            lg.info(
                "%s %s (round %d): %d chars",
                entry.kind,
                entry.agent,
                entry.round,
                len(entry.response),
                extra={"agent": entry.agent, "round": entry.round},
            )
        self._publish(table, {"type": "turn", "entry": entry.dump()})

    # ------------------------------------------------------------------------------------------
    # State blocks
    # ------------------------------------------------------------------------------------------

    async def _create_state_block(self, state: RoundtableState) -> None:
        text, meta = encode_state(persisted_form(state), self.signer)
        assert state.state_message_id and state.state_part_id
        await self.client.post_no_reply(
            state.session_id,
            [
                {
                    "type": "text",
                    "id": state.state_part_id,
                    "text": text,
                    "ignored": True,
                    "metadata": meta,
                }
            ],
            message_id=state.state_message_id,
        )

    async def _persist(self, state: RoundtableState, *, index: bool = False) -> None:
        """Write the state block in place (PATCH of its part); ``index`` also updates the session
        metadata used by the start-up scan (only on phase changes)."""
        text, meta = encode_state(persisted_form(state), self.signer)
        assert state.state_message_id and state.state_part_id
        part = {
            "id": state.state_part_id,
            "sessionID": state.session_id,
            "messageID": state.state_message_id,
            "type": "text",
            "text": text,
            "ignored": True,
            "metadata": meta,
        }
        write = self.client.update_part(state.session_id, state.state_message_id, part)
        if not index:
            await write
            return
        results = await asyncio.gather(
            write,
            self.client.update_session(
                state.session_id,
                metadata=_index_metadata(
                    state.phase,
                    state.state_message_id,
                    state.state_part_id,
                    finalized=state.finalization.toast_done,
                ),
            ),
            return_exceptions=True,
        )
        for res in results:
            if isinstance(res, BaseException):
                raise res

    async def load_state(self, s2: str) -> RoundtableState:
        """Read and authenticate S2's state block.

        Raises:
            NotFound: S2 does not exist.
            StateError: no trusted block (forged, unknown version, corrupt).
        """
        if s2 in self.tables:
            return self.tables[s2].state
        if s2 in self.recent:
            return self.recent[s2].state
        session = await self.client.get_session(s2)
        index = (session.get("metadata") or {}).get(META_KEY)
        if isinstance(index, dict) and index.get("stateMessageID"):
            try:
                msg = await self.client.message(s2, str(index["stateMessageID"]))
                state = self._state_from_message(msg, s2)
                if state is not None:
                    return state
            except NotFound:
                pass
        msgs, _ = await self.client.messages(s2)
        for msg in msgs:
            state = self._state_from_message(msg, s2)
            if state is not None:
                return state
        raise StateError(f"{s2} holds no roundtable state written by this daemon")

    def _state_from_message(self, msg: dict[str, Any], s2: str) -> RoundtableState | None:
        """The trusted state block in ``msg``, if any.

        A block without a valid MAC (pasted by a person, echoed by an agent) is logged and
        ignored. A signed block that cannot be read (unknown version, corrupt) raises
        :class:`StateError`: that roundtable is reported and skipped (issue 4).
        """
        for part in msg.get("parts") or []:
            text = part.get("text")
            if part.get("type") != "text" or not isinstance(text, str) or not has_meta_text(text):
                continue
            try:
                return decode_state(text, part.get("metadata"), s2, self.signer)
            except StateForgedError as exc:
                log.warning(
                    "roundtable %s: ignoring an untrusted [ROUNDTABLE META] block in message %s "
                    "(%s)",
                    s2,
                    (msg.get("info") or {}).get("id"),
                    exc,
                )
        return None

    async def _hide_all(self, s2: str, views: tuple[UserView, ...]) -> None:
        """Mark the visible parts of ``views`` (earlier turn prompts in ``s2``) ``ignored``.

        One view (every handoff) is awaited in this task: ``asyncio.gather`` would wrap it in a
        task of its own and start it one loop iteration later (~1 ms at 20 roundtables). Several
        (after a recovery) go concurrently. All are attempted; the first error is raised after
        (TransportError: the hiding failed; a part already gone is not an error).
        """
        if len(views) == 1:
            await self._hide_view(s2, views[0])
            return
        for res in await asyncio.gather(
            *(self._hide_view(s2, v) for v in views), return_exceptions=True
        ):
            if isinstance(res, BaseException):
                raise res

    async def _hide_view(self, s2: str, view: UserView) -> None:
        for part in view.visible_parts:
            new = dict(part)
            new["ignored"] = True
            with contextlib.suppress(NotFound):
                await self.client.update_part(s2, view.id, new)

    async def _hide_message(self, s2: str, message_id: str) -> None:
        with contextlib.suppress(NotFound):
            msg = await self.client.message(s2, message_id)
            for part in msg.get("parts") or []:
                if part.get("type") == "text" and not part.get("ignored"):
                    new = dict(part)
                    new["ignored"] = True
                    await self.client.update_part(s2, message_id, new)

    # ------------------------------------------------------------------------------------------
    # Finalization and delivery (spec §4 phase 4)
    # ------------------------------------------------------------------------------------------

    def _result_payload(self, state: RoundtableState, deliver: str) -> dict[str, Any]:
        if deliver == "interruption":
            text = prompts.interruption_text(state)
        else:
            text = prompts.result_text(state, usage_footer=state.options.usage_footer)
        return {
            "done": True,
            "sessionID": state.session_id,
            "summary": state.summary or text,
            "text": text,
            "phase": state.phase.value,
            "endReason": _enum(state.end_reason),
            "title": state.title,
        }

    async def _finalize(self, table: Table) -> bool:
        """Level-triggered phase 4. Returns True when every step is done."""
        state = table.state
        deliver = _deliver_kind(state)
        self._release_result(table)
        write_s2 = state.end_reason not in (EndReason.SESSION_DELETED, EndReason.PARENT_DELETED)

        faults.checkpoint("final-persisted")
        if state.delivery.delivered_via is None:
            delivered = await self._deliver(table, deliver)
            if not delivered:
                table.deadline_ms = now_ms() + 1000
                return False
            state = table.state
            if write_s2:
                await self._persist(state)

        if write_s2:
            f = state.finalization
            if f.delimiter_message_id is None or not f.title_done:
                statuses = await self.client.statuses(state.directory)
                if state.session_id in statuses:
                    # Never inject into a busy S2 (a noReply there triggers a model turn).
                    table.deadline_ms = now_ms() + 500
                    return False
            if f.delimiter_message_id is None:
                mid = ids.message_id()
                state = state.model_copy(
                    update={"finalization": f.model_copy(update={"delimiter_message_id": mid})}
                )
                table.state = state
                await self._persist(state)
                await self._post_once(
                    state.session_id,
                    mid,
                    [
                        {"type": "text", "text": DELIMITER_TEXT},
                        {
                            "type": "text",
                            "text": "── roundtable concluded ──",
                            "ignored": True,
                            "metadata": sign_marker(
                                Marker(kind="delimiter", roundtable=state.session_id),
                                state.session_id,
                                self.signer,
                            ),
                        },
                    ],
                )
                faults.checkpoint("delimiter-posted")
            elif not state.finalization.title_done:
                await self._post_once(
                    state.session_id,
                    f.delimiter_message_id,
                    [{"type": "text", "text": DELIMITER_TEXT}],
                )
            if not state.finalization.title_done:
                base = state.title
                while base.endswith(CONCLUDED_SUFFIX):
                    base = base[: -len(CONCLUDED_SUFFIX)]
                await self.client.update_session(state.session_id, title=base + CONCLUDED_SUFFIX)
                faults.checkpoint("title-set")
                state = state.model_copy(
                    update={
                        "finalization": state.finalization.model_copy(update={"title_done": True})
                    }
                )
                table.state = state
        if not state.finalization.toast_done:
            msg = {
                EndReason.SESSION_DELETED: "Roundtable interrupted",
                EndReason.PARENT_DELETED: "Roundtable aborted: its parent session was deleted",
                EndReason.CANCELLED: "Roundtable cancelled",
            }.get(state.end_reason or EndReason.COMPLETED, "Roundtable concluded")
            variant = "success" if msg == "Roundtable concluded" else "warning"
            self._spawn(self._toast(state, f"{msg}: {state.title}", variant))
            state = state.model_copy(
                update={"finalization": state.finalization.model_copy(update={"toast_done": True})}
            )
            table.state = state
            if write_s2:
                await self._persist(state, index=True)
        table.log.info("roundtable %s", state.phase.value)
        return True

    def _release_result(self, table: Table) -> None:
        """Make the result of a debate that is over available to pollers (once).

        For a *completed* debate (the observer answered) this is called as soon as the decision
        to finish is taken, before its state is written: that result is derived from S2's
        messages alone, so a crash before the write makes the same result again, and delivery
        stays exactly-once because a restarted daemon first checks the waiting tool call's part
        in S1 (:meth:`_deliver`). Saves the state write's round trip (~17 ms) on the way to the
        result (issue 5, figure 1). Every other end (a cancel above all) lives only in memory
        until its state is written, so its result is released after the write (regression
        "cancelled result is never released before it is written").
        """
        if table.result is None:
            table.result = self._result_payload(table.state, _deliver_kind(table.state))
            table.done.set()
            table.finished_at = time.monotonic()
            self._publish(table, {"type": "done", **table.result})

    async def _post_once(self, s2: str, message_id: str, parts: list[dict[str, Any]]) -> None:
        """Post a noReply message unless a message with that id already exists."""
        try:
            await self.client.message(s2, message_id)
            return
        except NotFound:
            pass
        await self.client.post_no_reply(s2, parts, message_id=message_id)

    async def _deliver(self, table: Table, deliver: str) -> bool:
        """Deliver the result to S1 exactly once. Returns True when settled."""
        state = table.state
        s1 = state.parent_session_id
        if deliver == "none" or s1 is None:
            self._set_delivery(table, "none")
            return True
        if table.result and table.result.get("consumedByTool"):
            self._set_delivery(table, "tool")
            return True
        # Is a tool call waiting for this result (or did it already return it)?
        if state.delivery.tool_call_id and state.delivery.tool_message_id:
            tool_state, output = await self._tool_state(
                s1, state.delivery.tool_message_id, state.delivery.tool_call_id
            )
            if tool_state == "completed" and state.session_id in output:
                self._set_delivery(table, "tool")  # the shim returned our result
                return True
            if tool_state in ("running", "pending"):
                waited = time.monotonic() - (table.finished_at or time.monotonic())
                if waited < TOOL_POLL_GRACE_S:
                    return False  # the shim will poll and take it
        # Nobody waits: one noReply into S1, only while S1 is idle.
        try:
            statuses = await self.client.statuses(state.directory)
        except NotFound:
            statuses = {}
        if s1 in statuses:
            return False
        mid = state.delivery.no_reply_message_id
        if mid is None:
            mid = ids.message_id()
            state = state.model_copy(
                update={"delivery": state.delivery.model_copy(update={"no_reply_message_id": mid})}
            )
            table.state = state
            if state.end_reason not in (EndReason.SESSION_DELETED, EndReason.PARENT_DELETED):
                await self._persist(state)
        text = (table.result or {}).get("text") or ""
        with contextlib.suppress(NotFound):  # S1 is gone: nothing to deliver to
            await self._post_once(
                s1,
                mid,
                [
                    {"type": "text", "text": text},
                    {
                        "type": "text",
                        "text": f"── roundtable {state.session_id} ──",
                        "ignored": True,
                        "metadata": sign_marker(
                            Marker(kind="result", roundtable=state.session_id), s1, self.signer
                        ),
                    },
                ],
            )
        faults.checkpoint("delivered")
        self._set_delivery(table, "no-reply")
        return True

    def _set_delivery(self, table: Table, via: str) -> None:
        table.state = table.state.model_copy(
            update={"delivery": table.state.delivery.model_copy(update={"delivered_via": via})}
        )

    async def _tool_state(self, s1: str, message_id: str, call_id: str) -> tuple[str | None, str]:
        """Status (pending | running | completed | error) and output of the tool call in S1 that
        started the roundtable; ``(None, "")`` when its message is gone."""
        try:
            msg = await self.client.message(s1, message_id)
        except NotFound:
            return None, ""
        for part in msg.get("parts") or []:
            if part.get("type") == "tool" and part.get("callID") == call_id:
                st = part.get("state") or {}
                return str(st.get("status")), str(st.get("output") or "")
        return "pending", ""

    def take_result(self, s2: str, *, tool_call_id: str | None) -> dict[str, Any] | None:
        """The finished result for a poller; a poll from the waiting tool call consumes it."""
        table = self.tables.get(s2) or self.recent.get(s2)
        if table is None or table.result is None:
            return None
        if (
            tool_call_id
            and tool_call_id == table.state.delivery.tool_call_id
            and table.state.delivery.delivered_via in (None, "tool")
        ):
            table.result["consumedByTool"] = True
            table.poke()
        return table.result

    def note_tool_poll(self, s2: str) -> None:
        """The tool shim is polling for ``s2`` (it is alive)."""
        table = self.tables.get(s2)
        if table is not None:
            table.tool_polled_at = time.monotonic()

    def _retire(self, table: Table) -> None:
        s2 = table.state.session_id
        if self.tables.get(s2) is table:
            del self.tables[s2]
        parent = table.state.parent_session_id
        if parent and parent in self.by_parent:
            self.by_parent[parent].discard(s2)
            if not self.by_parent[parent]:
                del self.by_parent[parent]
        for child, owner in list(self.descendants.items()):
            if owner == s2:
                del self.descendants[child]
        self.recent[s2] = table
        while len(self.recent) > RECENT_MAX:
            self.recent.popitem(last=False)
        self._changed()

    # ------------------------------------------------------------------------------------------
    # Permissions and questions (issue 3, behaviour 12; regressions 3 and 4)
    # ------------------------------------------------------------------------------------------

    async def _owner(self, session_id: str) -> Table | None:
        if session_id in self.tables:
            return self.tables[session_id]
        if session_id in self.descendants:
            return self.tables.get(self.descendants[session_id])
        # Unknown session: walk up its parents (a grandchild of S2 raised by a task subagent).
        chain: list[str] = []
        current = session_id
        for _ in range(4):
            try:
                info = await self.client.get_session(current)
            except TransportError:
                return None
            parent = info.get("parentID")
            if not parent:
                return None
            chain.append(current)
            if parent in self.tables:
                for c in chain:
                    self.descendants[c] = parent
                return self.tables[parent]
            current = str(parent)
        return None

    async def _on_permission(self, event: ev.Event) -> None:
        props = event.properties
        await self._answer_permission(props, event.directory)

    async def _request_owner(self, props: dict[str, Any]) -> tuple[str, Table] | None:
        """``(request id, roundtable)`` of a permission/question request raised in one of our
        sessions (S2 or a sub-session of it) and not answered yet; ``None`` otherwise."""
        rid = props.get("id")
        sid = props.get("sessionID")
        if not isinstance(rid, str) or not isinstance(sid, str) or rid in self.handled_requests:
            return None
        table = await self._owner(sid)
        return None if table is None else (rid, table)

    async def _answer_permission(self, props: dict[str, Any], directory: str | None) -> None:
        owned = await self._request_owner(props)
        if owned is None:
            return
        rid, table = owned
        policy = table.state.options.permission_policy
        what = f"{props.get('permission')} {props.get('patterns') or ''}".strip()
        if policy == PermissionPolicy.ASK:
            self.handled_requests.add(rid)
            await self._toast(
                table.state,
                f"A roundtable seat asks for permission: {what}. "
                "Answer it in the session; the turn waits (bounded by the turn "
                "timeout).",
                "warning",
            )
            return
        reply = "once" if policy == PermissionPolicy.ALLOW_ONCE else "reject"
        message = (
            None
            if reply == "once"
            else (
                "No human is at this roundtable to approve tools; roundtabled's permission policy "
                "is 'reject'. Continue the debate without this tool."
            )
        )
        try:
            await self.client.reply_permission(
                rid, reply, message, directory=directory or table.state.directory
            )
            self.handled_requests.add(rid)
            table.log.info("permission %s for %s answered %s", rid, what, reply)
        except TransportError as exc:
            table.log.warning("could not answer permission %s: %s", rid, exc)

    async def _on_question(self, event: ev.Event) -> None:
        await self._answer_question(event.properties, event.directory)

    async def _answer_question(self, props: dict[str, Any], directory: str | None) -> None:
        owned = await self._request_owner(props)
        if owned is None:
            return
        rid, table = owned
        where = directory or table.state.directory
        questions = props.get("questions")
        count = len(questions) if isinstance(questions, list) and questions else 1
        try:
            # An answer the model can read (a bare reject only says "dismissed"); the turn goes on.
            await self.client.answer_question(rid, [[NO_HUMAN_ANSWER]] * count, directory=where)
            self.handled_requests.add(rid)
            table.log.info("answered a question tool call: no human is at the table")
            return
        except TransportError as exc:
            table.log.debug("question %s: answer refused (%s); rejecting it", rid, exc)
        try:
            await self.client.reject_question(rid, directory=where)
            self.handled_requests.add(rid)
            table.log.info("rejected a question tool call: no human is at the table")
        except TransportError as exc:
            table.log.warning("could not reject question %s: %s", rid, exc)

    async def sweep_requests(self) -> None:
        """Answer pending permission/question requests of our sessions (after a restart or a
        reconnect, events about them may have been missed)."""
        dirs = {t.state.directory for t in self.tables.values()}
        for d in dirs:
            try:
                for req in await self.client.permissions(d):
                    await self._answer_permission(req, d)
                for req in await self.client.questions(d):
                    await self._answer_question(req, d)
            except TransportError as exc:
                log.debug("request sweep of %s failed: %s", d, exc)

    # ------------------------------------------------------------------------------------------
    # Start-up recovery (spec §7.8, beyond the seed: resume automatically)
    # ------------------------------------------------------------------------------------------

    async def recover(self) -> dict[str, int]:
        """Find every roundtable left active (or not finalized) and resume it; abort those whose
        parent is gone. Returns counters ``{"resumed", "aborted", "skipped", "scanned"}``.
        Bounded concurrency against the server (``recovery_concurrency``)."""
        counters = {"resumed": 0, "aborted": 0, "skipped": 0, "scanned": 0}
        directories = set(self.settings.directories) | self._known_directories()
        try:
            path = await self.client._request("GET", "/path")
            server_dir = (path[0] or {}).get("directory")
            if isinstance(server_dir, str):
                directories.add(server_dir)
        except TransportError:
            pass
        candidates: list[dict[str, Any]] = []
        for d in sorted(directories):
            try:
                sessions = await self.client.list_sessions(d)
            except TransportError as exc:
                log.warning("recovery: cannot list sessions of %s: %s", d, exc)
                continue
            counters["scanned"] += len(sessions)
            for s in sessions:
                idx = (s.get("metadata") or {}).get(META_KEY)
                if not isinstance(idx, dict):
                    continue
                if idx.get("phase") in ("active", "observing") or not idx.get("finalized", True):
                    candidates.append(s)
        sem = asyncio.Semaphore(self.settings.recovery_concurrency)

        async def one(session: dict[str, Any]) -> None:
            async with sem:
                outcome = await self._recover_one(session)
                counters[outcome] += 1

        await asyncio.gather(*(one(s) for s in candidates))
        resumed = counters["resumed"]
        if resumed:
            log.info(
                "recovery: resumed %d roundtable(s), aborted %d, skipped %d",
                resumed,
                counters["aborted"],
                counters["skipped"],
            )
        return counters

    async def _recover_one(self, session: dict[str, Any]) -> str:
        s2 = str(session["id"])
        if s2 in self.tables:
            return "skipped"
        try:
            state = await self.load_state(s2)
        except (StateError, TransportError) as exc:
            log.error("recovery: roundtable %s skipped: %s", s2, exc)
            return "skipped"
        if not state.active and state.finalization.toast_done:
            return "skipped"
        if state.parent_session_id:
            try:
                await self.client.get_session(state.parent_session_id)
            except NotFound:
                with contextlib.suppress(TransportError):
                    await self.client.abort(s2)
                state = state.model_copy(
                    update={
                        "phase": Phase.ABORTED,
                        "end_reason": EndReason.PARENT_DELETED,
                        "pending": None,
                    }
                )
                state = state.model_copy(
                    update={
                        "finalization": state.finalization.model_copy(update={"toast_done": True})
                    }
                )
                with contextlib.suppress(TransportError):
                    await self._persist(state, index=True)
                log.info("recovery: roundtable %s aborted (its parent session is gone)", s2)
                return "aborted"
        messages = await self._read_all(state)
        _warn_pasted_meta(s2, messages, state.state_message_id)
        views = [machine.message_view(m, s2, self.signer) for m in messages]
        state = state.model_copy(update={"history": machine.rebuild_history(state, views)})
        table = self._adopt(state)
        if state.active:
            table.log.info(
                "recovery: resuming at round %d, %s",
                state.current_round + 1,
                state.agents[state.current_agent_index]
                if state.phase == Phase.ACTIVE
                else "observer",
            )
            self._spawn(
                self._toast(state, f"Roundtable resumed after a restart: {state.title}", "info")
            )
        self._run(table)
        return "resumed"

    def _known_directories(self) -> set[str]:
        path = self._directories_file()
        if path is None:
            return set()
        try:
            data = json.loads(path.read_text())
            return {str(d) for d in data if isinstance(d, str)}
        except (OSError, ValueError):
            return set()

    def _directories_file(self) -> Path | None:
        return self.settings.state_dir / "directories.json" if self.settings.state_dir else None

    def _remember_directory(self, directory: str | None) -> None:
        path = self._directories_file()
        if path is None or not directory:
            return
        known = self._known_directories()
        if directory in known:
            return
        known.add(directory)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(orjson.dumps(sorted(known)))
            tmp.replace(path)
        except OSError as exc:
            log.warning("cannot record directory %s: %s", directory, exc)

    # ------------------------------------------------------------------------------------------
    # Progress, status, shutdown
    # ------------------------------------------------------------------------------------------

    def subscribe(self, s2: str) -> asyncio.Queue[dict[str, Any]]:
        """A bounded queue of progress events of ``s2`` (``turn``, ``prompt``, ``phase``,
        ``done``).

        Raises:
            ValidationFailed: unknown roundtable.
        """
        table = self.tables.get(s2) or self.recent.get(s2)
        if table is None:
            raise ValidationFailed("sessionID", f"no roundtable {s2!r} is known to this daemon")
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue(PROGRESS_QUEUE_MAX)
        table.subscribers.append(q)
        if table.result is not None:
            q.put_nowait({"type": "done", **table.result})
        return q

    def unsubscribe(self, s2: str, q: asyncio.Queue[dict[str, Any]]) -> None:
        """Stop feeding ``q``."""
        table = self.tables.get(s2) or self.recent.get(s2)
        if table is not None and q in table.subscribers:
            table.subscribers.remove(q)

    def _publish(self, table: Table, item: dict[str, Any]) -> None:
        for q in list(table.subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                q.put_nowait(item)

    async def stored_status(self, s2: str) -> dict[str, Any] | None:
        """Status of a roundtable this process does not hold in memory (concluded before a
        restart), read from its signed state block in S2; ``None`` if it is not one."""
        try:
            state = await self.load_state(s2)
        except (StateError, NotFound):
            return None
        return status_of(Table(state=state))

    def status(self, s2: str) -> dict[str, Any] | None:
        """Status of a roundtable (control API ``GET /v1/roundtables/{ses}``)."""
        table = self.tables.get(s2) or self.recent.get(s2)
        if table is None:
            return None
        return status_of(table)

    def list_status(self) -> list[dict[str, Any]]:
        """Active then recent roundtables."""
        out = [status_of(t) for t in self.tables.values()]
        out += [status_of(t) for t in reversed(self.recent.values())]
        return out

    async def wait_result(self, s2: str, timeout: float) -> dict[str, Any] | None:
        """Wait up to ``timeout`` seconds for ``s2`` to finish; its result or ``None``.

        Raises:
            ValidationFailed: unknown roundtable.
        """
        table = self.tables.get(s2) or self.recent.get(s2)
        if table is None:
            raise ValidationFailed("sessionID", f"no roundtable {s2!r} is known to this daemon")
        if table.result is None and timeout > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(table.done.wait(), timeout)
        return table.result

    async def close(self, window: float = 8.0) -> None:
        """Stop all workers within ``window`` seconds, then write the state of every roundtable
        whose state write after a fast handoff was still deferred (within the rest of the
        window), so that S2's state block names the turn in flight. A cancelled worker resumes
        after a restart either way (a stale block is caught up from the prompts' markers)."""
        deadline = time.monotonic() + window
        self._closing = True
        tasks = [t.task for t in self.tables.values() if t.task is not None]
        for t in tasks:
            t.cancel()
        for b in list(self._bg):
            b.cancel()
        if tasks or self._bg:
            await asyncio.wait([*tasks, *self._bg], timeout=window)
        stale = [t for t in self.tables.values() if t.unpersisted and t.state.active]
        if stale:
            flush = asyncio.gather(*(self._persist(t.state) for t in stale), return_exceptions=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(flush, max(0.5, deadline - time.monotonic()))
            for tb in stale:
                tb.unpersisted = False

    def _spawn(self, coro: Awaitable[Any]) -> None:
        async def guarded() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("background task failed")

        task = asyncio.create_task(guarded())
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    async def _toast(self, state: RoundtableState, message: str, variant: str) -> None:
        with contextlib.suppress(TransportError):
            await self.client.toast(
                message, title="Roundtable", variant=variant, directory=state.directory
            )

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()


def status_of(table: Table) -> dict[str, Any]:
    """JSON status of one roundtable (control API, CLI ``status``/``list``)."""
    st = table.state
    usage = prompts.usage_table(st.history)
    pend = st.pending
    return {
        "sessionID": st.session_id,
        "parentSessionID": st.parent_session_id,
        "directory": st.directory,
        "title": st.title,
        "prompt": st.prompt,
        "phase": st.phase.value,
        "round": min(st.current_round + 1, st.total_rounds),
        "totalRounds": st.total_rounds,
        "agent": pend.agent if pend else None,
        "agents": st.agents,
        "observer": st.observer,
        # A finished roundtable's elapsed time stops at its last update.
        "elapsed": round(((now_ms() if st.active else st.updated_at) - st.created_at) / 1000, 1)
        if st.created_at
        else None,
        "endReason": _enum(st.end_reason),
        "finalized": st.finalization.toast_done,
        "delivered": st.delivery.delivered_via,
        "errors": st.errors,
        "turns": len(st.seat_turns()),
        "usage": {
            "perAgent": {k: v.dump() for k, v in usage["perAgent"].items()},
            "perRound": {str(k): v.dump() for k, v in usage["perRound"].items()},
            "total": usage["total"].dump(),
        },
        "summary": st.summary,
    }


def _enum(value: Any) -> Any:
    return value.value if value is not None else None


def _deliver_kind(state: RoundtableState) -> str:
    if state.end_reason == EndReason.PARENT_DELETED:
        return "none"
    if state.end_reason == EndReason.SESSION_DELETED:
        return "interruption"
    return "result"


def _warn_pasted_meta(
    s2: str, messages: list[dict[str, Any]], state_message_id: str | None
) -> None:
    """Log each user message of S2 (other than the state block) holding a [ROUNDTABLE META]
    block: pasted by a person, it is text, never state (issue 4)."""
    for m in messages:
        info = m.get("info") or {}
        if info.get("role") != "user" or info.get("id") == state_message_id:
            continue
        for p in m.get("parts") or []:
            if p.get("type") == "text" and has_meta_text(str(p.get("text") or "")):
                log.warning(
                    "roundtable %s: ignoring an untrusted [ROUNDTABLE META] block pasted into "
                    "message %s (text, never state)",
                    s2,
                    info.get("id"),
                )
                break


def _completed_assistant(event: ev.Event) -> bool:
    info = event.properties.get("info")
    return (
        isinstance(info, dict)
        and info.get("role") == "assistant"
        and bool((info.get("time") or {}).get("completed"))
    )


def _model_ref(value: Any) -> ModelRef | None:
    """A model from ``GET /agent`` (``{providerID, modelID}``) or config (``"provider/model"``)."""
    if isinstance(value, dict):
        prov = value.get("providerID")
        mid = value.get("modelID") or value.get("id")
        if isinstance(prov, str) and isinstance(mid, str):
            return ModelRef(providerID=prov, modelID=mid)
    if isinstance(value, str) and "/" in value:
        prov, _, mid = value.partition("/")
        return ModelRef(providerID=prov, modelID=mid)
    return None


def _index_metadata(
    phase: Phase, state_msg: str, state_part: str, *, finalized: bool
) -> dict[str, Any]:
    return {
        META_KEY: {
            "v": STATE_VERSION,
            "phase": phase.value,
            "stateMessageID": state_msg,
            "statePartID": state_part,
            "finalized": finalized,
        }
    }


class _TableAdapter(logging.LoggerAdapter[logging.Logger]):
    """Prefixes ``[ses_… r2 dev]`` and adds ``session_id``, ``round`` and ``agent`` fields (issue 6:
    every line about a roundtable carries them; JSON logs show them as fields)."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        table: Table = (self.extra or {})["table"]  # type: ignore[assignment]
        st = table.state
        extra = kwargs.setdefault("extra", {})
        # A line about a finished turn names that turn (``extra={"agent", "round"}``), not the
        # turn in flight when it is logged.
        extra.setdefault("agent", st.pending.agent if st.pending else None)
        extra.setdefault("round", min(st.current_round + 1, st.total_rounds))
        extra["session_id"] = st.session_id
        return f"[{st.session_id} r{extra['round']} {extra['agent'] or '-'}] {msg}", kwargs
