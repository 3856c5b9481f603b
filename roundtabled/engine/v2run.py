"""The 2.x shell: runs a roundtable on OpenCode 2.x through the server port, with the same core.

OpenCode 2.x has none of what the 1.x shell (:mod:`roundtabled.engine.worker`, ``handoff``,
``mirror``, ``store``) is built on: no message edit (no ``ignored`` parts, no PATCH hiding), no
``noReply``, no ``message.updated`` of whole messages to mirror. So this shell sits beside the
1.x one and drives the same decisions (:func:`roundtabled.core.machine.decide`) through the port
(:class:`~roundtabled.opencode.port.V2Port`, docs/design.md "The server port" and "The 2.x
shell"):

- a turn's end is the port's ``turn_ended`` hint (one per execution): it only wakes the
  roundtable, which then takes the pending turn's :class:`~roundtabled.core.server_records.
  TurnOutcome` from the port (as the event stream showed its execution, ``ended_turn``; read,
  ``turn_outcome``, whenever the stream cannot vouch for all of it) and hands the machine an
  :class:`~roundtabled.core.commands.Observation` built from it (:func:`observation_of`): the
  pending prompt and, once the turn is over, one reply carrying the outcome's text, finish,
  error and tokens, then each prompt nobody of ours sent that the same execution answered (a
  person's note) with its reply, which the machine records as the person's and an
  interjection (:func:`interjection_views`);
- a :class:`~roundtabled.core.commands.Prompt` is ``start_turn`` as the seat's agent on the seat's
  model, its id derived from the turn key (:func:`keyed`: a second send of the same turn is the
  same prompt on 2.x), the turn header as its label and the signed marker in its metadata;
- :class:`~roundtabled.core.commands.PersistState` writes the signed state into S2's metadata
  together with the ids the plugin is to keep out of the pending turn's requests
  (``roundtabled.hidden``, docs/plugin.md "OpenCode 2.x"; the rule is :mod:`roundtabled.core.
  hiding`'s, ``context: "recent"`` included), in one PATCH (one writer per roundtable) before
  the prompt; for a seat's turn planned from a recorded one the signed state rides in the
  prompt's own metadata instead (:func:`roundtabled.core.hiding.write_may_follow`: the plugin's
  trusted report, :attr:`V2Runner.plugins`, says it hides by the prompts' markers; a restart
  resumes from the newest block S2 holds, :func:`roundtabled.core.lifecycle.newest_state`);
- ``Abort`` is the port's interrupt; a ``Toast`` cannot be shown (said once in the notes);
- the end: the final state written, then phase 4 (:mod:`roundtabled.engine.v2_delivery`): the
  result to pollers, into S1 exactly once (the waiting tool call's part, else one parked
  message), S2's title concluded;
- a restart: :meth:`V2Runner.recover` resumes every roundtable whose index is not over, phase 4
  included, and its result says it was resumed.

What this shell refuses, one line each (:func:`refusal`): a start without a parent session; a
USD budget (2.x lists no price) and ``context: "recent"`` without the roundtabled plugin loaded
for S2's directory (:mod:`roundtabled.engine.v2_features`). The independent opening round runs
in :mod:`roundtabled.engine.v2_opening`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from typing import Any

from roundtabled import faults
from roundtabled.core import failures, hiding, lifecycle, machine, opening, prompts, protocols
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
from roundtabled.core.messages import AnswerView, MessageView, TextPart, UserView
from roundtabled.core.server_records import (
    AgentRecord,
    SessionRef,
    SignedState,
    TurnKey,
    TurnOutcome,
)
from roundtabled.core.server_records import TurnStatus as TS
from roundtabled.core.state import (
    BUILTIN_OBSERVER,
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
    carried_form,
    decode_state,
    encode_state,
    sign_marker,
)
from roundtabled.core.validation import (
    RoundtableRequest,
    check_agents,
    needs_default_model,
    seat_models,
    unknown_roundtable,
)
from roundtabled.engine import launch, v2_features, v2_opening
from roundtabled.engine.plugins import PLUGIN_VERSION_V2, PluginRegistry, PluginReport
from roundtabled.engine.recovery import known_directories, remember_directory
from roundtabled.engine.settings import Settings
from roundtabled.engine.shell import Clock, now_ms
from roundtabled.engine.table import Table, status_of
from roundtabled.engine.v2_delivery import V2Delivery, take
from roundtabled.errors import NotFound, StateError, ValidationFailed
from roundtabled.opencode.events import Event
from roundtabled.opencode.port import (
    V2Port,
    refusal_confirmed,
    sessions_gone,
    together,
    v2_prompt_id,
)

__all__ = ["Run", "V2Runner", "keyed", "observation_of", "refusal"]

log = logging.getLogger("roundtabled.engine.v2")

FINALIZING = "finalizing"
"""The index's phase of a debate that is over and whose phase 4 is not (the result not yet in
S1, or the title not concluded): what a restarted daemon resumes besides the running ones."""
PLUGIN_SIGNAL = "v2"
"""What the 2.x shell hands the machine as the plugin's signal: on 2.x only the roundtabled
plugin can keep a turn out of a later request, so every turn is planned in plugin mode and the
ids to hide are written where the plugin reads them."""


FIND_SESSION_ID = (
    "`opencode session list` lists the project's sessions, newest first; "
    "add `--server URL` for a server of your own"
)
"""Where a 2.x user finds a session's id (OpenCode 2.x's own CLI; README, "OpenCode 2")."""


def refusal(req: RoundtableRequest) -> ValidationFailed | None:
    """Why OpenCode 2.x cannot run ``req`` yet, naming the field, or ``None``."""
    if not req.parent_session_id and not req.extend and not req.dry_run:
        # an extension keeps its parent; a dry run creates no session
        return ValidationFailed(
            "parentSessionID",
            "parentSessionID: OpenCode 2.x runs a roundtable in a child session of the asking "
            f"session; give that session's id ({FIND_SESSION_ID})",
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
        visible_parts=(TextPart(pend.message_id, "", ""),),
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
    views: tuple[MessageView, ...] = (prompt, reply, *interjection_views(out, now))
    return dc_replace(base, messages=views, pending_found=True)


def interjection_views(out: TurnOutcome, now: int) -> tuple[MessageView, ...]:
    """The prompts nobody of ours sent after the turn's (a person's note in S2, answered in the
    turn's execution after its reply, or in one of its own: docs/design.md, "The 2.x shell"),
    as 1.x's read shows them: a user message without our marker and the reply whose parent it
    is, not completed while its execution runs. The machine records them as the person's entry
    and its interjection, never as the seat's answer, and prompts nobody before they end."""
    views: list[MessageView] = []
    for note in out.interjections:
        views.append(
            UserView(
                id=note.prompt_id,
                created=note.created or now,
                marker=None,
                text=note.text,
                visible_parts=(TextPart(note.prompt_id, "", ""),),
            )
        )
        if note.agent is None and note.completed:
            continue  # no reply stored, and none is coming
        # A note whose execution runs on is a reply not yet completed: the machine waits for
        # it before the next turn (never a prompt into a busy S2).
        views.append(
            AnswerView(
                id=f"{note.prompt_id}-reply",
                parent_id=note.prompt_id,
                agent=note.agent or "",
                created=note.created or now,
                completed=note.completed,
                finish=note.finish if note.finish not in (None, "unknown") else "stop",
                error_name="OpenCodeError" if note.error else None,
                error_message=note.error,
                text=note.reply,
                tool_calls=(),
                files=(),
                usage=Usage(input=note.tokens_in or 0, output=note.tokens_out or 0),
                summary=False,
            )
        )
    return tuple(views)


