"""OpenCode 1.x's JSON: sessions, messages, parts, statuses, tool calls, models, events.

The one place that knows the shapes a 1.x server sends and takes (``GET /session/{id}/message``
items ``{info, parts}``, ``GET /session/status``, session info with its ``metadata``, tool parts
with their ``state``, the ``prompt_async`` body, ``message.updated`` infos). It reads them into
the product's records (:mod:`roundtabled.core.messages`) that the core decides from, and builds
them from the core's commands; the core never sees this JSON (an import-linter contract holds
it). Pure: no I/O. The behaviours the shapes come from are listed in ``docs/opencode-server.md``;
docs/design.md, "The server port", says where each major's JSON lives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roundtabled.core.messages import (
    AnswerView,
    MessageView,
    Status,
    TextPart,
    UserView,
)
from roundtabled.core.state import (
    META_KEY,
    STATE_VERSION,
    TOOL_OUTPUT_PREVIEW_MAX,
    ModelRef,
    Phase,
    Signer,
    ToolCallSummary,
    Usage,
    has_meta_text,
    read_marker,
)
from roundtabled.opencode.session_metadata import opening_roundtable_of, opening_seat_of


def text_part_record(message_id: str, part: dict[str, Any]) -> TextPart:
    """The record of one text part of the message ``message_id`` (the part kept as its
    ``handle``, to be written back whole: :func:`part_body`, :func:`hidden`)."""
    return TextPart(
        message_id=message_id,
        id=str(part.get("id") or ""),
        text=str(part.get("text") or ""),
        handle=part,
    )


def _handle(part: TextPart) -> dict[str, Any]:
    """The part as the server stored it (:func:`text_part_record`).

    Raises:
        TypeError: a record this adapter did not read (it has no part to write back).
    """
    if not isinstance(part.handle, dict):
        raise TypeError(f"part {part.id} of {part.message_id} was not read from a 1.x server")
    return part.handle


def part_body(part: TextPart) -> dict[str, Any]:
    """``PATCH …/part/{id}``'s body for ``part`` with its (new) text: the stored part with only
    the text changed (the PATCH replaces the part in place: docs/opencode-server.md, "Messages
    and parts")."""
    return {**_handle(part), "text": part.text}


def is_state_part(part: dict[str, Any]) -> bool:
    """True when ``part`` (a part of ``GET …/message``) claims to be a state block, in either
    form: its metadata says ``kind: state``, or its text holds a META block. Claims only:
    :func:`roundtabled.core.state.decode_state` decides whether to trust it."""
    if part.get("type") != "text":
        return False
    md = part.get("metadata")
    ours = md.get(META_KEY) if isinstance(md, dict) else None
    if isinstance(ours, dict) and ours.get("kind") == "state":
        return True
    text = part.get("text")
    return isinstance(text, str) and has_meta_text(text)


def _text_of(parts: Sequence[dict[str, Any]]) -> str:
    """Reply text: non-empty text parts after the last ``step-start`` (a retried step keeps the
    failed attempt's empty parts before it, ``docs/opencode-server.md``, "retried steps")."""
    last_start = -1
    for i, p in enumerate(parts):
        if p.get("type") == "step-start":
            last_start = i
    texts = [
        str(p.get("text") or "")
        for i, p in enumerate(parts)
        if p.get("type") == "text" and (i > last_start or last_start < 0)
    ]
    joined = "\n\n".join(t for t in texts if t.strip())
    if joined or last_start < 0:
        return joined
    return "\n\n".join(
        str(p.get("text") or "") for p in parts if p.get("type") == "text" and p.get("text")
    )


def _tool_summary(part: dict[str, Any]) -> ToolCallSummary:
    st = part.get("state") or {}
    status = st.get("status")
    if status == "completed":
        preview = str(st.get("output") or "")[:TOOL_OUTPUT_PREVIEW_MAX]
    elif status == "error":
        preview = "error"
    else:
        preview = f"({status or 'pending'})"
    return ToolCallSummary(tool_name=str(part.get("tool") or "?"), output_preview=preview)


def message_view(raw: dict[str, Any], session_id: str, signer: Signer) -> MessageView:
    """Convert one ``{info, parts}`` of ``GET /session/{id}/message`` into a view.

    Markers are verified with ``signer`` against ``session_id``: a forged marker reads as none.
    """
    info = raw.get("info") or {}
    parts: list[dict[str, Any]] = list(raw.get("parts") or [])
    created = int((info.get("time") or {}).get("created") or 0)
    if info.get("role") == "user":
        marker = None
        state_block = False
        for p in parts:
            md = p.get("metadata")
            if p.get("ignored") and isinstance(md, dict) and "roundtabled" in md:
                if isinstance(md["roundtabled"], dict) and md["roundtabled"].get("kind") == "state":
                    state_block = True
                    continue
                marker = marker or read_marker(md, session_id, signer)
        visible = tuple(p for p in parts if p.get("type") == "text" and not p.get("ignored"))
        text = "\n\n".join(str(p.get("text") or "") for p in visible if not p.get("synthetic"))
        synthetic = bool(visible) and all(p.get("synthetic") for p in visible)
        compaction = any(p.get("type") == "compaction" for p in parts)
        return UserView(
            id=str(info.get("id")),
            created=created,
            marker=marker,
            text=text,
            synthetic=synthetic,
            compaction=compaction,
            state_block=state_block,
            visible_parts=tuple(text_part_record(str(info.get("id")), p) for p in visible),
        )
    tokens = info.get("tokens") or {}
    cache = tokens.get("cache") or {}
    error = info.get("error") or None
    return AnswerView(
        id=str(info.get("id")),
        parent_id=info.get("parentID"),
        agent=str(info.get("agent") or info.get("mode") or "?"),
        created=created,
        completed=bool((info.get("time") or {}).get("completed")),
        finish=info.get("finish"),
        error_name=(error or {}).get("name") if error else None,
        error_message=str(((error or {}).get("data") or {}).get("message") or "")
        if error
        else None,
        text=_text_of(parts),
        tool_calls=tuple(_tool_summary(p) for p in parts if p.get("type") == "tool"),
        files=tuple(
            str(p.get("filename") or p.get("url") or "file")
            for p in parts
            if p.get("type") == "file"
        ),
        usage=Usage(
            input=int(tokens.get("input") or 0),
            output=int(tokens.get("output") or 0),
            reasoning=int(tokens.get("reasoning") or 0),
            cache_read=int(cache.get("read") or 0),
            cache_write=int(cache.get("write") or 0),
            cost=float(info.get("cost") or 0.0),
        ),
        summary=bool(info.get("summary")),
    )


def message_views(
    raw: Sequence[dict[str, Any]], session_id: str, signer: Signer
) -> tuple[MessageView, ...]:
    """:func:`message_view` of each message, in order."""
    return tuple(message_view(m, session_id, signer) for m in raw)


# ----------------------------------------------------------------------------------------------
# Messages and parts
# ----------------------------------------------------------------------------------------------


def message_id(raw: dict[str, Any]) -> str | None:
    """The id of one ``{info, parts}`` message (``None`` when absent)."""
    mid = (raw.get("info") or {}).get("id")
    return mid if isinstance(mid, str) else None


def last_step_info(raw: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``info`` of the newest message of ``raw`` when there are two or more (a turn's prompt and
    at least one step), else ``{}``."""
    return dict(raw[-1].get("info") or {}) if len(raw) > 1 else {}


def ends_with_tool_calls(raw: Sequence[dict[str, Any]]) -> bool:
    """The newest step of a turn's messages ended asking for tools, without an error: the server
    may call the model again (only S2's real status tells whether it will)."""
    last = last_step_info(raw)
    return last.get("finish") == "tool-calls" and not last.get("error")


def hidden(part: TextPart) -> dict[str, Any]:
    """``PATCH …/part/{id}``'s body for ``part`` marked ``ignored`` (kept in S2, never sent to a
    model)."""
    new = dict(_handle(part))
    new["ignored"] = True
    return new


def visible_text_parts(raw: dict[str, Any]) -> list[TextPart]:
    """The text parts of one message that a model would see (not ``ignored``)."""
    mid = str((raw.get("info") or {}).get("id"))
    return [
        text_part_record(mid, p)
        for p in raw.get("parts") or []
        if p.get("type") == "text" and not p.get("ignored")
    ]


def meta_text_parts(raw: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(text, metadata)`` of each part of one message that claims to be a state block: the
    card form (``metadata.roundtabled.kind == "state"``) or the seed's META text form."""
    return [
        (str(part.get("text") or ""), part.get("metadata"))
        for part in raw.get("parts") or []
        if is_state_part(part)
    ]


def pasted_meta_ids(messages: Sequence[dict[str, Any]], state_message_id: str | None) -> list[str]:
    """Ids of the user messages (other than the state block) holding a META block in text."""
    out: list[str] = []
    for m in messages:
        info = m.get("info") or {}
        if info.get("role") != "user" or info.get("id") == state_message_id:
            continue
        if any(
            p.get("type") == "text" and has_meta_text(str(p.get("text") or ""))
            for p in m.get("parts") or []
        ):
            out.append(str(info.get("id")))
    return out


def reply_text_parts(
    messages: Sequence[dict[str, Any]], prompt_ids: Sequence[str]
) -> list[TextPart]:
    """The record of each text part that makes the reply text (:func:`_text_of`:
    after the last ``step-start``, not ``ignored``) of every assistant message of ``messages``
    answering one of ``prompt_ids`` (its ``parentID``), in order."""
    out: list[TextPart] = []
    for raw in messages:
        info = raw.get("info") or {}
        if info.get("role") != "assistant" or info.get("parentID") not in prompt_ids:
            continue
        parts: list[dict[str, Any]] = list(raw.get("parts") or [])
        starts = [i for i, p in enumerate(parts) if p.get("type") == "step-start"]
        first = starts[-1] + 1 if starts else 0
        out += [
            text_part_record(str(info.get("id")), p)
            for p in parts[first:]
            if p.get("type") == "text" and not p.get("ignored") and isinstance(p.get("id"), str)
        ]
    return out


def text_part(text: str) -> dict[str, Any]:
    """A visible text part of a new message."""
    return {"type": "text", "text": text}


def label_part(text: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """An ``ignored`` text part (a label for people, with the daemon's signed metadata)."""
    return {"type": "text", "text": text, "ignored": True, "metadata": metadata}


def block_part(part_id: str, text: str, meta: dict[str, Any]) -> dict[str, Any]:
    """The state block's part as a new message carries it (``POST …/message`` or
    ``prompt_async``): ``ignored``, under the daemon's own ``part_id`` so that it can be
    rewritten in place later (:func:`state_part`)."""
    return {"id": part_id, **label_part(text, meta)}


def has_part(raw: dict[str, Any], part_id: str) -> bool:
    """Whether one ``{info, parts}`` message holds the part ``part_id``."""
    return any(p.get("id") == part_id for p in raw.get("parts") or [])


def state_part(
    session_id: str, message_id: str, part_id: str, text: str, meta: dict[str, Any]
) -> dict[str, Any]:
    """The state block's part as ``PATCH …/part/{id}`` takes it."""
    return {
        "id": part_id,
        "sessionID": session_id,
        "messageID": message_id,
        "type": "text",
        "text": text,
        "ignored": True,
        "metadata": meta,
    }


def prompt_body(
    message_id: str,
    agent: str,
    text: str,
    label: str,
    marker: dict[str, Any],
    model: ModelRef | None,
    *,
    block: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The body of ``POST /session/{id}/prompt_async`` for a seat's or the observer's turn: the
    prompt ``text`` the model reads, then the ``ignored`` ``label`` people read, carrying the
    signed ``marker`` metadata. ``model`` is sticky per session on the server
    (``docs/opencode-server.md``, "sticky model"): the seat's own is always sent.

    ``block``: the state block's part (:func:`block_part`) when this prompt's message is the
    state block too (turn 1 of a fresh roundtable, docs/design.md "State format"). It goes
    first: the server writes a message's parts in the order given, and lists them in the order
    of their ids, where the daemon's id (chosen before S2 existed) sorts before the server's;
    so the block is written right after the message itself and read back where it was written.

    The prompt is ``synthetic``: the server sends synthetic text to the model like any other
    (only ``ignored`` parts stay out of its requests), while the pinned TUI does not show it in
    a user message, so a person reading the child session sees one header line per turn (the
    label), not the instructions (docs/design.md, "What the TUI shows")."""
    parts = [{**text_part(text), "synthetic": True}, label_part(label, marker)]
    if block is not None:
        parts.insert(0, block)
    body: dict[str, Any] = {"messageID": message_id, "agent": agent, "parts": parts}
    if model is not None:
        body["model"] = {"providerID": model.provider_id, "modelID": model.model_id}
    return body


def tool_call_state(raw: dict[str, Any], call_id: str) -> tuple[str, str, dict[str, Any]]:
    """Status (pending | running | completed | error), output and metadata (``{}`` when none) of
    the tool call ``call_id`` in one message; ``("pending", "", {})`` when the message has no
    such part yet."""
    for part in raw.get("parts") or []:
        if part.get("type") == "tool" and part.get("callID") == call_id:
            st = part.get("state") or {}
            meta = st.get("metadata")
            return (
                str(st.get("status")),
                str(st.get("output") or ""),
                meta if isinstance(meta, dict) else {},
            )
    return "pending", "", {}


# ----------------------------------------------------------------------------------------------
# Sessions, statuses, agents
# ----------------------------------------------------------------------------------------------


def session_status(statuses: dict[str, dict[str, Any]], session_id: str) -> Status:
    """The status of ``session_id`` in ``GET /session/status`` (an absent session is idle; the
    server's ``retry`` is its own state; anything else counts as busy)."""
    st = statuses.get(session_id)
    raw = "idle" if st is None else str(st.get("type") or "busy")
    if raw == "idle":
        return "idle"
    if raw == "retry":
        return "retry"
    return "busy"


def is_busy(statuses: dict[str, dict[str, Any]], session_id: str) -> bool:
    """The server lists only sessions that are not idle."""
    return session_id in statuses


def session_directory(session: dict[str, Any]) -> str | None:
    """A session's project directory."""
    d = session.get("directory")
    return d if isinstance(d, str) else None


def session_updated(session: dict[str, Any]) -> int:
    """When a session was last updated (``time.updated``, epoch ms); 0 when it does not say."""
    t = (session.get("time") or {}).get("updated")
    return int(t) if isinstance(t, int | float) else 0


def session_id(session: dict[str, Any]) -> str | None:
    """A session's ``id``."""
    i = session.get("id")
    return str(i) if i else None


def session_parent(session: dict[str, Any]) -> str | None:
    """A session's ``parentID``."""
    p = session.get("parentID")
    return str(p) if p else None


def opening_seat(session: dict[str, Any], roundtable: str) -> int | None:
    """The seat a child session holds in ``roundtable``'s independent opening, or ``None``."""
    md = session.get("metadata")
    return opening_seat_of(md if isinstance(md, dict) else None, roundtable)


def opening_roundtable(session: dict[str, Any]) -> str | None:
    """S2's id when ``session`` is a seat's session of that roundtable's independent opening,
    else ``None``."""
    md = session.get("metadata")
    return opening_roundtable_of(md if isinstance(md, dict) else None)


def index_metadata(
    phase: Phase, state_msg: str, state_part_id: str, *, finalized: bool
) -> dict[str, Any]:
    """The session metadata the start-up scan reads (``docs/design.md``, "state format")."""
    return {
        META_KEY: {
            "v": STATE_VERSION,
            "phase": phase.value,
            "stateMessageID": state_msg,
            "statePartID": state_part_id,
            "finalized": finalized,
        }
    }


def session_index(session: dict[str, Any]) -> dict[str, Any] | None:
    """The index :func:`index_metadata` wrote into a session's metadata, or ``None``."""
    idx = (session.get("metadata") or {}).get(META_KEY)
    return idx if isinstance(idx, dict) else None


def index_state_message(session: dict[str, Any]) -> str | None:
    """The state block's message id named by the session's index."""
    idx = session_index(session)
    mid = idx.get("stateMessageID") if idx else None
    return str(mid) if mid else None


def index_needs_recovery(session: dict[str, Any]) -> bool:
    """The index says the roundtable is running or not finalized (the start-up scan resumes it)."""
    idx = session_index(session)
    if idx is None:
        return False
    return idx.get("phase") in ("active", "observing") or not idx.get("finalized", True)


def path_directory(path: Any) -> str | None:
    """The server's own directory from ``GET /path``."""
    d = (path or {}).get("directory") if isinstance(path, dict) else None
    return d if isinstance(d, str) else None


PLUGIN_MARK = "roundtabled:roundtable-plugin-ran"
"""What the roundtable plugin's ``config`` hook adds to ``watcher.ignore`` of the configuration of
the instance it runs in (a pattern that matches no file): the mark of the plugin *running* in
that server process, which a listed file is not (``--pure`` lists the file and runs nothing)."""


def plugin_ran(config: Any) -> bool:
    """Whether ``GET /config`` of an instance carries :data:`PLUGIN_MARK` in ``watcher.ignore``:
    the roundtable plugin ran in that instance of the server that answered (docs/plugin.md)."""
    watcher = config.get("watcher") if isinstance(config, dict) else None
    ignore = watcher.get("ignore") if isinstance(watcher, dict) else None
    return isinstance(ignore, list) and PLUGIN_MARK in ignore


def provider_models(data: Any) -> set[str]:
    """The ``provider/model`` labels of ``GET /config/providers``
    (``{"providers": [{"id": "scripted", "models": {"debater-1": …}}]}``)."""
    labels: set[str] = set()
    providers = data.get("providers") if isinstance(data, dict) else None
    for prov in providers if isinstance(providers, list) else []:
        if isinstance(prov, dict) and isinstance(prov.get("models"), dict):
            labels.update(f"{prov.get('id')}/{mid}" for mid in prov["models"])
    return labels


def model_prices(data: Any) -> dict[str, tuple[float, float]]:
    """``provider/model`` → (input, output) price in USD per million tokens, from
    ``GET /config/providers`` (a model's ``cost: {"input": 3, "output": 15}``). A model without
    a ``cost`` object with both numbers is left out: its price is unknown, never 0. So is one
    whose price is 0 for both: the server reports ``{"input": 0, "output": 0}`` for every model
    without a configured cost (verified on the pinned server), which says nothing measured."""
    prices: dict[str, tuple[float, float]] = {}
    providers = data.get("providers") if isinstance(data, dict) else None
    for prov in providers if isinstance(providers, list) else []:
        models = prov.get("models") if isinstance(prov, dict) else None
        for mid, model in models.items() if isinstance(models, dict) else ():
            cost = model.get("cost") if isinstance(model, dict) else None
            if not isinstance(cost, dict):
                continue
            pin, pout = cost.get("input"), cost.get("output")
            if (
                isinstance(pin, int | float)
                and isinstance(pout, int | float)
                and not isinstance(pin, bool)
                and not isinstance(pout, bool)
                and (pin or pout)
            ):
                prices[f"{prov.get('id')}/{mid}"] = (float(pin), float(pout))
    return prices


def model_ref(value: Any) -> ModelRef | None:
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


def completed_assistant(info: Any) -> bool:
    """A message ``info`` (from ``message.updated``) of a completed assistant step."""
    return (
        isinstance(info, dict)
        and info.get("role") == "assistant"
        and bool((info.get("time") or {}).get("completed"))
    )


def answers(info: Any, parent_id: str) -> bool:
    """A message ``info`` (from ``message.updated``) of an assistant step answering the user
    message ``parent_id`` (created, completed or not: the server has started that turn's model
    call)."""
    return (
        isinstance(info, dict)
        and info.get("role") == "assistant"
        and info.get("parentID") == parent_id
    )


def updated_part_ids(props: dict[str, Any]) -> tuple[str, str] | None:
    """``(message id, part id)`` of a ``message.part.updated`` event's part (``None``: a part
    not parsed, or without ids)."""
    part = props.get("part")
    if not isinstance(part, dict):
        return None
    mid, pid = part.get("messageID"), part.get("id")
    if isinstance(mid, str) and isinstance(pid, str):
        return mid, pid
    return None


def ends_turn(info: Any, parent_id: str) -> bool:
    """A message ``info`` (from ``message.updated``) of a completed assistant step answering
    ``parent_id`` after which the server calls no model again: finish ``stop`` or ``length``,
    no error (``tool-calls`` continues with the tools' results, and after ``unknown`` the server
    calls the model again: ``docs/opencode-server.md``, "steps")."""
    return (
        completed_assistant(info)
        and info.get("parentID") == parent_id
        and info.get("finish") in ("stop", "length")
        and not info.get("error")
    )


def request_ids(props: dict[str, Any]) -> tuple[str, str] | None:
    """``(request id, session id)`` of a permission or question request, or ``None``."""
    rid = props.get("id")
    sid = props.get("sessionID")
    if isinstance(rid, str) and isinstance(sid, str):
        return rid, sid
    return None


def permission_summary(props: dict[str, Any]) -> str:
    """What a permission request asks for, for people (``bash git push``)."""
    return f"{props.get('permission')} {props.get('patterns') or ''}".strip()


def question_count(props: dict[str, Any]) -> int:
    """How many questions a question request holds (at least one)."""
    questions = props.get("questions")
    return len(questions) if isinstance(questions, list) and questions else 1


def session_error_text(props: dict[str, Any]) -> str:
    """``name: message`` of a ``session.error`` event's ``error`` (first line of the message, at
    most 300 characters: the server puts stack traces into some messages)."""
    raw = props.get("error")
    error: dict[str, Any] = raw if isinstance(raw, dict) else {}
    raw_data = error.get("data")
    data: dict[str, Any] = raw_data if isinstance(raw_data, dict) else {}
    name = str(error.get("name") or "error")
    message = str(data.get("message") or "").strip().splitlines()
    text = f"{name}: {message[0]}" if message else name
    return text[:300]


def prompt_reply(raw: Any) -> tuple[str, int, float, str | None]:
    """The answer of a synchronous ``POST /session/{id}/message`` (``{"info": assistant message,
    "parts": [...]}``): its text, tokens (input + output), cost (USD) and error name (``None``
    when it has none)."""

    def as_dict(value: Any) -> dict[str, Any]:
        return value if isinstance(value, dict) else {}

    data = as_dict(raw)
    info = as_dict(data.get("info"))
    parts = [p for p in data.get("parts") or [] if isinstance(p, dict)]
    tokens = as_dict(info.get("tokens"))
    error = as_dict(info.get("error")) or None
    return (
        _text_of(parts),
        int(tokens.get("input") or 0) + int(tokens.get("output") or 0),
        float(info.get("cost") or 0.0),
        str(error.get("name") or "error") if error else None,
    )
