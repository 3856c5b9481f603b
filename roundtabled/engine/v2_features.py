"""What the 2.x shell (:mod:`roundtabled.engine.v2run`) does beyond a plain debate: the reads
and writes of ``context: "recent"``, the plugin check, an extension. The decisions are the
core's (:mod:`roundtabled.core.hiding`, :mod:`roundtabled.core.deliberation`,
:mod:`roundtabled.engine.launch`'s pure checks); this module only reads and writes through the
server port (docs/design.md, "The 2.x shell").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from roundtabled.core import deliberation, hiding, lifecycle, prompts
from roundtabled.core.commands import Command, Prompt, PromptSeat, SeatSettled, TurnRecorded
from roundtabled.core.progress import seat_prompt_item
from roundtabled.core.server_records import PromptRecord, SessionRef
from roundtabled.core.sides import turn_view
from roundtabled.core.state import (
    META_KEY,
    Delivery,
    Extension,
    RoundtableState,
    Signer,
    decode_state,
)
from roundtabled.core.validation import RoundtableRequest
from roundtabled.core.verdict import running_notes
from roundtabled.engine import launch
from roundtabled.errors import StateError, ValidationFailed
from roundtabled.opencode.port import STATE_KEY, V2Port

__all__ = [
    "PLUGIN_ID",
    "Feed",
    "extension_of",
    "hidden_ids",
    "indexed_sessions",
    "newest_state",
    "plugin_loaded",
    "plugin_missing_note",
    "plugin_notes",
    "recent_needs_plugin",
    "stored_state",
    "with_replies",
]

log = logging.getLogger("roundtabled.engine.v2")

PLUGIN_ID = "roundtabled"
"""The id the roundtabled plugin for 2.x defines (``Plugin.define({id: "roundtabled"})``)."""

INSTALL = "roundtabled install-tool --opencode 2"

INSTALL_OBSERVER = f"`{INSTALL}` (in the project, or --global)"
"""How the built-in observer is installed for OpenCode 2.x (named when it is missing)."""


def plugin_missing_note(where: str) -> str:
    """The one line said when the roundtabled plugin is not loaded on 2.x for ``where`` (a
    directory, or "S2's directory" in a roundtable's notes: a result note is cut at 300
    characters, so the line stays short and names the command early)."""
    return (
        f"{hiding.PLUGIN_MISSING} for {where}: run `{INSTALL}` (project or --global) and restart "
        "opencode; until then every earlier turn prompt stays in the seats' model requests"
    )


def recent_needs_plugin(directory: str) -> ValidationFailed:
    """The refusal of ``context: "recent"`` without the plugin (field ``context``)."""
    return ValidationFailed(
        "context",
        f"context: 'recent' needs the roundtabled plugin loaded by OpenCode 2.x for {directory} "
        f"(it leaves the hidden rounds out of each seat's model request); run `{INSTALL}` in "
        "the project (or --global) and restart opencode, or use context 'full'",
    )


async def plugin_loaded(port: V2Port, directory: str, *, file: str | None = None) -> bool:
    """Whether ``GET /api/plugin`` of ``directory`` lists the roundtabled plugin as active (a
    failed one, e.g. a duplicate of the global install, does not count: the other copy runs
    and is listed active); with ``file``, the active one must be that file (its listed source
    path): a plugin's report is trusted for the plugin that runs, never for a twin that
    failed, nor with no file named (docs/plugin.md, "The context hook": the report).

    Raises:
        TransportError: the server could not be reached.
    """
    for plugin in await port.client.plugins(directory):
        if plugin.id == PLUGIN_ID and plugin.status == "active":
            if file is None:
                return True
            path = plugin.path
            return path is not None and os.path.realpath(path) == os.path.realpath(file)
    return False


async def hidden_ids(port: V2Port, s2: SessionRef, state: RoundtableState) -> list[str]:
    """The ids S2's metadata lists for the pending turn's requests (:func:`roundtabled.core.
    hiding.hidden_ids`); S2's messages are read only when the rule needs them.

    Raises:
        TransportError: S2 could not be read.
    """
    if not hiding.needs_prompts(state):
        return hiding.hidden_ids(state)
    return hiding.hidden_ids(state, await port.prompts(s2))


async def plugin_notes(port: V2Port, context: str, directory: str) -> list[str]:
    """A start's (or an extension's) check of the plugin in ``directory`` for a call whose
    context is ``context`` (``full`` | ``recent``): ``[]`` when it is loaded, else the one line
    that says what runs without it (:func:`plugin_missing_note`).

    Raises:
        ValidationFailed: ``context: "recent"`` without the plugin (field ``context``).
        TransportError: the server could not be reached.
    """
    if await plugin_loaded(port, directory):
        return []
    if context == "recent":
        raise recent_needs_plugin(directory)
    return [plugin_missing_note("S2's directory")]


def with_replies(state: RoundtableState, prompts: Sequence[PromptRecord]) -> RoundtableState:
    """``state`` with each entry's response replaced by the text of the reply to its prompt
    (its ``message_id``) in ``prompts`` (S2's user messages, :meth:`V2Port.prompts`) where
    that text is longer and begins as the response does (a cut reply, not another one)."""
    texts = {p.id: p.text for p in prompts}
    entries = []
    for e in state.history:
        full = texts.get(e.message_id or "")
        if full is not None and len(full) > len(e.response) and full.startswith(e.response[:40]):
            e = e.model_copy(update={"response": full})
        entries.append(e)
    return state.model_copy(update={"history": entries})


async def extension_of(
    port: V2Port,
    signer: Signer,
    s2: SessionRef,
    req: RoundtableRequest,
    held: RoundtableState | None,
    now: int,
) -> RoundtableState:
    """The state of the concluded roundtable ``s2`` extended by ``req`` (an extend: ``req.
    session_id`` set), by the same rules as on 1.x (:func:`roundtabled.engine.launch.
    check_extension` and :func:`~roundtabled.engine.launch.extended`, whose call options come
    from :func:`roundtabled.core.deliberation.next_call`). ``held``: its state in this daemon's
    memory, else it is read from S2's metadata. ``now``: epoch ms. Nothing is written.

    Raises:
        ValidationFailed: not a roundtable of this daemon, still active, agents or observer
            differ, too many rounds, ``context: "recent"`` without the plugin.
        TransportError: the server could not be reached.
    """
    state = held or await stored_state(port, signer, s2)
    if state is None:
        raise ValidationFailed(
            "sessionID", f"session {s2.id!r} is not a roundtable this daemon can extend"
        )
    if state.active:
        raise ValidationFailed(
            "sessionID",
            f"roundtable {s2.id} is still active (round {state.current_round + 1}/"
            f"{state.total_rounds}); wait for it to conclude",
        )
    launch.check_extension(state, req)
    context = req.context or state.options.context
    await plugin_notes(port, context, state.directory or s2.directory or "")
    if req.budget is not None:
        models = dict(state.models)
        launch.check_usd_budget(req, models, [a for a in state.unpriced if a in models])
    mode = req.extend_mode or prompts.infer_extend_mode(req.prompt)
    return launch.extended(
        state,
        rounds=req.rounds,
        extension=Extension(from_round=state.total_rounds, prompt=req.prompt, mode=mode),
        parent_session_id=req.parent_session_id,
        delivery=Delivery(toolCallID=req.tool_call_id, toolMessageID=req.tool_message_id),
        call=deliberation.Call(
            turn_timeout=req.turn_timeout,
            permission_policy=req.permission_policy,
            until=req.until,
            budget=req.budget,
            context=req.context,
        ),
        now=now,
    )


# ── the progress feed, the list, the export ────────────────────────────────────────────────────

FEED_QUEUE_MAX = 256
"""Bounded queue per progress subscriber: a slow one loses events, never blocks a roundtable."""


@dataclass
class Feed:
    """One roundtable's progress feed on 2.x: the same items as 1.x's (docs/control-api.md,
    ``…/events``): ``prompt`` when a turn is sent, ``turn`` when one is recorded, ``phase`` when
    the debate ends, ``done`` with the result. It outlives an extension (its subscribers follow
    the roundtable, not one call)."""

    subscribers: list[asyncio.Queue[dict[str, Any]]] = field(default_factory=list)

    def subscribe(self, result: Mapping[str, Any] | None) -> asyncio.Queue[dict[str, Any]]:
        """A new subscriber's queue; ``result``: the roundtable's result when it is over (the
        queue then holds its ``done`` at once)."""
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue(FEED_QUEUE_MAX)
        self.subscribers.append(q)
        if result is not None:
            q.put_nowait({"type": "done", **result})
        return q

    def unsubscribe(self, q: asyncio.Queue[dict[str, Any]]) -> None:
        """Stop feeding ``q``."""
        if q in self.subscribers:
            self.subscribers.remove(q)

    def publish(self, item: dict[str, Any]) -> None:
        """Feed ``item`` to every subscriber (a full queue loses it, never blocks)."""
        for q in list(self.subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                q.put_nowait(item)

    def executed(self, cmd: Command, state: RoundtableState) -> None:
        """Publish what the 2.x shell just executed, as the 1.x engine publishes it: a sent
        :class:`Prompt`, a :class:`TurnRecorded` (with the running notes). The end is
        published with the result (:meth:`ended`, then ``done``)."""
        if isinstance(cmd, Prompt) and cmd.send:
            self.publish(
                {
                    "type": "prompt",
                    "agent": cmd.agent,
                    "round": cmd.marker.round + 1,
                    "kind": cmd.marker.kind,
                }
            )
        elif isinstance(cmd, TurnRecorded):
            self.publish(
                {
                    "type": "turn",
                    "entry": turn_view(cmd.entry, state),
                    "notes": running_notes(state),
                }
            )

    def opening(self, cmd: object, state: RoundtableState) -> None:
        """Publish what the independent opening just did, as for a turn of the debate: a seat
        prompted (:class:`~roundtabled.core.opening.PromptSeat`) or settled
        (:class:`~roundtabled.core.opening.SeatSettled`)."""
        if isinstance(cmd, PromptSeat):
            self.publish(seat_prompt_item(cmd))
        elif isinstance(cmd, SeatSettled):
            log.info(
                "%s: %s's opening %s",
                state.session_id,
                cmd.entry.agent,
                "failed: " + (cmd.entry.error or "") if cmd.entry.has_error else "answered",
            )
            self.publish(
                {
                    "type": "turn",
                    "entry": turn_view(cmd.entry, state),
                    "notes": running_notes(state),
                }
            )

    def ended(self, state: RoundtableState) -> None:
        """Publish the end of the debate (its phase and end reason)."""
        self.publish(
            {
                "type": "phase",
                "phase": state.phase.value,
                "endReason": state.end_reason.value if state.end_reason else None,
            }
        )


async def stored_state(
    port: V2Port, signer: Signer, s2: SessionRef, *, full: bool = True
) -> RoundtableState | None:
    """The signed state in ``s2``'s metadata, with each reply in full (``full``:
    :func:`with_replies`; a finished state keeps capped previews, a running one no history), or
    ``None``: no state of this daemon there.

    Raises:
        NotFound: ``s2`` is gone. TransportError: the server could not be reached.
    """
    try:
        block = (await port.read_state(s2))[0]
        state = decode_state(block.text, block.metadata, s2.id, signer)
    except (IndexError, StateError):
        return None
    if not (state.active or full):
        return state
    prompts = await port.prompts(s2)  # read once: the newest state and the full replies
    if state.active:
        state = newest_of(state, prompts, signer, s2.id)
    return with_replies(state, prompts) if full else state


async def newest_state(
    port: V2Port, signer: Signer, s2: SessionRef, stored: RoundtableState
) -> RoundtableState:
    """The newest state S2 holds: ``stored`` (its metadata's) or one a later prompt carries
    (:func:`roundtabled.core.lifecycle.newest_state`), then with its replies in full
    (:func:`with_replies`); a carried block that does not authenticate is skipped with a
    warning.

    Raises:
        NotFound: ``s2`` is gone. TransportError: the server could not be reached.
    """
    return newest_of(stored, await port.prompts(s2), signer, s2.id)


def newest_of(
    stored: RoundtableState, prompts: Sequence[PromptRecord], signer: Signer, s2: str
) -> RoundtableState:
    """:func:`newest_state` from S2's prompts already read (``prompts``: :meth:`V2Port.prompts`
    of the session ``s2``)."""
    carried: list[tuple[str, RoundtableState]] = []
    for p in prompts:
        if p.state is None:
            continue
        try:
            carried.append((p.id, decode_state(p.state.text, p.state.metadata, s2, signer)))
        except StateError as exc:
            log.warning("%s: the prompt %s carries no state of this daemon: %s", s2, p.id, exc)
    newest = lifecycle.newest_state(stored, carried)
    # a prompt's block carries cut replies (state.carried_form): the full texts are S2's
    return newest if newest is stored else with_replies(newest, prompts)


async def indexed_sessions(
    port: V2Port, directories: Iterable[str], *, limit: int = 200
) -> list[tuple[SessionRef, str | None, int]]:
    """Every session of ``directories`` (each one's newest ``limit``) whose metadata holds a
    state block: ``(session, its index phase, updated epoch ms)``, each once, newest first. Only
    the signed block decides whether one is a roundtable of this daemon.

    Raises:
        TransportError: the server could not be reached.
    """
    seen: dict[str, tuple[SessionRef, str | None, int]] = {}
    for directory in dict.fromkeys(directories):
        for info in await port.client.sessions(directory, limit=limit):
            meta = info.metadata or {}
            if STATE_KEY not in meta or info.id in seen:
                continue
            index = meta.get(META_KEY)
            phase = index.get("phase") if isinstance(index, Mapping) else None
            updated = info.time.get("updated") or info.time.get("created") or 0
            where = (info.location or {}).get("directory")
            ref = SessionRef(
                id=info.id,
                directory=where if isinstance(where, str) else None,
                parent_id=info.parent_id,
                title=info.title,
            )
            seen[info.id] = (
                ref,
                phase if isinstance(phase, str) else None,
                int(updated) if isinstance(updated, int | float) else 0,
            )
    return sorted(seen.values(), key=lambda s: -s[2])