@dataclass
class Run:
    """One roundtable this shell drives."""

    state: RoundtableState
    s2: SessionRef
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    deadline_ms: int | None = None
    accepted: set[str] = field(default_factory=set)
    result: dict[str, Any] | None = None
    released_at: int | None = None
    """When the result was released to pollers (epoch ms)."""
    consumed: bool = False
    """The waiting tool call's poll took the result (a hint to look at S1 again soon)."""
    cancel: Cancel | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    finalized: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    feed: v2_features.Feed = field(default_factory=v2_features.Feed)
    written: str | None = None
    """The pending prompt id of the state block last written into S2 (or read from it at a
    restart); ``None`` before the first write (:func:`roundtabled.core.hiding.
    write_may_follow`)."""
    resumed: bool = False
    """Resumed after a restart and not yet past its first pass: that pass looks in S2 for a
    prompt sent before the kill whose state write never landed."""


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
        self.tables: dict[str, Run] = {}
        self.delivery = V2Delivery(port, signer, clock)
        #: called with each toast the server could not show (2.x has no HTTP toast: the daemon
        #: keeps them for the plugin's TUI part, roundtabled/service/notices.py)
        self.on_toast: Callable[[RoundtableState, Toast], None] | None = None
        #: the extensions being applied, by roundtable: how a second one's refusal names it
        self.extending: dict[str, str] = {}
        #: the 2.x plugin's reports (``POST /v1/plugin``), trusted once ``GET /api/plugin`` of
        #: the directory lists it active and dropped on every reconnect (engine/plugins.py):
        #: a seat turn's state write follows its prompt only where the trusted report says the
        #: plugin hides by the newest turn prompt's marker (:func:`roundtabled.core.hiding.
        #: write_may_follow`)
        self.plugins = PluginRegistry(
            clock, verify=self._plugin_runs, speaks=PLUGIN_VERSION_V2, install=v2_features.INSTALL
        )

    async def _plugin_runs(self, report: PluginReport) -> bool:
        return await v2_features.plugin_loaded(self.port, report.directory, file=report.file)

    def on_event(self, event: Event) -> None:
        """An event of the 2.x stream: an execution's end wakes its roundtable (a hint only); a
        session's metadata change is the port's to follow (:meth:`V2Port.seen`); a location shut
        down (a reload) drops the plugin's report of that directory (:attr:`plugins`)."""
        self.port.seen(event)
        reloaded = self.port.plugins_reloaded(event)
        if reloaded is not None:
            # an instance shut down (a reload): the new instance's plugin reports itself again
            # and is checked again (a plugin replaced in place, e.g. by an older one, is not
            # trusted on the old one's report)
            self.plugins.forget(reloaded or None)
        sid = self.port.turn_ended(event)
        run = self.tables.get(sid) if sid else None
        if run is None and sid:  # a seat's own session of an independent opening
            owner = v2_opening.owner((r.state for r in self.tables.values()), sid)
            run = self.tables.get(owner) if owner else None
        if run is not None:
            run.wake.set()

    async def recover(self, directories: Iterable[str] = ()) -> int:
        """Resume the roundtables left unfinished in ``directories`` and in the directories of
        earlier roundtables (remembered under the state directory; a daemon restarted, or
        killed): each one's signed state is taken from S2's metadata as the directory's listing
        shows it (one read for all, :meth:`V2Port.unfinished`) and its loop started; the
        first pass reads the pending turn's outcome and decides, as after any wake (a turn sent
        again has the same id: no second turn), or, for a debate that is over but not finalized,
        takes phase 4 up where it stopped (the result reaches S1 once:
        :mod:`roundtabled.engine.v2_delivery`). The result says it was resumed
        (:func:`roundtabled.core.lifecycle.resumed`). A block that does not authenticate is
        skipped with a warning. Returns how many were resumed."""
        resumed = 0
        known = known_directories(self.settings.state_dir)
        for directory in dict.fromkeys([*directories, *self.settings.directories, *known]):
            for s2, blocks in await self.port.unfinished(directory):
                if s2.id in self.tables:
                    continue
                try:
                    block = blocks[0]
                    state = decode_state(block.text, block.metadata, s2.id, self.signer)
                except (IndexError, StateError) as exc:
                    log.warning("%s: holds no roundtable state of this daemon: %s", s2.id, exc)
                    continue
                if not state.active and state.finalization.toast_done:
                    continue
                if state.active:
                    state = await v2_features.newest_state(self.port, self.signer, s2, state)
                run = Run(lifecycle.resumed(state), s2, resumed=True)
                run.written = state.pending.message_id if state.pending is not None else None
                self.tables[s2.id] = run
                run.wake.set()  # the first pass decides from a read at once
                run.task = asyncio.create_task(self._loop(run), name=f"roundtable-v2-{s2.id}")
                resumed += 1
                log.info("%s: roundtable resumed after a restart", s2.id)
        return resumed

    async def on_connect(self) -> None:
        """After every (re)connect of the event stream: wake every roundtable (no replay); the
        port reads each session's metadata again before its next state write; the plugin's
        reports are dropped and checked again against the server (it may have restarted with
        another plugin: until a report is trusted again, each state write goes first)."""
        self.port.forget_metadata()
        self.plugins.recheck()
        for run in self.tables.values():
            run.wake.set()

    async def _models(
        self, req: RoundtableRequest, directory: str | None
    ) -> tuple[dict[str, ModelRef], list[AgentRecord]]:
        """Each seat's and the observer's model, the agents checked: the start's rule on either
        major (:func:`~roundtabled.core.validation.check_agents`,
        :func:`~roundtabled.core.validation.seat_models`); the default model is read only when an
        agent has no model of its own. Also the directory's agents as read (their prompts are
        what the low-diversity warning compares).

        Raises:
            ValidationFailed: an unknown agent or observer, the built-in observer not installed.
            TransportError: the server could not be reached.
        """
        assert req.agents is not None
        records = await self.port.agents(directory or "")
        check_agents(req.agents, req.observer, records)
        observer = req.observer or BUILTIN_OBSERVER
        default = (
            await self.port.default_model(directory)
            if needs_default_model(req.agents, observer, records)
            else None
        )
        models = seat_models(
            req.agents, observer, records, default, install=v2_features.INSTALL_OBSERVER
        )
        return models, records

    async def _where(self, req: RoundtableRequest) -> tuple[SessionRef | None, str | None]:
        """S1 (``None`` without ``parentSessionID``) and S2's directory (the call's, else S1's,
        else ``None``: the server's own), checked as a 1.x start checks them
        (:func:`~roundtabled.engine.launch.check_start`): the call's directory exists, S1 exists
        and is neither a roundtable's own session nor an opening seat's
        (:func:`~roundtabled.engine.launch.parent_session`), and the call's directory is S1's
        (:func:`~roundtabled.engine.launch.check_parent_directory`).

        Raises:
            ValidationFailed: field ``directory`` or ``parentSessionID``.
            TransportError: the server could not be reached.
        """
        launch.check_directory_exists(req.directory)
        if not req.parent_session_id:
            return None, req.directory
        parent = await launch.parent_session(self.port, req.parent_session_id)
        launch.check_parent_directory(req, req.directory, parent.directory)
        return parent, req.directory or parent.directory

    async def plan_reads(self, req: RoundtableRequest) -> tuple[str | None, dict[str, ModelRef]]:
        """What a dry run of ``req`` reads and checks as a start would (nothing is created): the
        directory and S1 (:meth:`_where`) and each seat's and the observer's model, the agents
        checked.

        Raises:
            ValidationFailed: what 2.x cannot run (:func:`refusal`), the directory, S1, an
                unknown agent.
            TransportError: the server could not be reached.
        """
        refused = refusal(req)
        if refused is not None:
            raise refused
        _, directory = await self._where(req)
        models, _ = await self._models(req, directory)
        return directory, models

    async def start(self, req: RoundtableRequest) -> RoundtableState:
        """Start ``req`` and return its state once turn 1 is sent, after the checks a 1.x start
        makes (:meth:`_where`, :meth:`_models`, a USD budget) and with its notes (the
        low-diversity warning, :func:`~roundtabled.engine.launch.low_diversity`).

        Raises:
            ValidationFailed: what 2.x cannot run yet (:func:`refusal`), the directory, S1, an
                unknown agent, a USD budget.
            TransportError: the server could not be reached.
        """
        refused = refusal(req)
        if refused is not None:
            raise refused
        if req.extend:
            return await self.extend(req)
        assert req.agents is not None and req.parent_session_id is not None
        parent, directory = await self._where(req)
        assert parent is not None
        defaults = self.settings.roundtable
        context = req.context or defaults.context
        notes = await v2_features.plugin_notes(self.port, context, directory or "")
        models, records = await self._models(req, directory)
        observer = req.observer or BUILTIN_OBSERVER
        # 2.x's records carry no price: every seat's cost is unknown, never a measured 0; in
        # seat order, then the observer's agent, as on 1.x
        unpriced = launch.unpriced_agents(req.agents, observer, models, set())
        launch.check_usd_budget(req, models, unpriced)
        warning = launch.low_diversity(req.agents, models, records)
        now = self.clock()
        title = req.title or prompts.default_title(req.prompt)
        s2 = await self.port.create_child(
            parent, title, None, {META_KEY: {"phase": Phase.ACTIVE.value, "hidden": []}}
        )
        options = Options(
            turn_timeout=req.turn_timeout or defaults.turn_timeout,
            loop_threshold=defaults.loop_threshold,
            permission_policy=req.permission_policy or defaults.permission_policy,
            usage_footer=defaults.usage_footer,
            hide_past_prompts=True,
            until=req.until or defaults.until,
            budget=req.budget,
            opening=req.opening or defaults.opening,
            context=context,
            preset=req.preset,
            sides=dict(req.sides or {}),
            call_started_at=now,
            protocol=req.protocol or "debate",
            adaptive_threshold=req.adaptive_threshold,
        )
        # The protocol sets what it runs with (vote, adaptive and council: the independent
        # opening; docs/deliberation.md, "Protocols"), as on 1.x (engine/launch.py).
        options, total_rounds = protocols.of(options.protocol).options(options, req.rounds)
        state = RoundtableState(
            notes=[*([warning] if warning else []), *self.port.capabilities.limits(), *notes],
            unpriced=unpriced,
            sessionID=s2.id,
            parentSessionID=parent.id,
            directory=s2.directory or directory,
            title=title,
            agents=list(req.agents),
            models=models,
            total_rounds=total_rounds,
            observer=req.observer or BUILTIN_OBSERVER,
            prompt=req.prompt,
            delivery=Delivery(toolCallID=req.tool_call_id, toolMessageID=req.tool_message_id),
            options=options,
            created_at=now,
            updated_at=now,
        )
        remember_directory(self.settings.state_dir, state.directory)
        run = Run(state, s2)
        self.tables[s2.id] = run
        if opening.running(state):
            # round 1 in the seats' own sessions (v2_opening): its first pass writes the
            # round's ids and creates the sessions
            await self._opening_step(run)
        else:
            first = keyed(machine.decide(state, observation_of(state, None, now, accepted=False)))
            await self._execute(run, first)
        run.task = asyncio.create_task(self._loop(run), name=f"roundtable-v2-{s2.id}")
        return run.state

    async def extend(self, req: RoundtableRequest) -> RoundtableState:
        """Continue the concluded roundtable ``req.session_id`` with ``req.rounds`` more rounds
        (the 1.x rules: :func:`~roundtabled.engine.v2_features.extension_of`) and return its
        state once the extension's first turn is sent. One extension at a time: a second one
        while one is being applied is refused, naming the first.

        Raises:
            ValidationFailed: see :func:`~roundtabled.engine.v2_features.extension_of`.
            TransportError: the server could not be reached.
        """
        assert req.session_id is not None
        sid = req.session_id
        running = self.extending.get(sid)
        if running is not None:
            raise ValidationFailed(
                "sessionID",
                f"roundtable {sid} is being extended already ({running}); "
                "retry once that extension has ended",
            )
        # Claimed before the first await: two extends at once are never both applied.
        self.extending[sid] = launch.describe_extension(req.rounds, req.prompt)
        try:
            held = self.tables.get(sid)
            finishing = held is not None and held.task is not None and not held.task.done()
            if finishing and held is not None and not held.state.active:
                # its loop is writing the end: the extended state must come after it
                await self.finalized(sid, launch.FINISHING_WAIT_S)
            if held is not None:
                s2 = held.s2
            else:
                try:
                    s2 = await self.port.session(sid)
                except NotFound:
                    # The one wording of status, watch, export and cancel for an unknown id.
                    raise ValidationFailed("sessionID", unknown_roundtable(sid)) from None
            state = await v2_features.extension_of(
                self.port,
                self.signer,
                s2,
                req,
                held.state if held is not None else None,
                self.clock(),
            )
            run = Run(state, s2, feed=held.feed if held is not None else v2_features.Feed())
            self.tables[s2.id] = run
            try:
                await self.port.client.update_session(s2.id, title=state.title)
                now = self.clock()
                decided = machine.decide(state, observation_of(state, None, now, accepted=False))
                await self._execute(run, keyed(decided))
            except BaseException:
                # Not extended: the concluded roundtable stays as it was known (a retry reads
                # S2 again; the state write is the extension's first, before its prompt).
                if held is not None:
                    self.tables[s2.id] = held
                else:
                    del self.tables[s2.id]
                raise
            run.task = asyncio.create_task(self._loop(run), name=f"roundtable-v2-{s2.id}")
            log.info("%s: roundtable extended by %d round(s)", s2.id, req.rounds)
            return run.state
        finally:
            del self.extending[sid]

    async def _loop(self, run: Run) -> None:
        """Wake, read, decide, execute until the roundtable is over and finalized (phase 4:
        :meth:`_final_step`). A failed pass goes to the same failure policy as on 1.x
        (docs/design.md, "Failures of the worker"): retried with backoff, or the roundtable ends
        as failed and phase 4 delivers the reason to S1; a phase 4 that keeps failing releases
        the result to pollers and stops (said in the log)."""
        policy = failures.FailurePolicy()
        while not run.finalized.is_set():
            await self._sleep(run)
            try:
                if run.state.active:
                    await self._step(run)
                else:
                    await self._final_step(run)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                out = policy.failed(await refusal_confirmed(self.port, exc))
                if not out.give_up:
                    log.warning(
                        "%s: a pass failed, retrying in %.1f s: %s", run.s2.id, out.delay_s, exc
                    )
                    await asyncio.sleep(out.delay_s)
                    run.wake.set()
                    continue
                assert out.reason is not None
                if run.state.active:
                    log.error("%s: roundtable failed: %s", run.s2.id, out.reason)
                    run.state = failures.ended(run.state, out.reason, self.clock())
                    policy.succeeded()
                    run.wake.set()
                    continue
                log.error("%s: finalizing the roundtable failed: %s", run.s2.id, out.reason)
                self._release(run, run.state)
                return
            policy.succeeded()

    async def _final_step(self, run: Run) -> None:
        """One step of phase 4 (:class:`~roundtabled.engine.v2_delivery.V2Delivery`)."""

        async def write(state: RoundtableState) -> None:
            run.state = state
            await self._write(run)

        step = await self.delivery.step(
            run.state,
            consumed=run.consumed,
            released_at=run.released_at,
            write=write,
            release=lambda state: self._release(run, state),
        )
        run.state = step.state
        if step.done:
            run.finalized.set()
        else:
            run.deadline_ms = step.wake_at

    async def _gone(self, run: Run) -> tuple[bool, bool]:
        """``(S2 or S1 is gone, S1 is gone)`` (:func:`~roundtabled.opencode.port.sessions_gone`:
        raises ServerReplaced when the 404 came from another major)."""
        return await sessions_gone(self.port, run.s2.id, run.state.parent_session_id)

    async def _sleep(self, run: Run) -> None:
        timeout = self.settings.resync_period
        if run.deadline_ms is not None:
            timeout = min(timeout, max(0.0, (run.deadline_ms - self.clock()) / 1000))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await run.wake.wait()
        run.wake.clear()

    async def _opening_step(self, run: Run) -> None:
        """One pass of the independent opening round (:mod:`roundtabled.engine.v2_opening`);
        once the round is recorded, the machine's decision that follows it."""
        now = self.clock()
        try:
            obs = await v2_opening.observe(
                self.port, run.state, run.s2, run.accepted, now, PLUGIN_SIGNAL
            )
        except NotFound:
            deleted = await self._gone(run)
            if not deleted[0]:
                raise
            # as on 1.x: the seats still running are stopped, the machine ends the roundtable
            rnd = opening.current(run.state)  # the opening, or a protocol's second round
            for seat in rnd.seats if rnd is not None else ():
                if seat.session_id is not None and seat.entry is None:
                    with contextlib.suppress(NotFound):
                        await self.port.abort(SessionRef(seat.session_id, run.s2.directory))
            gone = dc_replace(
                observation_of(run.state, None, now, accepted=False),
                status="unknown",
                deleted=True,
                parent_deleted=deleted[1],
            )
            await self._execute(run, keyed(machine.decide(run.state, gone)))
            return
        cancel, run.cancel = run.cancel, None
        d = v2_opening.decide(run.state, obs, cancel, f"pending-{now}")
        run.state = d.state
        run.deadline_ms = d.wake_at
        step = v2_opening.OpeningStep(
            self.port,
            self.signer,
            lambda: self._write(run),
            lambda cmd: run.feed.opening(cmd, run.state),
        )
        if await v2_opening.execute(step, run.state, run.s2, d.commands, run.accepted):
            run.wake.set()  # the next pass adopts the sessions just created
        if d.after is not None:
            await self._execute(run, keyed(d.after))

    async def _step(self, run: Run) -> None:
        if opening.running(run.state):
            await self._opening_step(run)
            return
        state = run.state
        out = None
        deleted: tuple[bool, bool] = (False, False)
        try:
            if state.pending is not None:
                # The ended turn as the event stream showed it (no call before the next
                # prompt); the read whenever the stream cannot vouch for all of it.
                pid = state.pending.message_id
                out = self.port.ended_turn(run.s2, pid)
                if out is None:
                    out = await self.port.turn_outcome(run.s2, pid)
            else:
                await self.port.session(run.s2.id)
        except NotFound:
            deleted = await self._gone(run)
            if not deleted[0]:
                raise
        accepted = state.pending is not None and state.pending.message_id in run.accepted
        obs = observation_of(state, out, self.clock(), accepted=accepted)
        resumed, run.resumed = run.resumed, False
        if resumed and out is not None and out.over:
            obs = dc_replace(obs, messages=(*obs.messages, *await self._sent_after(run)))
        if deleted[0]:
            obs = dc_replace(obs, status="unknown", deleted=True, parent_deleted=deleted[1])
        cancel, run.cancel = run.cancel, None
        if cancel is not None and state.end_reason != EndReason.CANCELLED:
            obs = dc_replace(obs, cancel=cancel)
        await self._execute(run, keyed(machine.decide(state, obs)))

    async def _sent_after(self, run: Run) -> tuple[UserView, ...]:
        """After a restart, the prompts of this roundtable S2 holds after the pending (ended)
        turn's: sent before the kill, their state write lost (it follows the prompt:
        :func:`roundtabled.core.hiding.write_may_follow`), as the machine's views of them: the
        machine adopts such a prompt as the pending turn instead of sending it again
        (``Prompt.send`` false, docs/design.md invariant 4), and a decision re-taken later never
        leaves a prompted turn unanswered (:func:`roundtabled.core.deliberation.
        stop_after_seat_turn`)."""
        pend = run.state.pending
        assert pend is not None
        prompts = await self.port.prompts(run.s2)
        ids = [p.id for p in prompts]
        if pend.message_id not in ids:
            return ()
        views: list[UserView] = []
        for p in prompts[ids.index(pend.message_id) + 1 :]:
            key = p.key
            if key is None or key.roundtable != run.state.session_id:
                continue
            log.info("%s: found the prompt %s sent before the restart", run.s2.id, p.id)
            kind = "turn" if key.seat >= 0 else "observer"
            marker = Marker(
                kind=kind, round=key.round, seat=key.seat, roundtable=run.state.session_id
            )
            views.append(
                UserView(
                    id=p.id,
                    created=self.clock(),
                    marker=marker,
                    text="",
                    visible_parts=(TextPart(p.id, "", ""),),
                )
            )
        return tuple(views)

    def _block(self, run: Run) -> SignedState:
        """``run``'s state as a seat turn's prompt carries it (replies cut:
        :func:`roundtabled.core.state.carried_form`), signed (docs/design.md, "State format")."""
        text, meta = encode_state(carried_form(run.state), self.signer)
        return SignedState(text, meta)

    async def _write(self, run: Run) -> None:
        state = run.state
        text, meta = encode_state(state, self.signer)
        # The index says "finalizing" while phase 4 is not over, so that a restarted daemon
        # takes it up (recover) until the result is in S1 and the title concluded.
        done = state.active or state.finalization.toast_done
        await self.port.write_state(
            run.s2,
            SignedState(text, meta),
            hidden=await v2_features.hidden_ids(self.port, run.s2, state),
            phase=state.phase.value if done else FINALIZING,
        )
        run.written = state.pending.message_id if state.pending is not None else None

    async def _switch(self, run: Run, agent: str, model: ModelRef | None) -> None:
        await self.port.switch(run.s2, agent, model)
        faults.checkpoint("switched")

    async def _execute(self, run: Run, d: Decision) -> None:
        ended = run.state.pending
        run.state = hiding.said_notes(d.state)
        run.deadline_ms = d.wake_at
        recorded = any(isinstance(c, TurnRecorded) for c in d.commands)
        for cmd in d.commands:
            if isinstance(cmd, PersistState):
                await self._write(run)
            elif isinstance(cmd, Prompt):
                model = run.state.models.get(cmd.agent)
                switched = False
                # After a recorded turn the state rides with the prompt (no write on the path
                # from the turn's end to the next prompt) where the plugin's trusted report says
                # it hides by the prompts' markers (an earlier plugin hides only what S2's
                # metadata lists), and a restart resumes from the newest block S2 holds
                # (hiding.write_may_follow).
                after = (
                    cmd.persist_first
                    and cmd.send
                    and hiding.write_may_follow(
                        run.written,
                        ended,
                        run.state,
                        recorded=recorded,
                        marker_hiding=self.plugins.version_for(run.s2.directory)
                        == PLUGIN_VERSION_V2,
                    )
                )
                if cmd.persist_first and not after:
                    # The intent (and the ids the plugin hides from this turn's requests) must
                    # land before the prompt; the agent and model switches are session state
                    # that a turn not yet prompted ignores, so they go beside it.
                    if cmd.send:
                        await together(self._write(run), self._switch(run, cmd.agent, model))
                        switched = True
                    else:
                        await self._write(run)
                    faults.checkpoint("intent-persisted")
                if not cmd.send:
                    # In S2 already (sent before a restart, its state write lost; the machine
                    # adopted it): never sent twice. Its turn may have ended while the daemon
                    # was down, so the next pass reads it at once.
                    self.port.watch(run.s2)
                    run.accepted.add(cmd.message_id)
                    run.wake.set()
                else:
                    if after:
                        await self._switch(run, cmd.agent, model)
                        switched = True
                    key = turn_key(run.state)
                    marker = sign_marker(cmd.marker, run.s2.id, self.signer)
                    await self.port.start_turn(
                        run.s2,
                        cmd.agent,
                        model,
                        cmd.text,
                        key,
                        label=key.header(cmd.agent),
                        marker=marker,
                        switched=switched,
                        # one call: no prompt without its state
                        state=self._block(run) if after else None,
                    )
                    run.accepted.add(cmd.message_id)
                    if after:
                        run.written = cmd.message_id
                    observer = cmd.marker.kind == "observer"
                    faults.checkpoint("observer-prompted" if observer else "prompted")
                if after:
                    faults.checkpoint("intent-persisted")
                if not cmd.persist_first:
                    await self._write(run)
            elif isinstance(cmd, Abort):
                with contextlib.suppress(NotFound):  # a deleted S2 runs nothing any more
                    await self.port.abort(run.s2)
            elif isinstance(cmd, Toast):
                shown = await self.port.notify(
                    run.state.directory or "", "Roundtable", cmd.message, cmd.variant
                )
                if not shown and self.on_toast is not None:
                    self.on_toast(run.state, cmd)
            elif isinstance(cmd, ReleaseResult):
                self._release(run, run.state)
            elif isinstance(cmd, Finalize):
                # The debate's end is written (unless S2 is gone): phase 4 now, not at the next
                # wake (up to resync_period later).
                faults.checkpoint("final-persisted")
                await self._final_step(run)
            elif isinstance(cmd, TurnRecorded):
                faults.checkpoint("turn-recorded")
                log.info(
                    "%s: %s round %d %s",
                    run.s2.id,
                    cmd.entry.agent,
                    cmd.entry.round,
                    "failed: " + (cmd.entry.error or "") if cmd.entry.has_error else "answered",
                )
            run.feed.executed(cmd, run.state)

    def _release(self, run: Run, state: RoundtableState) -> None:
        """Make the result of ``state`` (a debate that is over) available to pollers, once."""
        if run.result is None:
            run.result = lifecycle.result_payload(state)
            run.released_at = self.clock()
            run.done.set()
            run.feed.ended(run.state)  # the feed's last items: the end, then the result
            run.feed.publish({"type": "done", **run.result})

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

    def subscribe(self, s2: str) -> asyncio.Queue[dict[str, Any]]:
        """A bounded queue of ``s2``'s progress events (``prompt``, ``turn``, ``phase``,
        ``done``: :class:`~roundtabled.engine.v2_features.Feed`).

        Raises:
            ValidationFailed: ``s2`` is not known here (names ``sessionID``).
        """
        run = self.tables.get(s2)
        if run is None:
            raise ValidationFailed("sessionID", f"no roundtable {s2!r} is known to this daemon")
        return run.feed.subscribe(run.result)

    def unsubscribe(self, s2: str, q: asyncio.Queue[dict[str, Any]]) -> None:
        """Stop feeding ``q``."""
        run = self.tables.get(s2)
        if run is not None:
            run.feed.unsubscribe(q)

    def state_of(self, s2: str) -> RoundtableState | None:
        """The state of roundtable ``s2`` held here (``None``: not known here)."""
        run = self.tables.get(s2)
        return None if run is None else run.state

    def take_result(self, s2: str, *, tool_call_id: str | None = None) -> dict[str, Any] | None:
        """The result of ``s2`` for a poller once it is over (``None`` before). The waiting
        tool call's poll (``tool_call_id``) takes it with the signed mark its tool stores beside
        it in S1, or is told that it went to S1 as a message of its own
        (:func:`roundtabled.engine.v2_delivery.take`)."""
        run = self.tables.get(s2)
        if run is None or run.result is None:
            return None
        out, took = take(run.state, run.result, tool_call_id, self.signer)
        if took:
            run.consumed = True
            run.wake.set()
            faults.checkpoint("result-taken")
        return out

    async def cancel(self, s2: str, *, summarize: bool, reason: str) -> RoundtableState:
        """Ask roundtable ``s2`` to stop (the machine decides at its next pass).

        Raises:
            ValidationFailed: ``s2`` is not known here, or is over (names ``sessionID``, as the
                1.x engine: a cancel after the end changes nothing); a summary asked for after
                a plain cancel was taken (``summarize``).
        """
        run = self.tables.get(s2)
        if run is None:
            raise ValidationFailed("sessionID", f"no roundtable {s2!r} is known to this daemon")
        if not run.state.active:
            raise ValidationFailed("sessionID", f"no active roundtable {s2!r}")
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
