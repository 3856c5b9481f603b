"""A new roundtable's state from a request, and the checks of an extend.

The reads a start needs (the caller's session, the directory's agents, default model and
providers' models) go concurrently, through the 1.x server port (:class:`~roundtabled.opencode.
port.V1Port`, each read one of the product's records: docs/design.md, "The server port"); the
request is then checked against the agents and each seat gets its model (the agent's own, else
the directory's default: :func:`roundtabled.core.validation.seat_models`, the rule of either
major), before S2 is created with its index.
A directory's agents, default model and providers' models are read once per server instance
(:class:`InstanceReads`): OpenCode loads them when it opens the directory's instance and serves
the same answer until it disposes that instance (docs/opencode-server.md, "Directory scoping").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from roundtabled import ids
from roundtabled.core import deliberation, prompts, protocols
from roundtabled.core.server_records import AgentRecord, SessionRef
from roundtabled.core.state import (
    BUILTIN_OBSERVER,
    Delivery,
    Extension,
    Finalization,
    ModelRef,
    Options,
    Phase,
    RoundtableState,
    VerdictRecord,
    observer_agent_of,
)
from roundtabled.core.validation import (
    RoundtableRequest,
    check_agents,
    check_extend_rounds,
    check_parent_session,
    seat_models,
)
from roundtabled.engine.plugins import HEARTBEAT_S, PluginRegistry, directory_key
from roundtabled.engine.settings import Settings
from roundtabled.engine.table import Table
from roundtabled.errors import NotFound, RoundtableError, ValidationFailed
from roundtabled.opencode.port import ServerPort, V1Port

INSTALL_OBSERVER = "`roundtabled install-tool --project DIR` (or --global)"
"""How the built-in observer is installed for OpenCode 1.x (named when it is missing)."""


@dataclass(frozen=True)
class DirectoryReads:
    """What a start reads of a directory's server instance through the port: ``agents`` (every
    agent, hidden ones included), ``default_model`` (the configuration's ``model``; ``None``: it
    sets none), ``known_models`` (the ``provider/model`` labels the providers list; ``None`` when
    that read failed: only a warning depends on it) and ``priced_models`` (those of them with a
    price, :class:`~roundtabled.core.server_records.ProviderModels`; ``None`` likewise)."""

    agents: list[AgentRecord]
    default_model: ModelRef | None
    known_models: set[str] | None
    priced_models: set[str] | None = None
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    """``provider/model`` → its price (USD per million input, output tokens) as listed."""


class InstanceReads:
    """:class:`DirectoryReads` per directory, kept for as long as the server instance that
    answered them lives.

    An entry is dropped when the event stream reports the instance disposed (:meth:`forget`) and
    every entry when the stream reconnects (:meth:`clear`: a disposal in the gap went unheard). A
    read that a disposal or a reconnect overtook is used by its own start but not kept.
    ``epoch``: the shell's count of stream connections (an entry is valid in its own only).
    """

    def __init__(self, epoch: Callable[[], int]) -> None:
        self._epoch = epoch
        self._entries: dict[str | None, tuple[int, DirectoryReads]] = {}
        self._generation = 0

    def forget(self, directory: str | None) -> None:
        """Drop ``directory``'s entry under any of its names, and the server's own directory's
        (which may be the same instance, unnamed); ``None``: every entry."""
        self._generation += 1
        if directory is None:
            self._entries.clear()
            return
        key = directory_key(directory)
        for name in list(self._entries):
            if name is None or name == directory or directory_key(name) == key:
                del self._entries[name]

    def clear(self) -> None:
        """Drop every entry."""
        self.forget(None)

    def kept(self, directory: str | None) -> bool:
        """Whether ``directory``'s reads are kept from the current connection."""
        entry = self._entries.get(directory)
        return entry is not None and entry[0] == self._epoch()

    async def get(self, port: V1Port, directory: str | None) -> DirectoryReads:
        """``directory``'s reads (``None``: the server's own directory), from the server unless
        kept from this instance.

        Raises:
            TransportError: the agents or the configuration could not be read.
        """
        epoch = self._epoch()
        kept = self._entries.get(directory)
        if kept is not None and kept[0] == epoch:
            return kept[1]
        generation = self._generation
        reads = await read_directory(port, directory)
        if self._generation == generation and self._epoch() == epoch:
            self._entries[directory] = (epoch, reads)
        return reads


