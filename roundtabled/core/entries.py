"""A roundtable's history entries: one contribution each (a seat's turn, the observer, a person),
with its tool calls and the server's usage. A module of its own so that the state
(:mod:`roundtabled.core.state`) and the opening round's models
(:mod:`roundtabled.core.opening_model`) both build on it without importing each other;
:mod:`roundtabled.core.state` re-exports every name.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from roundtabled.core.positions import Position


class StateModel(BaseModel):
    """The base of every persisted model: camelCase names on the wire, unknown keys ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def dump(self) -> dict[str, Any]:
        """The JSON-ready form with the spec's camelCase names."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Usage(StateModel):
    """Tokens and cost (USD) as OpenCode records them on assistant messages."""

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0

    def plus(self, other: Usage) -> Usage:
        """The sum of two usages."""
        return Usage(
            input=self.input + other.input,
            output=self.output + other.output,
            reasoning=self.reasoning + other.reasoning,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            cost=self.cost + other.cost,
        )

    @property
    def total_tokens(self) -> int:
        """Input + output + reasoning tokens."""
        return self.input + self.output + self.reasoning


class ToolCallSummary(StateModel):
    """A tool an agent ran: its name and the first 500 characters of output, or ``"error"``."""

    tool_name: str
    output_preview: str


EntryKind = Literal["turn", "observer", "user", "interjection"]


class HistoryEntry(StateModel):
    """One contribution to the debate (spec §5 ``HistoryEntry``, extended).

    ``kind``: ``turn`` (a seat's turn), ``observer`` (the consolidation), ``user`` (a person wrote
    in S2, spec §7.4), ``interjection`` (the server's reply to that person's message).
    ``round`` is 1-based. ``response`` is the plain text of the reply (non-empty text parts, no
    reasoning); ``cut_off`` marks a turn aborted at the timeout whose partial text was kept.
    """

    agent: str
    round: int
    response: str
    tool_calls: list[ToolCallSummary] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    has_error: bool = False
    error: str | None = None
    cut_off: bool = False
    kind: EntryKind = "turn"
    seat: int | None = None
    message_id: str | None = Field(default=None, alias="messageID")
    usage: Usage = Field(default_factory=Usage)
    started_at: int | None = None
    finished_at: int | None = None
    finish: str | None = None
    """The last step's finish reason as the server recorded it (``stop``, ``length`` = cut at the
    output limit, ``tool-calls``, …); ``None`` when no reply was stored."""
    position: Position | None = None
    """The closing ``Position:`` line of the reply (``None``: the reply states none; see
    docs/result.md, never guessed)."""
    changed: str | None = None
    """The reply's ``Changed:`` line: why the seat's position changed (docs/result.md)."""

    @property
    def cut_by_cancel(self) -> bool:
        """A turn cut off by a cancel (its ``error`` says so), not at the time limit."""
        return self.cut_off and "cancel" in (self.error or "")
