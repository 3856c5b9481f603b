"""The state of an independent opening round (:mod:`roundtabled.core.opening` decides it).

Kept in :attr:`roundtabled.core.state.RoundtableState.openings` (persisted with the state block,
also once the round is done: a restart rebuilds round 1 of the history from it). Times are epoch ms.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from roundtabled.core.entries import HistoryEntry


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class OpeningSeat(_Model):
    """One seat's opening turn.

    ``session_id``: its child session once adopted (``None`` before); ``message_id``: the prompt's
    client-chosen id; ``record_id``: the client-chosen id of its record in the roundtable's
    session; ``entry``: the settled turn (``None`` while it runs); ``recorded``: the record is
    written (or was found written).
    """

    seat: int
    agent: str
    message_id: str = Field(alias="messageID")
    record_id: str = Field(alias="recordID")
    session_id: str | None = Field(default=None, alias="sessionID")
    prompted_at: int | None = None
    abort_requested_at: int | None = None
    entry: HistoryEntry | None = None
    recorded: bool = False


class OpeningRound(_Model):
    """The state of the independent opening round: one :class:`OpeningSeat` per seat and the
    topic record's id and whether it is written."""

    seats: list[OpeningSeat]
    topic_record_id: str = Field(alias="topicRecordID")
    topic_recorded: bool = False
    started_at: int = 0

    @property
    def settled(self) -> bool:
        """Every seat answered, failed or timed out."""
        return all(s.entry is not None for s in self.seats)

    @property
    def done(self) -> bool:
        """Every seat is settled and recorded: round 2 may start."""
        return self.settled and self.topic_recorded and all(s.recorded for s in self.seats)

    def entries(self) -> list[HistoryEntry]:
        """The settled turns in seat order (round 1 of the history)."""
        return [s.entry for s in self.seats if s.entry is not None]