async def read_directory(port: V1Port, directory: str | None) -> DirectoryReads:
    """``directory``'s agents, default model and providers' models, read concurrently (one
    request each: ``GET /agent``, ``GET /config``, ``GET /config/providers``).

    Raises:
        TransportError: the agents or the configuration could not be read (a failed providers
            read gives ``known_models`` ``None``).
    """
    default_task = asyncio.ensure_future(port.default_model(directory))
    providers_task = asyncio.ensure_future(port.provider_models(directory))
    try:
        available = await port.agents(directory)
        default = await default_task
        known_models: set[str] | None = None
        priced: set[str] | None = None
        prices: dict[str, tuple[float, float]] = {}
        with contextlib.suppress(RoundtableError):
            listed = await providers_task
            known_models = set(listed.labels)
            prices = dict(listed.prices)
            priced = set(prices)
    finally:
        for task in (default_task, providers_task):
            if not task.done():
                task.cancel()
        await asyncio.gather(default_task, providers_task, return_exceptions=True)
    return DirectoryReads(available, default, known_models, priced, prices)


@dataclass(frozen=True)
class StartChecks:
    """What the checks of a start found (:func:`check_start`): S2's ``directory`` (the call's,
    else S1's, else ``None``: the server's own), the directory's ``found`` reads, the
    ``observer``, each seat's and the observer's model and the agents whose model has no price."""

    directory: str | None
    found: DirectoryReads
    observer: str
    models: dict[str, ModelRef]
    unpriced: list[str]


async def check_start(
    port: V1Port,
    req: RoundtableRequest,
    *,
    plugins: PluginRegistry | None = None,
    reads: InstanceReads | None = None,
) -> StartChecks:
    """The checks of a new roundtable, the one copy for a start (:func:`new_state`) and a dry run
    (:func:`roundtabled.service.plan.dry_run`): the directory, S1 and its directory, the agents
    and the observer, their models, ``context: "recent"``'s plugin and a USD budget's prices.
    ``plugins``: where the roundtable plugin reported itself loaded; ``reads``: the directory
    reads kept per server instance (``None``: read them from the server).

    Raises:
        ValidationFailed: bad directory, parent session, agents or observer; missing models;
            ``context: "recent"`` without the plugin; a USD budget on an unpriced model.
        TransportError: the server could not be reached.
    """
    assert req.agents is not None
    directory = req.directory
    check_directory_exists(directory)
    parent: SessionRef | None = None
    if req.parent_session_id and directory is None:
        # The agents of S1's project, not of the server's own directory (a server started as a
        # service runs elsewhere): S1's directory first, then the reads made for it.
        parent = await parent_session(port, req.parent_session_id)
        directory = parent.directory
    # The reads are independent: one round trip instead of two.
    was_kept = reads is not None and reads.kept(directory)
    parent_task = (
        asyncio.ensure_future(parent_session(port, req.parent_session_id))
        if req.parent_session_id and parent is None
        else None
    )
    try:
        found = await (
            reads.get(port, directory) if reads is not None else read_directory(port, directory)
        )
        if parent_task is not None:
            parent = await parent_task
    finally:
        if parent_task is not None:
            if not parent_task.done():
                parent_task.cancel()
            await asyncio.gather(parent_task, return_exceptions=True)
    if parent is not None:
        check_parent_directory(req, directory, parent.directory)
    if plugins is not None:
        # The reads above (or the ones kept) made the directory's instance load its plugins,
        # whose report came first; its check against the server ends here, so turn 1 is
        # planned in the mode the instance supports.
        await plugins.checked()
    if req.context == "recent":
        # Only the plugin can keep a seat's request to the recent turns: refused without it.
        where = directory
        if where is None:
            where = await port.server_directory()
        wait = HEARTBEAT_S + 1.0  # a daemon that just (re)connected hears from it soon
        check_plugin(await plugins.wait_for(where, wait) if plugins is not None else None)
    observer = req.observer or BUILTIN_OBSERVER
    try:
        models = checked_models(req, observer, found)
    except ValidationFailed:
        if reads is None or not was_kept:
            raise
        # Kept reads refuse the request: the instance may have been reloaded a moment ago with
        # the agent the caller names, its disposal not heard yet. The server decides: read again.
        reads.forget(directory)
        found = await reads.get(port, directory)
        models = checked_models(req, observer, found)
    unpriced = unpriced_agents(req.agents, observer, models, found.priced_models)
    check_usd_budget(req, models, unpriced)
    return StartChecks(directory, found, observer, models, unpriced)


