"""The server port: what a roundtable needs from an OpenCode server, for either major.

:class:`ServerPort` is the one narrow interface the engine and the core are to talk to; its
records are the product's own (:mod:`roundtabled.core.server_records`). :class:`V1Port` wraps
the 1.x client (:class:`~roundtabled.opencode.client.OpenCodeClient`, the JSON views of
:mod:`roundtabled.opencode.v1_wire`), :class:`V2Port` the 2.x one (:class:`~roundtabled.opencode.v2.
V2Client`); each major's JSON stays in its adapter. :func:`port_for` asks the server which major
it runs (:func:`~roundtabled.opencode.detect.detect_server`) and gives the matching port; the
daemon asks again after every reconnect (a server upgraded in place).

What each major does for each method, and why: docs/design.md, "The server port". Each behaviour
relied on is pinned on both real servers by ``tests/contract/test_server_port.py``.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from roundtabled import ids
from roundtabled.core import messages
from roundtabled.core.history import turn_is_final
from roundtabled.core.messages import Status, TextPart
from roundtabled.core.server_records import (
    AgentRecord,
    IndexedSession,
    Interjection,
    PromptRecord,
    ProviderModels,
    ServerCapabilities,
    SessionMarks,
    SessionMessages,
    SessionRef,
    SignedState,
    StateBlock,
    TurnKey,
    TurnOutcome,
    TurnPrompt,
    TurnStatus,
    stable_digest,
    usage_in_out,
)
from roundtabled.core.state import META_KEY, ModelRef, Phase, Signer, Usage
from roundtabled.errors import NotFound, RoundtableError, ServerReplaced, TransportError
from roundtabled.opencode import v1_wire, v2
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.opencode.detect import ServerFound, detect_server, major_of
from roundtabled.opencode.events import SESSION_IDLE, Event
from roundtabled.opencode.session_metadata import opening_metadata, opening_roundtable_of
from roundtabled.opencode.v2_turns import TurnStream

__all__ = [
    "DELIVERY_KEY",
    "STATE_KEY",
    "TURN_KEY",
    "ServerPort",
    "UnsupportedServer",
    "V1Port",
    "V1Session",
    "V2Port",
    "port_after_reconnect",
    "port_for",
    "together",
    "v2_prompt_id",
]

TURN_KEY = "roundtabledTurn"
"""Metadata key of a turn prompt's :class:`TurnKey` (1.x: on its ignored label part; 2.x: on
the prompt). Unsigned: it only finds a prompt again, it never makes one trusted."""
DELIVERY_KEY = "roundtabledDelivery"
"""Metadata key naming a delivered result (the caller's delivery key)."""
STATE_KEY = "roundtabledState"
"""2.x: the key of S2's session metadata holding the signed state block (``{"text",
"metadata"}``), beside the index under :data:`~roundtabled.core.state.META_KEY`."""
LOOKBACK = 50
"""1.x: at most how many of a session's newest messages are searched for a delivery (or a turn
prompt) already sent: one is only ever sent again while it is among the newest."""


class UnsupportedServer(RoundtableError):
    """No OpenCode server the daemon can drive answers at the URL (the message says what did)."""


@runtime_checkable
class ServerPort(Protocol):
    """What a roundtable needs from an OpenCode server (docs/design.md, "The server port").

    Every method may raise :class:`~roundtabled.errors.TransportError` (the server could not be
    reached or refused; :class:`~roundtabled.errors.NotFound` for a session that is gone)."""

    @property
    def capabilities(self) -> ServerCapabilities:
        """What this server can do; :meth:`ServerCapabilities.limits` says what it cannot."""
        ...

    async def agents(self, directory: str | None) -> list[AgentRecord]:
        """Every agent of ``directory`` (hidden ones included; ``None``: the server's own
        directory)."""
        ...

    async def default_model(self, directory: str | None) -> ModelRef | None:
        """The model a turn of ``directory`` runs on when its agent names none (1.x: ``model`` of
        ``GET /config``, ``None`` when it sets none; 2.x: ``GET /api/model/default``)."""
        ...

    async def session(self, session_id: str) -> SessionRef:
        """The session ``session_id`` (raises NotFound when it is gone)."""
        ...

    async def same_major(self) -> bool:
        """Whether the server still answers as this port's major (1.x: ``GET /global/health``,
        2.x: ``GET /api/info``, JSON naming a release of that major). False when another major
        answers or none does: asked before a 404 is taken for a deleted session or a refusal
        ends a roundtable, since the other major answers this major's routes with 404, 405 or
        its web app (docs/design.md, "Failures of the worker"). Never raises."""
        ...

    async def session_marks(self, session_id: str) -> tuple[SessionRef, SessionMarks]:
        """The session ``session_id`` and what its metadata says it is to a roundtable: a
        roundtable's own session (its index or state), a seat's session of an independent
        opening (a start refuses either as S1:
        :func:`~roundtabled.core.validation.check_parent_session`). NotFound: it does not
        exist."""
        ...

    async def create_child(
        self, parent: SessionRef, title: str, agent: str | None, metadata: Mapping[str, Any]
    ) -> SessionRef:
        """A child session of ``parent`` in its directory with ``title`` and exactly
        ``metadata`` (nothing inherited). ``agent``: the session's first agent (2.x; 1.x names
        the agent per prompt)."""
        ...

    async def start_turn(
        self,
        session: SessionRef,
        agent: str,
        model: ModelRef | None,
        text: str,
        key: TurnKey,
        *,
        label: str | None = None,
        marker: Mapping[str, Any] | None = None,
    ) -> str:
        """Prompt ``session`` as ``agent`` on ``model`` (``None``: the agent's configured model,
        else the directory's default) with ``text``; returns the prompt's id. Sending the same
        ``key`` again names the same prompt and starts no second turn. ``label``: the header
        people read (1.x: an ignored part); ``marker``: the daemon's signed marker metadata,
        stored with the prompt."""
        ...

    async def turn_outcome(self, session: SessionRef, prompt_id: str) -> TurnOutcome:
        """Where the turn of ``prompt_id`` stands, read from the server."""
        ...

    def turn_ended(self, event: Event) -> str | None:
        """The session whose execution this event may have ended (a hint to read
        :meth:`turn_outcome`, never the outcome itself), else ``None``."""
        ...

    async def abort(self, session: SessionRef) -> bool | None:
        """Stop the running turn of ``session``: whether one ran (``None``: the server does not
        say)."""
        ...

    async def read_state(self, session: SessionRef) -> tuple[SignedState, ...]:
        """Every block in ``session`` that claims to be its roundtable's state, the one the
        session's index names first (the caller trusts the first with a valid MAC)."""
        ...

    async def write_state(self, session: SessionRef, block: SignedState) -> None:
        """Store ``block`` as ``session``'s state, replacing the previous one (one writer per
        roundtable: the read-modify-write is not atomic on the server)."""
        ...

    async def deliver_result(self, parent: SessionRef, text: str, key: str) -> str:
        """Put the result ``text`` into ``parent`` without asking its model for a turn, as far
        as the major allows (see :attr:`capabilities`); ``key`` names this delivery: a second
        call with it adds nothing. Returns the stored message's id. Only into an idle session:
        both majors have a busy session's model answer it (1.x with an extra turn; 2.x delivers
        it into the running execution at its next step)."""
        ...

    async def notify(self, directory: str | None, title: str, message: str, variant: str) -> bool:
        """Show a toast to the person (``variant``: info | success | warning | error); whether
        the server took it."""
        ...

    async def close(self) -> None:
        """Close the connection pool."""
        ...


@runtime_checkable
class V1Session(Protocol):
    """What the 1.x engine does on a 1.x server beyond :class:`ServerPort`: its own layout of a
    roundtable in S2 (docs/design.md, "The server port", "State format", "Exactly once").

    A sub-protocol, not capabilities of :class:`ServerPort`: these are the 1.x engine's own
    mechanisms (the state block as an ignored part rewritten in place, hiding by editing parts,
    noReply messages under ids the machine chose, prompts whose ids the machine chose and adopts
    by their markers), which 2.x has no route for; the 2.x shell drives 2.x with other means
    through :class:`ServerPort` alone. Each method is one request (two for :meth:`hide_message`
    and :meth:`post_once`, a read and then the writes), the same the engine made before it went
    through the port. Errors as in :class:`ServerPort`."""

    async def send_prompt(self, session_id: str, prompt: TurnPrompt) -> None:
        """Send ``prompt`` into ``session_id`` (``prompt_async``), reading nothing first."""
        ...

    async def post_once(
        self,
        session_id: str,
        message_id: str,
        text: str | None = None,
        *,
        label: str | None = None,
        marker: Mapping[str, Any] | None = None,
        block: StateBlock | None = None,
    ) -> None:
        """Post a noReply message ``message_id`` into ``session_id`` unless one with that id is
        stored (posted before a crash): the visible ``text``, then an ignored ``label`` with the
        signed ``marker`` metadata, or the state ``block`` alone. NotFound: the session is
        gone."""
        ...

    async def post_state(self, session_id: str, message_id: str, block: StateBlock) -> None:
        """Post the state ``block`` as a noReply message ``message_id`` of its own (no read)."""
        ...

    async def write_state_part(self, session_id: str, message_id: str, block: StateBlock) -> None:
        """Rewrite the state block's part in place (NotFound: the session or the part is
        gone)."""
        ...

    async def write_index(
        self,
        session_id: str,
        phase: Phase,
        message_id: str,
        part_id: str,
        *,
        finalized: bool,
    ) -> None:
        """Write the session's index (the metadata the start-up scan reads): the phase, where
        the state block is, whether the roundtable is finalized."""
        ...

    async def set_title(self, session_id: str, title: str) -> None:
        """Set the session's title."""
        ...

    async def edit_part(self, session_id: str, part: TextPart) -> None:
        """Rewrite the text part ``part`` (read from this server) with ``part.text``."""
        ...

    async def hide_part(self, session_id: str, part: TextPart) -> None:
        """Mark the text part ``part`` (read from this server) ignored: kept, never sent to a
        model."""
        ...

    async def hide_message(self, session_id: str, message_id: str) -> None:
        """Mark every visible text part of the message ``message_id`` ignored (NotFound: the
        message is gone)."""
        ...

    async def statuses(self, directory: str | None) -> dict[str, Status]:
        """The status of every session of ``directory`` that is not idle (the server lists no
        idle one: :func:`roundtabled.core.messages.status_of` reads an absent one as idle)."""
        ...

    async def tool_call(
        self, session_id: str, message_id: str, call_id: str
    ) -> tuple[str | None, str, dict[str, Any]]:
        """Status (pending | running | completed | error), output and metadata of the tool
        call ``call_id`` in the message ``message_id``; ``(None, "", {})`` when the message is
        gone (``("pending", "", {})`` while it holds no such part yet)."""
        ...

    async def plugin_ran(self, directory: str) -> bool:
        """Whether the roundtable plugin ran in the current instance of ``directory`` of the
        server that answered (``GET /config`` carries its mark: docs/plugin.md)."""
        ...

    async def has_part(self, session_id: str, message_id: str, part_id: str) -> bool:
        """Whether the message ``message_id`` is stored and holds the part ``part_id``."""
        ...

    async def views_from(
        self, session_id: str, message_id: str, signer: Signer
    ) -> tuple[tuple[messages.MessageView, ...], bool]:
        """The views of ``session_id``'s messages from ``message_id`` on (inclusive; markers
        checked with ``signer``), and whether that message is stored; read backwards from the
        newest in growing pages (2, 4, … 64), so a turn reads about its own messages only
        (message ids ascend). NotFound: the session is gone."""
        ...

    async def session_messages(
        self, session_id: str, signer: Signer, state_message_id: str | None = None
    ) -> SessionMessages:
        """Every message of ``session_id`` (one read): their views, oldest first, and the ids
        of the user messages other than ``state_message_id`` holding a [ROUNDTABLE META] block
        in their text (pasted by a person: text, never state)."""
        ...

    async def reply_parts(self, session_id: str, prompt_ids: Sequence[str]) -> tuple[TextPart, ...]:
        """The text parts that make the reply text of every assistant message of
        ``session_id`` answering one of ``prompt_ids`` (read as :meth:`views_from` from the
        oldest of them), in order."""
        ...

    async def indexed_state(self, session_id: str) -> tuple[str, tuple[SignedState, ...]] | None:
        """The message the session's index names as the state block's, and every block in it
        claiming to be state (two reads: the session, the message); ``None`` when the index
        names none or that message is gone. NotFound: the session is gone."""
        ...

    async def state_scan(self, session_id: str) -> list[tuple[str, tuple[SignedState, ...]]]:
        """Each message of ``session_id`` (one read of all), oldest first, with the blocks in
        it claiming to be state (none: ``()``)."""
        ...

    async def opening_seats(self, session_id: str) -> tuple[tuple[str, int], ...]:
        """The child sessions of the roundtable ``session_id`` that are seats of its
        independent opening, oldest first: ``(session id, seat)``."""
        ...

    async def server_directory(self) -> str | None:
        """The directory the server runs in (``None``: it does not say)."""
        ...

    async def provider_models(self, directory: str | None) -> ProviderModels:
        """The models ``directory``'s providers list, with their prices (``GET
        /config/providers``)."""
        ...

    async def create_indexed_session(
        self,
        directory: str | None,
        parent_id: str | None,
        title: str,
        phase: Phase,
        message_id: str,
        part_id: str,
        *,
        finalized: bool,
    ) -> SessionRef:
        """A roundtable's own session (S2) in ``directory`` (``None``: the server's own), a child
        of ``parent_id`` (``None``: a root session), created with ``title`` and its index (as
        :meth:`write_index` writes it) in one request."""
        ...

    async def sessions_to_recover(self, directory: str) -> tuple[int, tuple[str, ...]]:
        """How many sessions ``directory`` holds, and the ids of those whose index says a
        roundtable is left active or not finalized (the start-up scan's candidates)."""
        ...

    async def indexed_sessions(self, directory: str | None) -> list[IndexedSession]:
        """The sessions of ``directory`` (``None``: the server's own) whose metadata holds a
        roundtable's index, in the server's order (what ``GET /v1/roundtables`` lists; the
        signed state block decides whether each is one of this daemon's)."""
        ...

    # Reading the 1.x event stream's payloads and the mirror's messages (no request).

    def ends_turn(self, event: Event, prompt_id: str) -> bool:
        """``event`` (``message.updated``) completes an assistant step answering ``prompt_id``
        after which the server calls no model again (finish ``stop``/``length``, or an
        error)."""
        ...

    def completed_reply(self, event: Event) -> bool:
        """``event`` (``message.updated``) completes an assistant message."""
        ...

    def answers(self, event: Event, prompt_id: str) -> bool:
        """``event``'s message (``message.updated``) is an assistant message answering
        ``prompt_id``."""
        ...

    def error_text(self, event: Event) -> str:
        """The words of a ``session.error`` event."""
        ...

    def updated_part(self, event: Event) -> tuple[str, str] | None:
        """``(message id, part id)`` of a ``message.part.updated`` event, else ``None``."""
        ...

    def request_ids(self, request: dict[str, Any]) -> tuple[str, str] | None:
        """``(request id, session id)`` of a permission or question request (an event's
        properties or one listed by :meth:`permissions`, :meth:`questions`), else ``None``."""
        ...

    def permission_summary(self, request: dict[str, Any]) -> str:
        """What a permission request asks for, in a few words."""
        ...

    def question_count(self, request: dict[str, Any]) -> int:
        """How many questions a question request asks."""
        ...

    def views_of(
        self, raw: Sequence[dict[str, Any]], session_id: str, signer: Signer
    ) -> tuple[messages.MessageView, ...]:
        """The views of messages the event stream carried (the mirror's, in order)."""
        ...

    def view_of(self, raw: dict[str, Any], session_id: str, signer: Signer) -> messages.MessageView:
        """The view of one message the event stream carried."""
        ...

    def ends_with_tool_calls(self, raw: Sequence[dict[str, Any]]) -> bool:
        """The newest step of a turn's messages (the mirror's) ended asking for tools, without
        an error: only S2's real status tells whether the server calls the model again."""
        ...

    # Permission and question requests of a roundtable's sessions.

    async def permissions(self, directory: str | None) -> list[dict[str, Any]]:
        """The permission requests of ``directory`` not answered yet (each readable by
        :meth:`request_ids`)."""
        ...

    async def questions(self, directory: str | None) -> list[dict[str, Any]]:
        """The question requests of ``directory`` not answered yet (each readable by
        :meth:`request_ids`)."""
        ...

    async def reply_permission(
        self, request_id: str, reply: str, message: str | None, directory: str | None
    ) -> None:
        """Answer the permission request ``request_id`` (``reply``: once | always | reject;
        ``message``: the words a rejection gives the model)."""
        ...

    async def answer_question(
        self, request_id: str, answers: list[list[str]], directory: str | None
    ) -> None:
        """Answer each question of the question request ``request_id``."""
        ...

    async def reject_question(self, request_id: str, directory: str | None) -> None:
        """Reject the question request ``request_id``."""
        ...

    async def create_seat_session(self, parent: SessionRef, title: str, seat: int) -> str | None:
        """Create the session of ``seat`` of the independent opening of the roundtable
        ``parent`` (S2) as its child with ``title``; its id when the server holds it as that
        seat's (the metadata it answered names the seat, as a read would adopt it), else
        ``None``."""
        ...


# ── 1.x ──────────────────────────────────────────────────────────────────────────────────────────

_REPLIES_ONLY = Signer(secrets.token_bytes(32))
"""A key nobody signs with: :func:`roundtabled.opencode.v1_wire.message_view` needs one to read
markers, and the port reads replies only (it never trusts a marker)."""


def _v1_session(raw: Mapping[str, Any]) -> SessionRef:
    return SessionRef(
        id=str(raw.get("id")),
        directory=v1_wire.session_directory(dict(raw)),
        parent_id=v1_wire.session_parent(dict(raw)),
        title=raw.get("title") if isinstance(raw.get("title"), str) else None,
    )


def _v1_meta(raw: Mapping[str, Any], key: str) -> list[Any]:
    """The ``key`` values in the part metadata of one ``{info, parts}`` message."""
    out = []
    for part in raw.get("parts") or []:
        md = part.get("metadata") if isinstance(part, dict) else None
        if isinstance(md, dict) and key in md:
            out.append(md[key])
    return out


async def _answers_as(read: Awaitable[Mapping[str, Any]], major: int) -> bool:
    """Whether ``read`` (``GET /global/health`` or ``GET /api/info``) answers JSON whose
    ``version`` is a release of ``major`` (:meth:`ServerPort.same_major`); False for any other
    answer or none."""
    try:
        version = (await read).get("version")
    except (TransportError, TypeError, ValueError, AttributeError):
        return False
    return isinstance(version, str) and major_of(version) == major


class V1Port:
    """:class:`ServerPort` on OpenCode 1.x (``client``: an :class:`OpenCodeClient`; ``version``:
    the server's, from ``GET /global/health``)."""

    def __init__(self, client: OpenCodeClient, version: str | None = None) -> None:
        self.client = client
        self._caps = ServerCapabilities(
            major=1,
            version=version,
            exact_no_reply=True,
            toasts=True,
            hiding="edit",
            model_per_prompt=True,
        )

    @property
    def capabilities(self) -> ServerCapabilities:
        return self._caps

    async def close(self) -> None:
        await self.client.close()

    async def same_major(self) -> bool:
        return await _answers_as(self.client.health(), 1)

    async def agents(self, directory: str | None) -> list[AgentRecord]:
        return [
            AgentRecord(
                id=str(a.get("name")),
                mode=a.get("mode") if isinstance(a.get("mode"), str) else None,
                hidden=bool(a.get("hidden")),
                color=a.get("color") if isinstance(a.get("color"), str) else None,
                model=v1_wire.model_ref(a.get("model")),
                has_system_prompt=bool(a.get("prompt")),
                prompt=a.get("prompt") if isinstance(a.get("prompt"), str) else None,
                description=(
                    a.get("description") if isinstance(a.get("description"), str) else None
                ),
                native=a.get("native") is True,
            )
            for a in await self.client.agents(directory)
        ]

    async def default_model(self, directory: str | None) -> ModelRef | None:
        return v1_wire.model_ref((await self.client.config(directory)).get("model"))

    async def session(self, session_id: str) -> SessionRef:
        return _v1_session(await self.client.get_session(session_id))

    async def create_child(
        self, parent: SessionRef, title: str, agent: str | None, metadata: Mapping[str, Any]
    ) -> SessionRef:
        # 1.x sessions have no agent of their own: each prompt names it (start_turn).
        raw = await self.client.create_session(
            directory=parent.directory, parent_id=parent.id, title=title, metadata=dict(metadata)
        )
        return _v1_session(raw)

    async def _model_for(self, directory: str | None, agent: str) -> ModelRef | None:
        # 1.x keeps the model of the last prompt for the next one without a model (sticky per
        # session), so every turn names one: the agent's, else the configuration's default.
        for a in await self.client.agents(directory):
            if a.get("name") == agent and v1_wire.model_ref(a.get("model")) is not None:
                return v1_wire.model_ref(a.get("model"))
        return await self.default_model(directory)

    async def _newest_first(self, session_id: str) -> AsyncIterator[dict[str, Any]]:
        """The session's newest messages, newest first, at most :data:`LOOKBACK`, read in
        growing pages (a message list can be many MB: read only as far as needed)."""
        limit, before, seen = 4, None, 0
        while seen < LOOKBACK:
            page, cursor = await self.client.messages(session_id, limit=limit, before=before)
            for msg in reversed(page):
                yield msg
            seen += len(page)
            if cursor is None or not page:
                return
            before, limit = cursor, min(limit * 2, LOOKBACK - seen)

    async def _sent(self, session_id: str, key: TurnKey) -> str | None:
        """The id of the prompt already stored for ``key``, else ``None``. The search ends at
        the newest turn prompt: a turn is sent only once the one before it ended, so a prompt
        of another key newer than ours cannot exist (``key`` is the turn in flight)."""
        async for msg in self._newest_first(session_id):
            keys = _v1_meta(msg, TURN_KEY)
            if keys:
                return v1_wire.message_id(msg) if key.as_dict() in keys else None
        return None

    async def start_turn(
        self,
        session: SessionRef,
        agent: str,
        model: ModelRef | None,
        text: str,
        key: TurnKey,
        *,
        label: str | None = None,
        marker: Mapping[str, Any] | None = None,
    ) -> str:
        # 1.x lists a session's messages in the order of their ids, so a prompt's id must be a
        # fresh ascending one, not derived from the key; and a second prompt_async with a used id
        # appends the parts to that message again (no second reply, but later requests read the
        # prompt twice). So the prompt is looked for by its key first and sent only if absent.
        sent = await self._sent(session.id, key)
        if sent is not None:
            return sent
        if model is None:
            model = await self._model_for(session.directory, agent)
        message_id = ids.message_id()
        meta = {**(marker or {}), TURN_KEY: key.as_dict()}
        body = v1_wire.prompt_body(message_id, agent, text, label or key.header(agent), meta, model)
        await self.client.prompt_async(session.id, body)
        return message_id

    async def _from(
        self, session_id: str, prompt_id: str, *, first: int = 4
    ) -> list[dict[str, Any]] | None:
        """The session's messages from ``prompt_id`` on (newest pages first, ``first`` then
        doubling up to 64), or ``None`` when no such message is stored."""
        collected: list[dict[str, Any]] = []
        limit, before = first, None
        while True:
            page, cursor = await self.client.messages(session_id, limit=limit, before=before)
            collected[:0] = page
            for i, m in enumerate(collected):
                if v1_wire.message_id(m) == prompt_id:
                    return collected[i:]
            oldest = v1_wire.message_id(page[0]) if page else None
            if cursor is None or not page or (oldest is not None and oldest < prompt_id):
                return None
            before, limit = cursor, min(limit * 2, 64)

    async def turn_outcome(self, session: SessionRef, prompt_id: str) -> TurnOutcome:
        msgs = await self._from(session.id, prompt_id)
        busy = v1_wire.is_busy(await self.client.statuses(session.directory), session.id)
        if msgs is None:
            # prompt_async stores the message milliseconds after answering it: read right after
            # start_turn, a turn not stored yet reads missing too (the caller allows a grace)
            return TurnOutcome(TurnStatus.RUNNING if busy else TurnStatus.MISSING)
        answers = [
            v
            for v in (v1_wire.message_view(m, session.id, _REPLIES_ONLY) for m in msgs)
            if isinstance(v, messages.AnswerView) and v.parent_id == prompt_id
        ]
        if not answers:
            return TurnOutcome(TurnStatus.RUNNING if busy else TurnStatus.QUEUED)
        last = answers[-1]
        text = "\n\n".join(a.text for a in answers if a.text.strip())
        usage = Usage()
        for a in answers:
            usage = usage.plus(a.usage)
        if not turn_is_final(answers, idle=not busy):
            status = TurnStatus.RUNNING
        elif last.error_name == "MessageAbortedError":
            status = TurnStatus.INTERRUPTED
        elif last.error_name:
            status = TurnStatus.FAILED
        else:
            status = TurnStatus.ANSWERED
        tokens_in, tokens_out = usage_in_out(usage, ended=status is not TurnStatus.RUNNING)
        return TurnOutcome(
            status=status,
            text=text,
            agent=last.agent,
            model=_v1_reply_model(msgs, last.id) or _v1_model_of(msgs[0]),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            finish=last.finish,
            truncated=last.finish == "length",
            error=(
                ": ".join(x for x in (last.error_name, last.error_message) if x)
                if status is TurnStatus.FAILED
                else None
            ),
        )

    def turn_ended(self, event: Event) -> str | None:
        # 1.x: session.idle is no "turn finished" (it comes early, twice, between steps): a
        # hint to read only (docs/opencode-server.md, "Prompts and turns").
        return event.session_id if event.type == SESSION_IDLE else None

    async def abort(self, session: SessionRef) -> bool | None:
        await self.client.abort(session.id)
        return None  # 1.x answers true for any session, running or not

    async def read_state(self, session: SessionRef) -> tuple[SignedState, ...]:
        raw = await self.client.get_session(session.id)
        found: list[SignedState] = []
        indexed = v1_wire.index_state_message(raw)
        if indexed:
            try:
                msg = await self.client.message(session.id, indexed)
                found.extend(SignedState(t, m) for t, m in v1_wire.meta_text_parts(msg) if m)
            except NotFound:
                pass
        if found:
            return tuple(found)
        msgs, _ = await self.client.messages(session.id)
        return tuple(
            SignedState(t, m if isinstance(m, dict) else {})
            for msg in msgs
            for t, m in v1_wire.meta_text_parts(msg)
        )

    async def write_state(self, session: SessionRef, block: SignedState) -> None:
        # The engine's layout (docs/design.md, "State format"): an ignored part rewritten in
        # place, named by S2's index in the session metadata.
        raw = await self.client.get_session(session.id)
        index = dict(v1_wire.session_index(raw) or {})
        mid, pid = index.get("stateMessageID"), index.get("statePartID")
        if isinstance(mid, str) and isinstance(pid, str):
            try:
                stored = await self.client.message(session.id, mid)
            except NotFound:
                stored = None
            if stored is not None and v1_wire.has_part(stored, pid):
                await self.write_state_part(session.id, mid, StateBlock(pid, block))
            else:
                # a PATCH of a part of a message not stored is a 500 on 1.x: post it instead
                await self.post_state(session.id, mid, StateBlock(pid, block))
            return
        mid, pid = ids.message_id(), ids.part_id()
        await self.post_state(session.id, mid, StateBlock(pid, block))
        metadata = dict(raw.get("metadata") or {})
        metadata[META_KEY] = {**index, "stateMessageID": mid, "statePartID": pid}
        await self.client.update_session(session.id, metadata=metadata)

    async def deliver_result(self, parent: SessionRef, text: str, key: str) -> str:
        async for msg in self._newest_first(parent.id):
            if key in _v1_meta(msg, DELIVERY_KEY):
                stored = v1_wire.message_id(msg)
                if stored:
                    return stored
        mid = ids.message_id()
        await self.client.post_no_reply(
            parent.id,
            [v1_wire.text_part(text), v1_wire.label_part("", {DELIVERY_KEY: key})],
            message_id=mid,
        )
        return mid

    async def notify(self, directory: str | None, title: str, message: str, variant: str) -> bool:
        try:
            await self.client.toast(message, title=title, variant=variant, directory=directory)
        except TransportError:
            return False
        return True

    # The 1.x engine's own layout (:class:`V1Session`).

    async def send_prompt(self, session_id: str, prompt: TurnPrompt) -> None:
        block = prompt.block
        body = v1_wire.prompt_body(
            prompt.message_id,
            prompt.agent,
            prompt.text,
            prompt.label,
            dict(prompt.marker),
            prompt.model,
            block=_block_part(block) if block is not None else None,
        )
        await self.client.prompt_async(session_id, body)

    async def post_once(
        self,
        session_id: str,
        message_id: str,
        text: str | None = None,
        *,
        label: str | None = None,
        marker: Mapping[str, Any] | None = None,
        block: StateBlock | None = None,
    ) -> None:
        try:
            await self.client.message(session_id, message_id)
            return
        except NotFound:
            pass
        parts: list[dict[str, Any]] = []
        if text is not None:
            parts.append(v1_wire.text_part(text))
        if label is not None:
            parts.append(v1_wire.label_part(label, dict(marker or {})))
        if block is not None:
            parts.append(_block_part(block))
        await self.client.post_no_reply(session_id, parts, message_id=message_id)

    async def post_state(self, session_id: str, message_id: str, block: StateBlock) -> None:
        await self.client.post_no_reply(session_id, [_block_part(block)], message_id=message_id)

    async def write_state_part(self, session_id: str, message_id: str, block: StateBlock) -> None:
        part = v1_wire.state_part(
            session_id, message_id, block.part_id, block.state.text, dict(block.state.metadata)
        )
        await self.client.update_part(session_id, message_id, part)

    async def write_index(
        self,
        session_id: str,
        phase: Phase,
        message_id: str,
        part_id: str,
        *,
        finalized: bool,
    ) -> None:
        await self.client.update_session(
            session_id,
            metadata=v1_wire.index_metadata(phase, message_id, part_id, finalized=finalized),
        )

    async def set_title(self, session_id: str, title: str) -> None:
        await self.client.update_session(session_id, title=title)

    async def edit_part(self, session_id: str, part: TextPart) -> None:
        await self.client.update_part(session_id, part.message_id, v1_wire.part_body(part))

    async def hide_part(self, session_id: str, part: TextPart) -> None:
        await self.client.update_part(session_id, part.message_id, v1_wire.hidden(part))

    async def hide_message(self, session_id: str, message_id: str) -> None:
        msg = await self.client.message(session_id, message_id)
        for part in v1_wire.visible_text_parts(msg):
            await self.client.update_part(session_id, message_id, v1_wire.hidden(part))

    async def statuses(self, directory: str | None) -> dict[str, Status]:
        raw = await self.client.statuses(directory)
        return {sid: v1_wire.session_status(raw, sid) for sid in raw}

    async def tool_call(
        self, session_id: str, message_id: str, call_id: str
    ) -> tuple[str | None, str, dict[str, Any]]:
        try:
            msg = await self.client.message(session_id, message_id)
        except NotFound:
            return None, "", {}
        return v1_wire.tool_call_state(msg, call_id)

    async def plugin_ran(self, directory: str) -> bool:
        return v1_wire.plugin_ran(await self.client.config(directory))

    async def has_part(self, session_id: str, message_id: str, part_id: str) -> bool:
        try:
            msg = await self.client.message(session_id, message_id)
        except NotFound:
            return False
        return v1_wire.has_part(msg, part_id)

    async def views_from(
        self, session_id: str, message_id: str, signer: Signer
    ) -> tuple[tuple[messages.MessageView, ...], bool]:
        msgs = await self._from(session_id, message_id, first=2)
        if msgs is None:
            return (), False
        return v1_wire.message_views(msgs, session_id, signer), True

    async def session_messages(
        self, session_id: str, signer: Signer, state_message_id: str | None = None
    ) -> SessionMessages:
        msgs, _ = await self.client.messages(session_id)
        return SessionMessages(
            views=v1_wire.message_views(msgs, session_id, signer),
            pasted_meta=tuple(v1_wire.pasted_meta_ids(msgs, state_message_id)),
        )

    async def reply_parts(self, session_id: str, prompt_ids: Sequence[str]) -> tuple[TextPart, ...]:
        msgs = await self._from(session_id, min(prompt_ids), first=2) if prompt_ids else None
        return tuple(v1_wire.reply_text_parts(msgs or [], prompt_ids))

    async def indexed_state(self, session_id: str) -> tuple[str, tuple[SignedState, ...]] | None:
        indexed = v1_wire.index_state_message(await self.client.get_session(session_id))
        if not indexed:
            return None
        try:
            msg = await self.client.message(session_id, indexed)
        except NotFound:
            return None
        return indexed, _v1_blocks(msg)

    async def state_scan(self, session_id: str) -> list[tuple[str, tuple[SignedState, ...]]]:
        msgs, _ = await self.client.messages(session_id)
        return [(str(v1_wire.message_id(m)), _v1_blocks(m)) for m in msgs]

    async def opening_seats(self, session_id: str) -> tuple[tuple[str, int], ...]:
        children = await self.client.children(session_id)
        return tuple(
            (str(c["id"]), seat)
            for c in sorted(children, key=lambda c: int((c.get("time") or {}).get("created") or 0))
            if (seat := v1_wire.opening_seat(c, session_id)) is not None
        )

    async def server_directory(self) -> str | None:
        return v1_wire.path_directory(await self.client.path())

    async def provider_models(self, directory: str | None) -> ProviderModels:
        listed = await self.client.providers(directory)
        return ProviderModels(
            labels=frozenset(v1_wire.provider_models(listed)),
            prices=v1_wire.model_prices(listed),
        )

    async def session_marks(self, session_id: str) -> tuple[SessionRef, SessionMarks]:
        raw = await self.client.get_session(session_id)
        marks = SessionMarks(
            indexed=v1_wire.session_index(raw) is not None,
            opening_of=v1_wire.opening_roundtable(raw),
        )
        return _v1_session(raw), marks

    async def create_indexed_session(
        self,
        directory: str | None,
        parent_id: str | None,
        title: str,
        phase: Phase,
        message_id: str,
        part_id: str,
        *,
        finalized: bool,
    ) -> SessionRef:
        raw = await self.client.create_session(
            directory=directory,
            parent_id=parent_id,
            title=title,
            metadata=v1_wire.index_metadata(phase, message_id, part_id, finalized=finalized),
        )
        return _v1_session(raw)

    async def sessions_to_recover(self, directory: str) -> tuple[int, tuple[str, ...]]:
        sessions = await self.client.list_sessions(directory)
        return len(sessions), tuple(
            str(s["id"]) for s in sessions if v1_wire.index_needs_recovery(s)
        )

    async def indexed_sessions(self, directory: str | None) -> list[IndexedSession]:
        out = []
        for raw in await self.client.list_sessions(directory):
            index = v1_wire.session_index(raw)
            if index is None or not isinstance(raw.get("id"), str):
                continue
            phase = index.get("phase")
            out.append(
                IndexedSession(
                    session=_v1_session(raw),
                    phase=phase if isinstance(phase, str) else None,
                    updated=v1_wire.session_updated(raw),
                )
            )
        return out

    def ends_turn(self, event: Event, prompt_id: str) -> bool:
        return v1_wire.ends_turn(event.properties.get("info"), prompt_id)

    def completed_reply(self, event: Event) -> bool:
        return v1_wire.completed_assistant(event.properties.get("info"))

    def answers(self, event: Event, prompt_id: str) -> bool:
        return v1_wire.answers(event.properties.get("info"), prompt_id)

    def error_text(self, event: Event) -> str:
        return v1_wire.session_error_text(event.properties)

    def updated_part(self, event: Event) -> tuple[str, str] | None:
        return v1_wire.updated_part_ids(event.properties)

    def request_ids(self, request: dict[str, Any]) -> tuple[str, str] | None:
        return v1_wire.request_ids(request)

    def permission_summary(self, request: dict[str, Any]) -> str:
        return v1_wire.permission_summary(request)

    def question_count(self, request: dict[str, Any]) -> int:
        return v1_wire.question_count(request)

    def views_of(
        self, raw: Sequence[dict[str, Any]], session_id: str, signer: Signer
    ) -> tuple[messages.MessageView, ...]:
        return v1_wire.message_views(raw, session_id, signer)

    def view_of(self, raw: dict[str, Any], session_id: str, signer: Signer) -> messages.MessageView:
        return v1_wire.message_view(raw, session_id, signer)

    def ends_with_tool_calls(self, raw: Sequence[dict[str, Any]]) -> bool:
        return v1_wire.ends_with_tool_calls(raw)

    async def permissions(self, directory: str | None) -> list[dict[str, Any]]:
        return await self.client.permissions(directory)

    async def questions(self, directory: str | None) -> list[dict[str, Any]]:
        return await self.client.questions(directory)

    async def reply_permission(
        self, request_id: str, reply: str, message: str | None, directory: str | None
    ) -> None:
        await self.client.reply_permission(request_id, reply, message, directory=directory)

    async def answer_question(
        self, request_id: str, answers: list[list[str]], directory: str | None
    ) -> None:
        await self.client.answer_question(request_id, answers, directory=directory)

    async def reject_question(self, request_id: str, directory: str | None) -> None:
        await self.client.reject_question(request_id, directory=directory)

    async def create_seat_session(self, parent: SessionRef, title: str, seat: int) -> str | None:
        info = await self.client.create_session(
            directory=parent.directory,
            parent_id=parent.id,
            title=title,
            metadata=opening_metadata(parent.id, seat),
        )
        sid = v1_wire.session_id(info)
        return sid if sid is not None and v1_wire.opening_seat(info, parent.id) == seat else None


def _v1_blocks(msg: dict[str, Any]) -> tuple[SignedState, ...]:
    """The blocks of one ``{info, parts}`` message claiming to be state (metadata that is no
    object reads as none: it cannot verify either way)."""
    return tuple(
        SignedState(t, m if isinstance(m, dict) else {}) for t, m in v1_wire.meta_text_parts(msg)
    )


def _block_part(block: StateBlock) -> dict[str, Any]:
    """The state block's part as a new message carries it."""
    return v1_wire.block_part(block.part_id, block.state.text, dict(block.state.metadata))


def _v1_model_of(prompt: Mapping[str, Any]) -> ModelRef | None:
    info = prompt.get("info") or {}
    return v1_wire.model_ref(info.get("model")) if isinstance(info, dict) else None


def _v1_reply_model(msgs: list[dict[str, Any]], reply_id: str) -> ModelRef | None:
    """The model an assistant message of ``msgs`` records (``providerID``/``modelID``)."""
    for m in msgs:
        info = m.get("info") or {}
        if info.get("id") == reply_id:
            return v1_wire.model_ref(
                {"providerID": info.get("providerID"), "modelID": info.get("modelID")}
            )
    return None


# ── 2.x ──────────────────────────────────────────────────────────────────────────────────────────


def _v2_state(metadata: Mapping[str, Any] | None) -> tuple[SignedState, ...]:
    """The state block a 2.x session's (or prompt's) metadata holds (``()``: none)."""
    held = (metadata or {}).get(STATE_KEY)
    if not isinstance(held, dict) or not isinstance(held.get("text"), str):
        return ()
    meta = held.get("metadata")
    return (SignedState(held["text"], meta if isinstance(meta, dict) else {}),)


def _v2_state_value(block: SignedState) -> dict[str, Any]:
    """``block`` as a 2.x metadata value under :data:`STATE_KEY` (what :func:`_v2_state` reads)."""
    return {"text": block.text, "metadata": dict(block.metadata)}


def _v2_session(info: v2.SessionInfo) -> SessionRef:
    directory = (info.location or {}).get("directory")
    return SessionRef(
        id=info.id,
        directory=directory if isinstance(directory, str) else None,
        parent_id=info.parent_id,
        title=info.title,
    )


def _v2_model(ref: v2.ModelRef | None) -> ModelRef | None:
    return ModelRef(providerID=ref.provider_id, modelID=ref.id) if ref is not None else None


def _v2_error(error: Mapping[str, Any] | None) -> str | None:
    if not error:
        return None
    kind, message = error.get("type"), error.get("message")
    return ": ".join(str(x) for x in (kind, message) if x) or None


def _v2_usage(tokens: Mapping[str, Any] | None) -> Usage:
    t = tokens or {}
    cache = t.get("cache") if isinstance(t.get("cache"), dict) else {}
    assert isinstance(cache, dict)
    return Usage(
        input=int(t.get("input") or 0),
        output=int(t.get("output") or 0),
        reasoning=int(t.get("reasoning") or 0),
        cache_read=int(cache.get("read") or 0),
        cache_write=int(cache.get("write") or 0),
    )


def _v2_interjections(records: Sequence[v2.Record], prompt_id: str) -> tuple[Interjection, ...]:
    """The prompts nobody of ours sent that were delivered after ``prompt_id`` and before our
    next turn prompt, each with its reply: a person's note posted into S2 during the turn (2.x
    steers it into the running execution and answers it there) or right after it (it runs an
    execution of its own). A prompt of ours carries the turn key: the next turn, where the
    search stops."""
    out: list[Interjection] = []

    def ours(user: v2.UserRecord) -> bool:
        return TURN_KEY in (user.metadata or {})

    for later in v2.later_prompts(records, prompt_id, until=ours):
        reply = later.reply
        usage = Usage()
        for r in reply:
            usage = usage.plus(_v2_usage(r.tokens))
        last = reply[-1] if reply else None
        tokens_in, tokens_out = usage_in_out(usage, ended=later.ended)
        created = later.prompt.time.get("created")
        out.append(
            Interjection(
                prompt_id=later.prompt.id,
                text=later.prompt.text,
                created=created if isinstance(created, int) else 0,
                reply="\n\n".join(r.text for r in reply if r.text.strip()),
                agent=last.agent if last else None,
                model=_v2_model(last.model) if last else None,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                finish=last.finish if last else None,
                completed=later.ended,
                error=_v2_error(last.error) if last else None,
            )
        )
    return tuple(out)


def _v2_outcome(records: Sequence[v2.Record], prompt_id: str) -> TurnOutcome:
    """The outcome of ``prompt_id``'s turn from ``records`` (the session's from the prompt on,
    oldest first: read, or rebuilt from the event stream)."""
    reply, idle = v2.reply_of(records, prompt_id)
    if idle is None:
        return TurnOutcome(TurnStatus.RUNNING, text="".join(r.text for r in reply))
    last = reply[-1] if reply else None
    usage = Usage()
    for r in reply:
        usage = usage.plus(_v2_usage(r.tokens))
    status = {
        "succeeded": TurnStatus.ANSWERED,
        "failed": TurnStatus.FAILED,
        "interrupted": TurnStatus.INTERRUPTED,
    }.get(idle.outcome or "", TurnStatus.FAILED)
    error = None
    if status is TurnStatus.FAILED:
        error = _v2_error(idle.error) or _v2_error(last.error if last else None)
        error = error or f"the execution ended {idle.outcome or 'without an outcome'}"
    tokens_in, tokens_out = usage_in_out(usage, ended=status is not TurnStatus.RUNNING)
    return TurnOutcome(
        status=status,
        text="\n\n".join(r.text for r in reply if r.text.strip()),
        agent=last.agent if last else None,
        model=_v2_model(last.model) if last else None,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        finish=last.finish if last else None,
        truncated=last is not None and last.finish == "length",
        error=error,
        interjections=_v2_interjections(records, prompt_id),
    )


def v2_delivery_id(key: str) -> str:
    """The 2.x message id of the delivery ``key`` (:meth:`V2Port.deliver_result`): ``msg_`` +
    its digest, so a second delivery of the same key is the same record."""
    return "msg_" + stable_digest("delivery", key)


def v2_prompt_id(key: TurnKey) -> str:
    """The 2.x prompt id of the turn ``key``: ``msg_`` + its digest. 2.x takes any id that
    starts ``msg_`` and answers a used one with the original admission, starting no turn."""
    return "msg_" + key.digest()


async def together(*calls: Awaitable[Any]) -> None:
    """Await ``calls`` concurrently. The first failure is raised as it is (never wrapped in an
    exception group: the failure policy classifies by type, docs/design.md "Failures of the
    worker"), once the other calls are cancelled and have ended."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def replaced(port: ServerPort, what: str) -> ServerReplaced | None:
    """A :class:`ServerReplaced` saying ``what`` when the server no longer answers as
    ``port``'s major (:meth:`ServerPort.same_major`), else ``None``: asked before an answer of
    the server is taken for what it says of a roundtable."""
    if await port.same_major():
        return None
    return ServerReplaced(
        f"{what}, and the server no longer answers as OpenCode {port.capabilities.major}.x "
        "(replaced by another major, or going down): waiting for it"
    )


async def sessions_gone(
    port: ServerPort, session_id: str, parent_id: str | None
) -> tuple[bool, bool]:
    """``(the session or its parent is gone, the parent is gone)``, each asked with
    :meth:`ServerPort.session`; a 404 means deleted, never completed (regression "deletion
    mid-turn") — but only while the server answers as ``port``'s major: else raises
    :class:`ServerReplaced` (the other major answers this major's routes with 404; docs/design.md,
    "Failures of the worker")."""
    gone: list[bool] = []
    for sid in (session_id, parent_id):
        try:
            if sid:
                await port.session(sid)
            gone.append(False)
        except NotFound:
            gone.append(True)
    if any(gone):
        other = await replaced(port, f"session {session_id} or its parent answered 404")
        if other is not None:
            raise other
    return gone[0] or gone[1], gone[1]


async def refusal_confirmed(port: ServerPort, exc: Exception) -> Exception:
    """``exc``, or a retryable :class:`ServerReplaced` when ``exc`` is a refusal no retry cures
    (a non-retryable :class:`TransportError`: 405, a web page for JSON, …) from a server that no
    longer answers as ``port``'s major — the other major answering this one's routes, not a
    refusal to end a roundtable for (docs/design.md, "Failures of the worker")."""
    if not isinstance(exc, TransportError) or exc.retryable or isinstance(exc, NotFound):
        return exc
    return await replaced(port, f"the server refused a request ({exc})") or exc


class V2Port:
    """:class:`ServerPort` on OpenCode 2.x (``client``: a :class:`~roundtabled.opencode.v2.
    V2Client`; ``version``: the server's, from ``GET /api/info``)."""

    METADATA_KEPT = 4096
    """How many sessions' metadata :meth:`write_state` keeps (the oldest is forgotten first: its
    next write reads the session again)."""

    def __init__(self, client: v2.V2Client, version: str | None = None) -> None:
        self.client = client
        # The metadata of each session last written, read or announced (``session.metadata.
        # updated``), without the state block (every write replaces it): what write_state builds
        # its PATCH from instead of a read first (docs/design.md, "The 2.x shell").
        self._metadata: dict[str, dict[str, Any]] = {}
        # Each session's executions as the event stream shows them: the ended turn without a
        # read (ended_turn).
        self._turns = TurnStream()
        self._caps = ServerCapabilities(
            major=2,
            version=version,
            exact_no_reply=False,
            toasts=False,
            hiding="plugin",
            model_per_prompt=False,
        )

    @property
    def capabilities(self) -> ServerCapabilities:
        return self._caps

    async def close(self) -> None:
        await self.client.close()

    async def same_major(self) -> bool:
        return await _answers_as(self.client.info(), 2)

    async def agents(self, directory: str | None) -> list[AgentRecord]:
        return [
            AgentRecord(
                id=a.id,
                mode=a.mode,
                hidden=a.hidden,
                color=a.color,
                model=_v2_model(a.model),
                has_system_prompt=bool(a.system),
                prompt=a.system,
                description=a.description,
                native=a.id in v2.BUILTIN_AGENTS,
            )
            for a in await self.client.agents(directory)
        ]

    async def default_model(self, directory: str | None) -> ModelRef | None:
        return _v2_model(await self.client.default_model(directory))

    def _keep(self, session_id: str, metadata: Mapping[str, Any] | None) -> None:
        """Remember ``metadata`` as ``session_id``'s, without the state block."""
        self._metadata.pop(session_id, None)
        self._metadata[session_id] = {k: v for k, v in (metadata or {}).items() if k != STATE_KEY}
        while len(self._metadata) > self.METADATA_KEPT:
            del self._metadata[next(iter(self._metadata))]

    def seen(self, event: Event) -> None:
        """Follow the sessions on the event stream (every event, in the stream's order): their
        executions (:meth:`ended_turn`) and their metadata: ``session.metadata.updated`` (any
        writer's PATCH, ours included, in the server's order) replaces what :meth:`write_state`
        builds from; ``session.deleted`` forgets the session."""
        self._turns.follow(event)
        sid = event.session_id
        if sid is None:
            return
        if event.type == "session.metadata.updated":
            meta = event.properties.get("metadata")
            if isinstance(meta, dict):
                self._keep(sid, meta)
            else:
                self._metadata.pop(sid, None)
        elif event.type == "session.deleted":
            self._metadata.pop(sid, None)

    def forget_metadata(self) -> None:
        """Forget every session's metadata (the event stream reconnected: an update may have
        been missed); each next :meth:`write_state` reads its session first."""
        self._metadata.clear()

    async def session(self, session_id: str) -> SessionRef:
        info = await self.client.get_session(session_id)
        self._keep(session_id, info.metadata)
        return _v2_session(info)

    async def session_marks(self, session_id: str) -> tuple[SessionRef, SessionMarks]:
        info = await self.client.get_session(session_id)
        self._keep(session_id, info.metadata)
        meta = info.metadata or {}
        # S2 on 2.x: created with the index, the signed state beside it from the first write
        marks = SessionMarks(
            indexed=isinstance(meta.get(META_KEY), Mapping) or STATE_KEY in meta,
            opening_of=opening_roundtable_of(meta),
        )
        return _v2_session(info), marks

    async def create_child(
        self, parent: SessionRef, title: str, agent: str | None, metadata: Mapping[str, Any]
    ) -> SessionRef:
        # metadata is always given: 2.x copies the parent's when it is absent
        info = await self.client.create_session(
            parent_id=parent.id, title=title, agent=agent, metadata=dict(metadata)
        )
        self._keep(info.id, info.metadata if info.metadata is not None else metadata)
        return _v2_session(info)

    async def _model_for(self, directory: str | None, agent: str) -> v2.ModelRef:
        # 2.x never applies an agent's configured model on a direct prompt: the session runs on
        # the model last switched to (or the default), so each turn switches to the seat's.
        for a in await self.client.agents(directory):
            if a.id == agent and a.model is not None:
                return a.model
        default = await self.client.default_model(directory)
        return v2.ModelRef(id=default.id, provider_id=default.provider_id)

    async def switch(self, session: SessionRef, agent: str, model: ModelRef | None) -> None:
        """Make ``agent`` on ``model`` (``None``: the agent's configured model, else the
        server's default) the agent and model of ``session``'s next prompt.

        Agent and model are session state on 2.x, each recorded as a history item, and a switch
        of one leaves the other as it is, so both go at once (at most one turn is in flight per
        session: nothing runs between them; docs/opencode-server.md, "2.x")."""
        chosen = (
            v2.ModelRef(id=model.model_id, provider_id=model.provider_id)
            if model is not None
            else await self._model_for(session.directory, agent)
        )
        await together(
            self.client.switch_agent(session.id, agent),
            self.client.switch_model(session.id, chosen),
        )

    async def start_turn(
        self,
        session: SessionRef,
        agent: str,
        model: ModelRef | None,
        text: str,
        key: TurnKey,
        *,
        label: str | None = None,
        marker: Mapping[str, Any] | None = None,
        switched: bool = False,
        state: SignedState | None = None,
    ) -> str:
        """:meth:`ServerPort.start_turn`; ``switched``: the caller made ``agent`` on ``model``
        the session's already (:meth:`switch`), else it is done first. ``state``: the
        roundtable's state block with this turn pending, stored with the prompt in the same call
        (:meth:`prompts` gives it back; docs/design.md "The 2.x shell", *When the state is
        written*)."""
        # switched before every turn (idempotent; at most one turn is in flight per session)
        if not switched:
            await self.switch(session, agent, model)
        prompt_id = v2_prompt_id(key)
        self.watch(session)  # its execution is seen from the start (ended_turn)
        turn: dict[str, Any] = key.as_dict()
        if label is not None:
            turn["label"] = label
        metadata: dict[str, Any] = {**(marker or {}), TURN_KEY: turn}
        if state is not None:
            metadata[STATE_KEY] = _v2_state_value(state)
        await self.client.prompt(session.id, text, message_id=prompt_id, metadata=metadata)
        return prompt_id

    async def _from(self, session_id: str, prompt_id: str) -> list[v2.Record] | None:
        """The session's records from ``prompt_id`` on, oldest first (newest pages first), or
        ``None`` when the prompt is not in the history (not delivered, or unknown)."""
        collected: list[v2.Record] = []
        page = await self.client.messages(session_id, limit=8, order="desc")
        while True:
            collected.extend(page.records)
            for i, r in enumerate(collected):
                if r.id == prompt_id and isinstance(r, v2.UserRecord):
                    return list(reversed(collected[: i + 1]))
            if not page.next or not page.records:
                return None
            page = await self.client.messages(session_id, limit=64, cursor=page.next)

    def watch(self, session: SessionRef) -> None:
        """Follow ``session``'s executions on the event stream from now on (:meth:`start_turn`
        does it before each prompt): what :meth:`ended_turn` answers from."""
        self._turns.watch(session.id)

    def ended_turn(self, session: SessionRef, prompt_id: str) -> TurnOutcome | None:
        """The outcome of ``prompt_id``'s turn as the event stream showed its execution end
        (:class:`~roundtabled.opencode.v2_turns.TurnStream`, fed by :meth:`seen`), the same as
        :meth:`turn_outcome` would read, with no call; ``None`` when the stream cannot vouch
        for all of it (not ended, missed events, a reconnect, a failure, a person's note):
        then :meth:`turn_outcome` reads it (docs/design.md, "The 2.x shell")."""
        records = self._turns.ended(session.id, prompt_id)
        return None if records is None else _v2_outcome(records, prompt_id)

    async def turn_outcome(self, session: SessionRef, prompt_id: str) -> TurnOutcome:
        records = await self._from(session.id, prompt_id)
        if records is None:
            return await self._undelivered(session, prompt_id)
        return _v2_outcome(records, prompt_id)

    async def _undelivered(self, session: SessionRef, prompt_id: str) -> TurnOutcome:
        """A prompt not in the history: parked in the inbox (queued, or its execution failed
        before delivering it: an unknown agent), or unknown to the server."""
        inbox = await self.client.inbox(session.id)
        item = next((i for i in inbox if i.get("id") == prompt_id), None)
        if item is None:
            return TurnOutcome(TurnStatus.MISSING)
        if session.id in await self.client.active():
            return TurnOutcome(TurnStatus.RUNNING)
        newest = await self.client.messages(session.id, limit=1, type="idle")
        idle = next((r for r in newest.records if isinstance(r, v2.IdleRecord)), None)
        admitted = (item.get("time") or {}).get("created")
        ended = idle.time.get("created") if idle is not None else None
        if (
            idle is not None
            and idle.outcome == "failed"
            and isinstance(admitted, int)
            and isinstance(ended, int)
            and ended >= admitted
        ):
            # the execution that was to deliver it failed first (its words are the idle's); an
            # idle older than the admission is an earlier turn's
            return TurnOutcome(TurnStatus.FAILED, error=_v2_error(idle.error))
        return TurnOutcome(TurnStatus.QUEUED)

    async def prompts(self, session: SessionRef) -> list[PromptRecord]:
        """Every user message of ``session``, oldest first, with the :class:`TurnKey` it carries
        (``metadata.roundtabledTurn``; ``None`` for a message the daemon did not send as a turn),
        the state block it carries (:meth:`start_turn`'s ``state``) and the assistant messages
        answering it (:func:`~roundtabled.opencode.v2.reply_of`'s rule: up to the next user
        message or the end of its execution)."""
        records = await self.client.all_messages(session.id)
        found: list[tuple[v2.UserRecord, list[v2.AssistantRecord]]] = []
        open_reply: list[v2.AssistantRecord] | None = None
        for r in records:
            if isinstance(r, v2.UserRecord):
                open_reply = []
                found.append((r, open_reply))
            elif isinstance(r, v2.IdleRecord):
                open_reply = None
            elif isinstance(r, v2.AssistantRecord) and open_reply is not None:
                open_reply.append(r)
        out: list[PromptRecord] = []
        for user, reply in found:
            out.append(
                PromptRecord(
                    id=user.id,
                    key=TurnKey.from_dict((user.metadata or {}).get(TURN_KEY)),
                    replies=tuple(a.id for a in reply),
                    text="\n\n".join(a.text for a in reply if a.text.strip()),
                    state=next(iter(_v2_state(user.metadata)), None),
                )
            )
        return out

    def turn_ended(self, event: Event) -> str | None:
        end = v2.turn_end(event)
        return end.session_id if end is not None else None

    def plugins_reloaded(self, event: Event) -> str | None:
        """The directory whose instance ``event`` says shut down (``""``: every directory),
        else ``None``: a plugin's report of that directory may be of a plugin that no longer
        runs there (2.x only)."""
        return v2.plugins_reloaded(event)

    async def abort(self, session: SessionRef) -> bool | None:
        return await self.client.interrupt(session.id)

    async def read_state(self, session: SessionRef) -> tuple[SignedState, ...]:
        info = await self.client.get_session(session.id)
        self._keep(session.id, info.metadata)
        return _v2_state(info.metadata)

    async def write_state(
        self,
        session: SessionRef,
        block: SignedState,
        *,
        hidden: Sequence[str] | None = None,
        phase: str | None = None,
    ) -> None:
        """Write ``block``; ``hidden`` (prompt ids the roundtabled plugin keeps out of every
        later model request, ``metadata.roundtabled.hidden``: docs/plugin.md "OpenCode 2.x")
        and ``phase`` (the index's) in the same PATCH, ``None``: left as they are.

        One PATCH when the session's metadata is known here (created, read, written or announced
        on the event stream since the last reconnect: :meth:`seen`), else a read first."""
        # 2.x has no message edit; S2's session metadata holds the block. A PATCH replaces the
        # whole metadata object, so the other keys (the index, a key someone else wrote) are
        # written back as last known: one writer per roundtable, and another writer's change
        # reaches us as a session.metadata.updated event (one made in the moment before our
        # PATCH is lost, as it was with a read first).
        known = self._metadata.get(session.id)
        if known is None:
            known = dict((await self.client.get_session(session.id)).metadata or {})
        metadata = {k: v for k, v in known.items() if k != STATE_KEY}
        if hidden is not None or phase is not None:
            ours = metadata.get(META_KEY)
            ours = dict(ours) if isinstance(ours, Mapping) else {}
            if hidden is not None:
                ours["hidden"] = list(hidden)
            if phase is not None:
                ours["phase"] = phase
            metadata[META_KEY] = ours
        self._keep(session.id, metadata)
        metadata[STATE_KEY] = _v2_state_value(block)
        try:
            await self.client.update_session(session.id, metadata=metadata)
        except BaseException:
            # not known to have landed: the next write reads the session first
            self._metadata.pop(session.id, None)
            raise

    async def deliver_result(self, parent: SessionRef, text: str, key: str) -> str:
        # No exact noReply on 2.x: a synthetic record with resume false is parked in an idle
        # session's inbox and delivered (sent to the model as a user message, before the
        # prompt) with the next prompt. The id is the key's, so a second call returns the
        # stored record (a used id of the same kind answers with the original, parked or
        # delivered; only an id used by a prompt is a 409).
        mid = v2_delivery_id(key)
        await self.client.synthetic(
            parent.id,
            text,
            message_id=mid,
            description="roundtable result",
            metadata={DELIVERY_KEY: key},
            resume=False,
        )
        return mid

    async def notify(self, directory: str | None, title: str, message: str, variant: str) -> bool:
        # 2.x has no HTTP route for a toast (only a TUI plugin can show one)
        return False

    async def busy(self, session_id: str) -> bool:
        """Whether an execution runs in ``session_id`` now (``GET /api/session/active``, which
        lists the running sessions of every location)."""
        return session_id in await self.client.active()

    async def tool_call(
        self, session_id: str, message_id: str, call_id: str
    ) -> tuple[str | None, str, dict[str, Any]]:
        """Status (pending | running | completed | error), result text and result metadata of
        the tool call ``call_id`` in the assistant record ``message_id`` (a 2.x tool's
        ``messageID``: the record whose content holds the call's part); ``(None, "", {})`` when
        the record is gone (its session deleted)."""
        try:
            record = await self.client.message(session_id, message_id)
        except NotFound:
            return None, "", {}
        return v2.tool_call_of(record, call_id)

    async def unfinished(
        self, directory: str, *, limit: int = 1_000_000
    ) -> list[tuple[SessionRef, tuple[SignedState, ...]]]:
        """The sessions among ``directory``'s newest ``limit`` (every one, by default: a
        roundtable is resumed however many sessions came after it) whose metadata holds a state
        block and whose index phase (``metadata.roundtabled.phase``, written with the state) is
        not ``done``/``aborted``, each with its state block as :meth:`read_state` gives it (the
        listing carries the metadata: one read for all): the roundtables a restarted daemon
        resumes. Only the signed block decides whether one is ours
        (:func:`roundtabled.core.state.decode_state`)."""
        out: list[tuple[SessionRef, tuple[SignedState, ...]]] = []
        for info in await self.client.sessions(directory, limit=limit):
            meta = info.metadata or {}
            index = meta.get(META_KEY)
            phase = index.get("phase") if isinstance(index, Mapping) else None
            if STATE_KEY in meta and phase not in ("done", "aborted"):
                self._keep(info.id, meta)
                out.append((_v2_session(info), _v2_state(meta)))
        return out


async def port_for(
    url: str, *, password: str | None = None, username: str = "opencode", **client: Any
) -> ServerPort:
    """The port of the server at ``url``: :class:`V1Port` or :class:`V2Port` by what it answers
    (:func:`~roundtabled.opencode.detect.detect_server`). ``client``: more arguments of the
    client (``timeout``, ``max_concurrency``, …).

    Raises:
        UnsupportedServer: no answer, a missing or rejected password, or not OpenCode 1.x/2.x
            (the message names what was seen)."""
    found = await detect_server(url, password=password, username=username)
    return _port_of(found, url, password=password, username=username, **client)


async def port_after_reconnect(
    current: ServerPort,
    url: str,
    *,
    password: str | None = None,
    username: str = "opencode",
    **client: Any,
) -> ServerPort:
    """The port to use once the connection to ``url`` is back (the event stream reconnected):
    ``current`` when the same release still answers, else a new port for what answers now (a
    server upgraded or replaced in place, of either major), ``current`` then closed. Arguments
    as :func:`port_for`.

    Raises:
        UnsupportedServer: as :func:`port_for` (``current`` is left open)."""
    found = await detect_server(url, password=password, username=username)
    caps = current.capabilities
    if found.auth == "ok" and (found.major, found.version) == (caps.major, caps.version):
        return current
    port = _port_of(found, url, password=password, username=username, **client)
    await current.close()
    return port


def _port_of(
    found: ServerFound, url: str, *, password: str | None, username: str, **client: Any
) -> ServerPort:
    if not found.reachable:
        if found.major is not None:
            raise UnsupportedServer(f"{url}: {found.detail}")
        raise UnsupportedServer(f"no OpenCode server answers at {url}: {found.detail}")
    if found.auth != "ok":
        why = (
            "asks for a password and none is given"
            if found.auth == "missing"
            else "rejected the password given"
        )
        raise UnsupportedServer(f"OpenCode {found.major}.x at {url} {why}")
    if found.major == 1:
        return V1Port(
            OpenCodeClient(url, username=username, password=password, **client), found.version
        )
    if found.major == 2:
        return V2Port(
            v2.V2Client(url, username=username, password=password, **client), found.version
        )
    raise UnsupportedServer(f"{url} answers, but not as OpenCode 1.x or 2.x ({found.detail})")
