"""The 2.x shell: runs a roundtable on OpenCode 2.x through the server port, with the same core.

OpenCode 2.x has none of what the 1.x shell (:mod:`roundtabled.engine.worker`, ``handoff``,
``mirror``, ``store``) is built on: no message edit (no ``ignored`` parts, no PATCH hiding), no
``noReply``, no ``message.updated`` of whole messages to mirror. So this shell sits beside the
1.x one and drives the same decisions (:func:`roundtabled.core.machine.decide`) through the port
(:class:`~roundtabled.opencode.port.V2Port`, docs/design.md "The server port" and "The 2.x
shell"):

- a turn's end is the port's ``turn_ended`` hint (one per execution): it only wakes the
  roundtable, which then reads the pending turn's :class:`~roundtabled.core.server_records.
  TurnOutcome` and hands the machine an :class:`~roundtabled.core.commands.Observation` built
  from it (:func:`observation_of`): the pending prompt and, once the turn is over, one reply
  carrying the outcome's text, finish, error and tokens;
- a :class:`~roundtabled.core.commands.Prompt` is ``start_turn`` as the seat's agent on the seat's
  model, its id derived from the turn key (:func:`keyed`: a second send of the same turn is the
  same prompt on 2.x), the turn header as its label and the signed marker in its metadata;
- :class:`~roundtabled.core.commands.PersistState` writes the signed state into S2's metadata
  together with the ids the plugin is to keep out of later requests (``roundtabled.hidden``,
  docs/plugin.md "OpenCode 2.x"), in one PATCH (one writer per roundtable);
- ``Abort`` is the port's interrupt; a ``Toast`` cannot be shown (said once in the notes);
- the end: the result released to pollers, the final state written, S2's title concluded.

What this shell refuses, one line each (:func:`refusal`): an extension, the independent opening,
``context: "recent"``, a start without a parent session. Not done yet: delivery of the result
into S1 when no caller polls for it, and the start-up recovery from S2's metadata.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from typing import Any

from roundtabled.core import failures, lifecycle, machine, prompts
from roundtabled.core.commands import (
    Abort,
    Cancel,
    Decision,
    Finalize,
    Observation,
    PersistState,
    Prompt,
    ReleaseResult,
    Toast,
    TurnRecorded,
    join_cancel,
)
from roundtabled.core.events import Event
from roundtabled.core.server_records import SessionRef, SignedState, TurnKey, TurnOutcome
from roundtabled.core.server_records import TurnStatus as TS
from roundtabled.core.state import (
    BUILTIN_OBSERVER,
    CONCLUDED_SUFFIX,
    META_KEY,
    Delivery,
    EndReason,
    Marker,
    ModelRef,
    Options,
    Phase,
    RoundtableState,
    Signer,
    Usage,
    decode_state,
    encode_state,
    observer_agent_of,
    sign_marker,
)
from roundtabled.core.validation import RoundtableRequest, check_agents
from roundtabled.core.wire import AnswerView, MessageView, UserView
from roundtabled.engine.recovery import known_directories, remember_directory
from roundtabled.engine.settings import Settings
from roundtabled.engine.shell import Clock, now_ms
from roundtabled.engine.table import Table, status_of
from roundtabled.errors import NotFound, RoundtableError, StateError, ValidationFailed
from roundtabled.opencode.port import V2Port, v2_prompt_id

__all__ = ["V2Runner", "keyed", "observation_of", "refusal"]

log = logging.getLogger("roundtabled.engine.v2")

PLUGIN_SIGNAL = "v2"
"""What the 2.x shell hands the machine as the plugin's signal: on 2.x only the roundtabled
plugin can keep a turn out of a later request, so every turn is planned in plugin mode and the
ids to hide are written where the plugin reads them."""


def refusal(req: RoundtableRequest) -> ValidationFailed | None:
    """Why OpenCode 2.x cannot run ``req`` yet, naming the field, or ``None``."""
    if req.extend:
        return ValidationFailed(
            "sessionID", "sessionID: extending a roundtable is not supported on OpenCode 2.x yet"
        )
    if req.dry_run:
        return ValidationFailed(
            "dryRun", "dryRun: the plan is not read from OpenCode 2.x yet; start without it"
        )
    if req.protocol not in (None, "debate"):
        return ValidationFailed(
            "protocol",
            f"protocol: '{req.protocol}' is not supported on OpenCode 2.x yet (it runs round 1 "
            "in sessions of its own); use 'debate'",
        )
    if req.opening == "independent":
        return ValidationFailed(
            "opening",
            "opening: 'independent' is not supported on OpenCode 2.x yet (it runs round 1 in "
            "sessions of its own); use 'sequential'",
        )
    if req.context == "recent":
        return ValidationFailed(
            "context",
            "context: 'recent' is not supported on OpenCode 2.x yet (its digest of the hidden "
            "rounds is not written for 2.x); use 'full'",
        )
    if not req.parent_session_id:
        return ValidationFailed(
            "parentSessionID",
            "parentSessionID: OpenCode 2.x runs a roundtable in a child session of the asking "
            "session; give the session's id",
        )
    return None


def turn_key(state: RoundtableState) -> TurnKey:
    """The key of the pending turn: its round, its seat (``-1`` for the observer, ``-2`` for
    the observer's repair turn) and its attempt (the machine's re-prompts)."""
    pend = state.pending
    assert pend is not None
    seat = pend.seat if pend.kind == "turn" else min(pend.seat, TurnKey.OBSERVER)
    return TurnKey(state.session_id, pend.round, seat, pend.reprompts)


def keyed(d: Decision) -> Decision:
    """``d`` with a sent prompt's id derived from its turn key (:func:`~roundtabled.opencode.port.
    v2_prompt_id`), in the command and in the pending turn alike: on 2.x the id names the turn,
    so a second send after a crash is no second turn."""
    pend = d.state.pending
    if pend is None:
        return d
    for i, cmd in enumerate(d.commands):
        if isinstance(cmd, Prompt) and cmd.message_id == pend.message_id:
            mid = v2_prompt_id(turn_key(d.state))
            d.commands[i] = dc_replace(cmd, message_id=mid)
            d.state = d.state.model_copy(
                update={"pending": pend.model_copy(update={"message_id": mid})}
            )
    return d


def observation_of(
    state: RoundtableState, out: TurnOutcome | None, now: int, *, accepted: bool
) -> Observation:
    """The machine's observation of S2 from the pending turn's outcome (``None``: nothing
    pending). A turn that is over is one completed reply: the outcome's text, tokens (unknown
    stays 0 = "not reported", never a measured count), finish, and error (an interrupted turn
    reads as 1.x's abort, ``MessageAbortedError``)."""
    pend = state.pending
    base = Observation(now=now, status="idle", new_id=f"pending-{now}", plugin=PLUGIN_SIGNAL)
    if pend is None or out is None:
        return base
    if out.status is TS.MISSING:
        return dc_replace(base, accepted=accepted)
    marker = Marker(
        kind=pend.kind,
        round=pend.round,
        seat=pend.seat,
        agent=pend.agent,
        roundtable=state.session_id,
    )
    prompt = UserView(
        id=pend.message_id,
        created=pend.prompted_at or now,
        marker=marker,
        text="",
        visible_parts=({"type": "text"},),
    )
    if not out.over:
        return dc_replace(base, status="busy", messages=(prompt,), pending_found=True)
    error_name: str | None = None
    finish = out.finish if out.finish not in (None, "tool-calls", "unknown") else "stop"
    if out.status is TS.FAILED:
        error_name = "OpenCodeError"
    elif out.status is TS.INTERRUPTED:
        error_name = "MessageAbortedError"
    reply = AnswerView(
        id=f"{pend.message_id}-reply",
        parent_id=pend.message_id,
        agent=out.agent or pend.agent,
        created=now,
        completed=True,
        finish=finish,
        error_name=error_name,
        error_message=out.error,
        text=out.text,
        tool_calls=(),
        files=(),
        usage=Usage(input=out.tokens_in or 0, output=out.tokens_out or 0),
        summary=False,
    )
    views: tuple[MessageView, ...] = (prompt, reply)
    return dc_replace(base, messages=views, pending_found=True)


@dataclass
class _Run:
    """One roundtable this shell drives."""

    state: RoundtableState
    s2: SessionRef
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    deadline_ms: int | None = None
    accepted: set[str] = field(default_factory=set)
    result: dict[str, Any] | None = None
    cancel: Cancel | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    finalized: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class V2Runner:
    """Runs roundtables on one OpenCode 2.x server.

    Args:
        port: the server's port.
        signer: signs the state and the markers (as on 1.x).
        settings: the engine's settings (a roundtable's defaults, ``resync_period`` seconds).
        clock: epoch milliseconds.
    """

    def __init__(
        self, port: V2Port, signer: Signer, settings: Settings, clock: Clock = now_ms
    ) -> None:
        self.port = port
        self.signer = signer
        self.settings = settings
        self.clock = clock
        self.tables: dict[str, _Run] = {}

    def on_event(self, event: Event) -> None:
        """An event of the 2.x stream: an execution's end wakes its roundtable (a hint only)."""
        sid = self.port.turn_ended(event)
        run = self.tables.get(sid) if sid else None
        if run is not None:
            run.wake.set()

    async def recover(self, directories: Iterable[str] = ()) -> int:
        """Resume the roundtables left unfinished in ``directories`` and in the directories of
        earlier roundtables (remembered under the state directory; a daemon restarted, or
        killed): each one's signed state is read from S2's metadata and its loop started; the
        first pass reads the pending turn's outcome and decides, as after any wake (a turn sent
        again has the same id: no second turn). A block that does not authenticate is skipped
        with a warning. Returns how many were resumed."""
        resumed = 0
        known = known_directories(self.settings.state_dir)
        for directory in dict.fromkeys([*directories, *self.settings.directories, *known]):
            for s2 in await self.port.unfinished(directory):
                if s2.id in self.tables:
                    continue
                try:
                    block = (await self.port.read_state(s2))[0]
                    state = decode_state(block.text, block.metadata, s2.id, self.signer)
                except (IndexError, StateError) as exc:
                    log.warning("%s: holds no roundtable state of this daemon: %s", s2.id, exc)
                    continue
                if not state.active:
                    continue
                run = _Run(state, s2)
                self.tables[s2.id] = run
                run.wake.set()  # the first pass decides from a read at once
                run.task = asyncio.create_task(self._loop(run), name=f"roundtable-v2-{s2.id}")
                resumed += 1
                log.info("%s: roundtable resumed after a restart", s2.id)
        return resumed

    async def on_connect(self) -> None:
        """After every (re)connect of the event stream: wake every roundtable (no replay)."""
        for run in self.tables.values():
            run.wake.set()

    async def agent_list(self, directory: str | None) -> list[dict[str, Any]]:
        """The directory's agents as the control API lists them (``name``, ``mode``, ``color``,
        ``model`` as ``provider/model``, ``hidden``)."""
        return [
            {
                "name": a.id,
                "mode": a.mode,
                "color": a.color,
                "model": a.model.label() if a.model else None,
                "hidden": a.hidden,
            }
            for a in await self.port.agents(directory or "")
        ]

    async def _models(self, req: RoundtableRequest, directory: str | None) -> dict[str, ModelRef]:
        assert req.agents is not None
        records = await self.port.agents(directory or "")
        agents = {a.id: a for a in records}
        check_agents(
            req.agents,
            req.observer,
            [{"name": a.id, "hidden": a.hidden, "mode": a.mode} for a in records],
        )
        observer = observer_agent_of(req.observer or BUILTIN_OBSERVER)
        models: dict[str, ModelRef] = {}
        default: ModelRef | None = None
        for name in dict.fromkeys([*req.agents, observer]):
            agent = agents.get(name)
            if agent is None:
                field_name = "agents" if name in req.agents else "observer"
                raise ValidationFailed(
                    field_name,
                    f"{field_name}: no agent {name!r} in this project; available: "
                    + ", ".join(sorted(a for a, r in agents.items() if not r.hidden)),
                )
            if agent.model is None and default is None:
                d = await self.port.client.default_model(directory)
                default = ModelRef(providerID=d.provider_id, modelID=d.id)
            models[name] = agent.model or default  # type: ignore[assignment]
        return models

    async def start(self, req: RoundtableRequest) -> RoundtableState:
        """Start ``req`` and return its state once turn 1 is sent.

        Raises:
            ValidationFailed: what 2.x cannot run yet (:func:`refusal`), an unknown agent.
            TransportError: the server could not be reached.
        """
        refused = refusal(req)
        if refused is not None:
            raise refused
        assert req.agents is not None and req.parent_session_id is not None
        parent = await self.port.session(req.parent_session_id)
        directory = req.directory or parent.directory
        models = await self._models(req, directory)
        now = self.clock()
        title = req.title or prompts.default_title(req.prompt)
        s2 = await self.port.create_child(
            parent, title, None, {META_KEY: {"phase": Phase.ACTIVE.value, "hidden": []}}
        )
        defaults = self.settings.roundtable
        options = Options(
            turn_timeout=req.turn_timeout or defaults.turn_timeout,
            loop_threshold=defaults.loop_threshold,
            permission_policy=req.permission_policy or defaults.permission_policy,
            usage_footer=defaults.usage_footer,
            hide_past_prompts=True,
            until=req.until or defaults.until,
            budget=req.budget,
            opening="sequential",
            context="full",
            preset=req.preset,
            sides=dict(req.sides or {}),
            call_started_at=now,
        )
        observer_agent = observer_agent_of(req.observer or BUILTIN_OBSERVER)
        state = RoundtableState(
            notes=list(self.port.capabilities.limits()),
            # 2.x's records carry no price: every seat's cost is unknown, never a measured 0
            unpriced=sorted({*req.agents, observer_agent}),
            sessionID=s2.id,
            parentSessionID=parent.id,
            directory=s2.directory or directory,
            title=title,
            agents=list(req.agents),
            models=models,
            total_rounds=req.rounds,
            observer=req.observer or BUILTIN_OBSERVER,
            prompt=req.prompt,
            delivery=Delivery(toolCallID=req.tool_call_id, toolMessageID=req.tool_message_id),
            options=options,
            created_at=now,
            updated_at=now,
        )
        remember_directory(self.settings.state_dir, state.directory)
        run = _Run(state, s2)
        self.tables[s2.id] = run
        first = keyed(machine.decide(state, observation_of(state, None, now, accepted=False)))
        await self._execute(run, first)
        run.task = asyncio.create_task(self._loop(run), name=f"roundtable-v2-{s2.id}")
        return run.state

    async def _loop(self, run: _Run) -> None:
        """Wake, read, decide, execute until the roundtable is over. A failed pass goes to the
        same failure policy as on 1.x (docs/design.md, "Failures of the worker"): retried with
        backoff, or the roundtable ends as failed and its result is released with the reason."""
        policy = failures.FailurePolicy()
        while run.state.active:
            await self._sleep(run)
            try:
                await self._step(run)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                out = policy.failed(exc)
                if not out.give_up:
                    log.warning(
                        "%s: a pass failed, retrying in %.1f s: %s", run.s2.id, out.delay_s, exc
                    )
                    await asyncio.sleep(out.delay_s)
                    run.wake.set()
                    continue
                assert out.reason is not None
                log.error("%s: roundtable failed: %s", run.s2.id, out.reason)
                run.state = failures.ended(run.state, out.reason, self.clock())
                await self._finish_failed(run)
                return
            policy.succeeded()

    async def _finish_failed(self, run: _Run) -> None:
        """The end of a roundtable the failure policy ended: the result (with the reason) to
        pollers first, then the state and the title, each only if S2 takes it."""
        self._release(run)
        for write in (self._write, self._conclude):
            try:
                await write(run)
            except RoundtableError as exc:
                log.warning("%s: could not write the end into S2: %s", run.s2.id, exc)

    async def _conclude(self, run: _Run) -> None:
        """S2's title ends ``· CONCLUDED`` (not for a deleted S2 or S1: nothing is written)."""
        if run.state.end_reason not in (EndReason.SESSION_DELETED, EndReason.PARENT_DELETED):
            await self.port.client.update_session(
                run.s2.id, title=run.state.title + CONCLUDED_SUFFIX
            )
        run.finalized.set()

    async def _gone(self, run: _Run) -> tuple[bool, bool]:
        """``(S2 or S1 is gone, S1 is gone)``: a 404 is a deletion, never an end."""
        gone: list[bool] = []
        for sid in (run.s2.id, run.state.parent_session_id):
            try:
                if sid:
                    await self.port.session(sid)
                gone.append(False)
            except NotFound:
                gone.append(True)
        return gone[0] or gone[1], gone[1]

    async def _sleep(self, run: _Run) -> None:
        timeout = self.settings.resync_period
        if run.deadline_ms is not None:
            timeout = min(timeout, max(0.0, (run.deadline_ms - self.clock()) / 1000))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await run.wake.wait()
        run.wake.clear()

    async def _step(self, run: _Run) -> None:
        state = run.state
        out = None
        deleted: tuple[bool, bool] = (False, False)
        try:
            if state.pending is not None:
                out = await self.port.turn_outcome(run.s2, state.pending.message_id)
            else:
                await self.port.session(run.s2.id)
        except NotFound:
            deleted = await self._gone(run)
            if not deleted[0]:
                raise
        accepted = state.pending is not None and state.pending.message_id in run.accepted
        obs = observation_of(state, out, self.clock(), accepted=accepted)
        if deleted[0]:
            obs = dc_replace(obs, status="unknown", deleted=True, parent_deleted=deleted[1])
        cancel, run.cancel = run.cancel, None
        if cancel is not None and state.end_reason != EndReason.CANCELLED:
            obs = dc_replace(obs, cancel=cancel)
        await self._execute(run, keyed(machine.decide(state, obs)))

    async def _write(self, run: _Run) -> None:
        text, meta = encode_state(run.state, self.signer)
        await self.port.write_state(
            run.s2,
            SignedState(text, meta),
            hidden=run.state.unhidden,
            phase=run.state.phase.value,
        )

    async def _execute(self, run: _Run, d: Decision) -> None:
        run.state = d.state
        run.deadline_ms = d.wake_at
        for cmd in d.commands:
            if isinstance(cmd, PersistState):
                await self._write(run)
            elif isinstance(cmd, Prompt):
                if cmd.persist_first:
                    await self._write(run)
                if cmd.send:
                    key = turn_key(run.state)
                    marker = sign_marker(cmd.marker, run.s2.id, self.signer)
                    await self.port.start_turn(
                        run.s2,
                        cmd.agent,
                        run.state.models.get(cmd.agent),
                        cmd.text,
                        key,
                        label=key.header(cmd.agent),
                        marker=marker,
                    )
                    run.accepted.add(cmd.message_id)
                if not cmd.persist_first:
                    await self._write(run)
            elif isinstance(cmd, Abort):
                with contextlib.suppress(NotFound):  # a deleted S2 runs nothing any more
                    await self.port.abort(run.s2)
            elif isinstance(cmd, Toast):
                await self.port.notify(
                    run.state.directory or "", "Roundtable", cmd.message, cmd.variant
                )
            elif isinstance(cmd, ReleaseResult):
                self._release(run)
            elif isinstance(cmd, Finalize):
                self._release(run)
                await self._conclude(run)
            elif isinstance(cmd, TurnRecorded):
                log.info(
                    "%s: %s round %d %s",
                    run.s2.id,
                    cmd.entry.agent,
                    cmd.entry.round,
                    "failed: " + (cmd.entry.error or "") if cmd.entry.has_error else "answered",
                )

    def _release(self, run: _Run) -> None:
        if run.result is None:
            run.result = lifecycle.result_payload(run.state)
            run.done.set()

    def active(self) -> int:
        """How many roundtables this shell is driving now."""
        return sum(1 for r in self.tables.values() if r.task is not None and not r.task.done())

    def status(self, s2: str) -> dict[str, Any] | None:
        """The status of roundtable ``s2`` (``None``: not known here), with its result once it
        is over (docs/control-api.md)."""
        run = self.tables.get(s2)
        if run is None:
            return None
        # The same fields as on 1.x (one status for both majors); what the 2.x shell decides
        # itself: finalized (its end is over) and the result it released.
        out = status_of(Table(state=run.state), self.clock())
        out["finalized"] = run.finalized.is_set()
        out["result"] = run.result["result"] if run.result else None
        return out

    def take_result(self, s2: str) -> dict[str, Any] | None:
        """The result of ``s2`` once it is over (``None`` before)."""
        run = self.tables.get(s2)
        return None if run is None else run.result

    async def cancel(self, s2: str, *, summarize: bool, reason: str) -> RoundtableState:
        """Ask roundtable ``s2`` to stop (the machine decides at its next pass).

        Raises:
            ValidationFailed: ``s2`` is not known here (names ``sessionID``).
        """
        run = self.tables.get(s2)
        if run is None:
            raise ValidationFailed("sessionID", f"no roundtable {s2!r} is known to this daemon")
        answer = join_cancel(run.cancel, None, Cancel(summarize=summarize, reason=reason))
        if answer.refusal is not None:
            raise ValidationFailed("summarize", answer.refusal)
        if answer.pending is not None:
            run.cancel = answer.pending
        run.wake.set()
        return run.state

    async def wait_result(self, s2: str, timeout: float) -> dict[str, Any] | None:
        """The result of roundtable ``s2`` once it is over (``None``: not within ``timeout``
        seconds, or unknown here)."""
        run = self.tables.get(s2)
        if run is None:
            return None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await run.done.wait()
        return run.result

    async def finalized(self, s2: str, timeout: float) -> bool:
        """Whether roundtable ``s2`` was finalized (S2's title concluded) within ``timeout``
        seconds."""
        run = self.tables.get(s2)
        if run is None:
            return False
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await run.finalized.wait()
        return run.finalized.is_set()

    async def close(self) -> None:
        """Stop every loop (their state is in S2's metadata)."""
        for run in self.tables.values():
            if run.task is not None:
                run.task.cancel()
        for run in self.tables.values():
            if run.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await run.task