async def new_state(
    port: V1Port,
    settings: Settings,
    req: RoundtableRequest,
    now: int,
    *,
    plugins: PluginRegistry | None = None,
    reads: InstanceReads | None = None,
) -> RoundtableState:
    """Create S2 for ``req`` (a start, not an extend) and return its first state (nothing
    pending, nothing written into S2 yet). ``now``: epoch ms. ``plugins``: where the roundtable
    plugin reported itself loaded (``context: "recent"`` needs it in S2's directory). ``reads``:
    the directory reads kept per server instance (``None``: read them from the server).

    Raises:
        ValidationFailed: as :func:`check_start`.
        TransportError: the server could not be reached.
    """
    assert req.agents is not None
    checked = await check_start(port, req, plugins=plugins, reads=reads)
    directory, found, observer = checked.directory, checked.found, checked.observer
    models, unpriced = checked.models, checked.unpriced
    available, known_models = found.agents, found.known_models
    observer_agent = observer_agent_of(observer)
    title = req.title or prompts.default_title(req.prompt)
    state_msg, state_part = ids.message_id(), ids.part_id()
    session = await port.create_indexed_session(
        directory,
        req.parent_session_id,
        title,
        Phase.ACTIVE,
        state_msg,
        state_part,
        finalized=False,
    )
    defaults = settings.roundtable
    options = Options(
        turn_timeout=req.turn_timeout or defaults.turn_timeout,
        loop_threshold=defaults.loop_threshold,
        permission_policy=req.permission_policy or defaults.permission_policy,
        usage_footer=defaults.usage_footer,
        hide_past_prompts=defaults.hide_past_prompts,
        until=req.until or defaults.until,
        budget=req.budget,
        opening=req.opening or defaults.opening,
        context=req.context or defaults.context,
        preset=req.preset,
        sides=dict(req.sides or {}),
        call_started_at=now,
        protocol=req.protocol or "debate",
        adaptive_threshold=req.adaptive_threshold,
    )
    # The protocol sets what it runs with (vote and adaptive: the independent opening).
    options, total_rounds = protocols.of(options.protocol).options(options, req.rounds)
    # A panel of one model with near-identical prompts is one voice several times
    # (docs/deliberation.md): said in the result's notes, the debate still runs.
    warning = low_diversity(req.agents, models, available)
    notes = [warning] if warning else []
    # A seat whose model the server lacks still runs and fails honestly each turn (the server's
    # "Model not found"); said at the start so the caller need not wait for it.
    if known_models:  # an empty or unreadable list says nothing about any model
        for name in dict.fromkeys([*req.agents, observer_agent]):
            label = models[name].label()
            if label not in known_models:
                notes.append(
                    f"{name}'s model {label} is not among the server's providers: "
                    "its turns will fail"
                )
    return RoundtableState(
        notes=notes,
        unpriced=unpriced,
        sessionID=session.id,
        parentSessionID=req.parent_session_id,
        directory=session.directory or directory,
        title=title,
        agents=list(req.agents),
        models=models,
        total_rounds=total_rounds,
        observer=observer,
        prompt=req.prompt,
        delivery=Delivery(toolCallID=req.tool_call_id, toolMessageID=req.tool_message_id),
        options=options,
        stateMessageID=state_msg,
        statePartID=state_part,
        created_at=now,
        updated_at=now,
    )


RECENT_NEEDS_PLUGIN = (
    "context 'recent' needs the roundtable plugin loaded in the OpenCode server of this "
    "directory (it leaves the hidden rounds out of each seat's model request); it has not "
    "reported itself: run `roundtabled install-tool --project DIR` (or --global) and restart "
    "opencode serve, or use context 'full'"
)


