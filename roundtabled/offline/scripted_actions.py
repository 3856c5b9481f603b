"""Actions of the scripted LLM: what one model request is answered with.

:class:`roundtabled.offline.scripted_llm.ScriptedLLM` pops one action per request from its queues
(see that module for the routing). Every action is a frozen pydantic model, so a separate process
(the offline demo, ``POST /script``) can send them as JSON (``kind`` discriminates). Time units:
seconds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

# ----------------------------------------------------------------------------------------------
# Actions
# ----------------------------------------------------------------------------------------------


class _Action(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Seconds to wait before sending the response headers.
    first_byte_delay: float = 0.0
    #: Reported ``usage.prompt_tokens`` (default 100). A value near the model's context limit
    #: (e.g. 126000 of 128000) triggers OpenCode's auto-compaction when it is enabled.
    prompt_tokens: int | None = None
    #: Reported ``usage.completion_tokens`` (default 20).
    completion_tokens: int | None = None


class Text(_Action):
    """Stream ``text`` as content deltas of ``chunk_size`` characters, ``chunk_delay`` s apart.

    With ``reasoning`` set, that text is streamed first as ``reasoning_content`` deltas (OpenCode
    stores it as a ``reasoning`` part).
    """

    kind: Literal["text"] = "text"
    text: str
    reasoning: str | None = None
    chunk_size: int = Field(default=16, ge=1)
    chunk_delay: float = 0.0
    finish_reason: str = "stop"


class ToolCall(BaseModel):
    """One tool call: ``name`` and its ``arguments`` (sent JSON-encoded, split over 2 deltas)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None  # default: call_<request#>_<index>


class ToolCalls(_Action):
    """Stream one or more tool calls (optionally after some ``text``), finish ``tool_calls``.

    OpenCode runs the tools and calls again with the results (a ``tool-followup`` request), which
    is answered by the next queued action for the same key, else by a default text.
    """

    kind: Literal["tool_calls"] = "tool_calls"
    calls: list[ToolCall]
    text: str | None = None
    chunk_delay: float = 0.0


class HttpError(_Action):
    """Answer with HTTP ``status`` and ``{"error": {"message", "type", "code"}}``.

    ``retry_after`` (seconds) adds ``retry-after`` and ``retry-after-ms`` headers. OpenCode retries
    429/500/503 (about 71 s of back-off in total) and fails at once on 400.
    """

    kind: Literal["http_error"] = "http_error"
    status: int = 500
    message: str = "scripted error"
    error_type: str = "scripted_error"
    retry_after: float | None = None


class Hang(_Action):
    """Never send response headers; end only when the client disconnects (or the server stops).

    ``max_seconds`` bounds the hang (then a 504 is sent) so a forgotten hang cannot wedge a test.
    """

    kind: Literal["hang"] = "hang"
    max_seconds: float = 3600.0


class Stall(_Action):
    """Stream the first ``chunks_before`` chunks of ``text``, pause ``pause`` s, then the rest
    (a text of ≤ ``chunks_before`` chunks pauses before the finish chunk).

    Use a ``pause`` longer than the provider's ``chunkTimeout`` to provoke OpenCode's
    "SSE read timed out" retry; the disconnect is recorded.
    """

    kind: Literal["stall"] = "stall"
    text: str = "This reply stalls in the middle and then continues to the end."
    chunk_size: int = Field(default=16, ge=1)
    chunks_before: int = Field(default=2, ge=0)
    pause: float = 10.0


Action = Annotated[Text | ToolCalls | HttpError | Hang | Stall, Field(discriminator="kind")]
_ACTIONS = TypeAdapter(list[Action])


def parse_actions(data: object) -> list[Action]:
    """Actions from their JSON form (a list of objects, each with its ``kind``), as a script
    sent over HTTP carries them.

    Raises:
        pydantic.ValidationError: an item is no known action or has a bad field.
    """
    return _ACTIONS.validate_python(data)


def reasoning(reasoning_text: str, text: str, **kw: Any) -> Text:
    """Shorthand for a reasoning + text reply."""
    return Text(text=text, reasoning=reasoning_text, **kw)


def tool_call(name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> ToolCalls:
    """Shorthand for a single tool call."""
    return ToolCalls(calls=[ToolCall(name=name, arguments=arguments or {})], **kw)