def check_plugin(version: str | None) -> None:
    """Refuse ``context: "recent"`` without a report of the plugin (``version`` ``None``).

    Raises:
        ValidationFailed: field ``context`` (flag ``--context``), naming the plugin and the
            command that installs it.
    """
    if version is None:
        raise ValidationFailed("context", RECENT_NEEDS_PLUGIN)


def check_directory_exists(directory: str | None) -> None:
    """A call's ``directory`` (``None``: the server's own) must exist: checked before the
    agents are read from it, so a mistyped directory is named, not an agent it lacks.

    Raises:
        ValidationFailed: field ``directory``.
    """
    if directory is not None and not Path(directory).is_dir():
        what = "is not a directory" if Path(directory).exists() else "does not exist"
        raise ValidationFailed(
            "directory",
            f"directory {directory!r} {what} (give the project "
            "directory OpenCode serves, or omit it for the server's own)",
        )


def unpriced_agents(
    agents: Sequence[str],
    observer: str,
    models: dict[str, ModelRef],
    priced_models: set[str] | None,
) -> list[str]:
    """The seats (and the observer's agent) whose model lists no price, in order.

    The server records a cost of 0 for such a model: the result says "unknown" for those
    agents' turns (docs/result.md, usage), and a USD budget cannot be kept
    (:func:`check_usd_budget`). ``priced_models``: the priced ``provider/model`` labels; ``None``
    when the providers could not be read (then no model is called unpriced).
    """
    if priced_models is None:
        return []
    observer_agent = observer_agent_of(observer)
    return [
        name
        for name in dict.fromkeys([*agents, observer_agent])
        if name in models and models[name].label() not in priced_models
    ]


def low_diversity(
    agents: Sequence[str], models: Mapping[str, ModelRef], available: Sequence[AgentRecord]
) -> str | None:
    """The start's low-diversity warning (docs/deliberation.md, "Diversity warning"): every
    seat of ``agents`` on one model (``models``: each seat's) with near-identical prompts (the
    ``available`` agents' prompt texts), else ``None``. Either major's start adds it to the
    notes; the debate still runs."""
    return deliberation.diversity_warning(
        {a: models[a].label() for a in agents}, {a.id: a.prompt for a in available}, agents
    )


def check_usd_budget(
    req: RoundtableRequest, models: dict[str, ModelRef], unpriced: Sequence[str]
) -> None:
    """A USD budget needs every model's price (a start and a dry run refuse it alike).

    Raises:
        ValidationFailed: field ``budget.usd``, naming the unpriced agents and their models.
    """
    if req.budget is None or req.budget.usd is None or not unpriced:
        return
    labels = ", ".join(f"{n} ({models[n].label()})" for n in unpriced)
    raise ValidationFailed(
        "budget.usd",
        f"budget.usd (--budget-usd): the price of {labels} is unknown (the server lists "
        "none for the model), so spending cannot be measured; set the model's cost in "
        "opencode.json, or use budget.tokens (--budget-tokens)",
    )


async def parent_session(port: ServerPort, session_id: str) -> SessionRef:
    """S1's session, checked (:func:`~roundtabled.core.validation.check_parent_session`), on
    either major (the 1.x start and the 2.x shell's).

    Raises:
        ValidationFailed: (field ``parentSessionID``) it does not exist, or it is a
            roundtable's own session or a seat's session of an independent opening: a result
            delivered there would become a part of that debate, fed to its seats on a later
            extend.
        TransportError: the server could not be reached.
    """
    try:
        session, marks = await port.session_marks(session_id)
    except NotFound:
        raise ValidationFailed(
            "parentSessionID", f"parent session {session_id!r} does not exist"
        ) from None
    check_parent_session(session_id, marks)
    return session


def check_parent_directory(
    req: RoundtableRequest, directory: str | None, s1_dir: str | None
) -> None:
    """S2 lives in S1's directory (its project, its agents): a call naming another directory
    than S1's is refused, never run with that directory's agents (either major's start).

    Raises:
        ValidationFailed: field ``directory``, naming both directories.
    """
    if directory is None or s1_dir is None:
        return
    if os.path.realpath(directory) != os.path.realpath(s1_dir):
        raise ValidationFailed(
            "directory",
            f"directory {directory!r} is not the directory of the parent session "
            f"{req.parent_session_id!r} ({s1_dir!r}); omit directory (S1's is used) or give "
            f"{s1_dir!r}",
        )


def check_extension(state: RoundtableState, req: RoundtableRequest) -> None:
    """An extend keeps the roundtable's agents and observer and stays within the round limit.

    Raises:
        ValidationFailed: naming the field that differs.
    """
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
    spec = protocols.running(state)
    if not spec.extendable:
        raise ValidationFailed(
            "sessionID",
            f"sessionID: a roundtable of protocol '{spec.name}' cannot be extended "
            f"({spec.summary}); start a new one",
        )


def checked_models(
    req: RoundtableRequest, observer: str, found: DirectoryReads
) -> dict[str, ModelRef]:
    """``req``'s agents and observer checked against ``found``'s agents; the model of each (the
    agent's own, else the directory's default: :func:`~roundtabled.core.validation.seat_models`,
    the rule the 2.x shell's start runs too).

    Raises:
        ValidationFailed: as :func:`~roundtabled.core.validation.check_agents` and
            :func:`~roundtabled.core.validation.seat_models`.
    """
    assert req.agents is not None
    check_agents(req.agents, req.observer, found.agents)
    return seat_models(
        req.agents, observer, found.agents, found.default_model, install=INSTALL_OBSERVER
    )


def extended(
    state: RoundtableState,
    *,
    rounds: int,
    extension: Extension,
    parent_session_id: str | None,
    delivery: Delivery,
    call: deliberation.Call | None,
    now: int,
) -> RoundtableState:
    """``state`` of a concluded roundtable continued by ``rounds`` more rounds (an extend): the
    debate is active again at the first seat of the first new round, with a fresh delivery and
    finalization; what ``call`` sets (turn timeout, permission policy, until, budget) applies to
    this call, like on a fresh roundtable (:func:`deliberation.next_call`). ``now``: epoch ms."""
    start, options = deliberation.next_call(state, call, now)
    return state.model_copy(
        update={
            "phase": Phase.ACTIVE,
            "extensions": [*state.extensions, extension.model_copy(update={"from_round": start})],
            "total_rounds": start + rounds,
            "current_round": start,
            "current_agent_index": 0,
            "pending": None,
            "end_reason": None,
            "stop_detail": None,
            "summary": None,
            "verdict": VerdictRecord(),  # a new observer turn, a new repair allowance
            "parent_session_id": state.parent_session_id or parent_session_id,
            "delivery": delivery,
            "finalization": Finalization(),
            "updated_at": now,
            "options": options,
        }
    )


FINISHING_WAIT_S = 30.0
"""How long an extend waits for the worker of a concluded roundtable to finish finalizing."""


def describe_extension(rounds: int, prompt: str) -> str:
    """How a refusal names an extension: ``+N round(s): "the prompt's start"``."""
    head = " ".join(prompt.split())
    head = head if len(head) <= 60 else head[:59] + "…"
    return f'+{rounds} round(s): "{head}"'


async def wait_concluded(s2: str, live: Table | None) -> None:
    """Before an extend of ``s2``: its roundtable in memory (``live``), if any, has concluded and
    its worker has finished finalizing (waited for up to :data:`FINISHING_WAIT_S` s: that worker
    would overwrite the extended state with its own "done" state).

    Raises:
        ValidationFailed: still active, or still finishing after the wait (field ``sessionID``).
    """
    if live is None:
        return
    if live.state.active:
        st = live.state
        last = st.extensions[-1] if st.extensions else None
        running = (
            f"; its extension {describe_extension(st.total_rounds - last.from_round, last.prompt)}"
            " is running"
            if last is not None
            else ""
        )
        raise ValidationFailed(
            "sessionID",
            f"roundtable {s2} is still active (round "
            f"{st.current_round + 1}/{st.total_rounds}){running}; wait for it to conclude",
        )
    if live.task is not None and not live.task.done():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(live.task), FINISHING_WAIT_S)
        if not live.task.done():
            raise ValidationFailed(
                "sessionID", f"roundtable {s2} is still finishing; retry in a few seconds"
            )
