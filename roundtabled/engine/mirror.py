"""A per-turn replica of S2's messages built from the event stream (the fast handoff).

Why: a handoff that reads S2 before deciding (status + messages) and writes the state before
prompting costs three sequential server round trips, each waiting behind the server's own
post-turn work (session diff, storage), where the floor is the one prompt POST (measured in
``bench/README.md``, figure 1). The server sends every change of S2 as an event:
``message.updated`` carries the whole message ``info``, ``message.part.updated`` the whole part (a
text part's final update holds its full text; ``docs/opencode-server.md``, "the event stream"). A
:class:`TurnMirror` collects exactly those for one turn, so the engine can decide the handoff from
it without a read.

Trust rule (events stay hints unless the picture is provably complete): the engine decides from a
mirror only when

- the mirror was opened *before* the turn's prompt was sent and the event stream stayed connected
  since (same connection epoch), so no event about the turn can have been missed;
- the turn's own user message and its parts were seen;
- nothing made the picture doubtful (:attr:`TurnMirror.doubt`): a ``message.part.updated`` whose
  body was not parsed (huge payloads, see :data:`roundtabled.opencode.events.PEEK_THRESHOLD`),
  a removed message or part, a ``session.error``, a compaction, a message of anyone else (a person's
  interjection or the reply to it);
- a ``session.idle`` / ``session.status idle`` arrived after the last change of the turn's replies;
- and the pure machine, given that picture, decides to prompt the next turn (anything else —
  waiting, aborting, finishing — is decided from a read of S2 as before).

Everything else falls back to reading S2, and the periodic resync still reads S2 whatever the
events said: a missed or doubtful event costs a read, never a wrong decision.

Pure: no I/O, no asyncio (fed by :meth:`roundtabled.engine.registry.Engine.on_event`). Memory: one
turn's messages (the same a read of them would hold), dropped at the next prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roundtabled.opencode import events as ev

__all__ = ["TurnMirror"]


@dataclass
class TurnMirror:
    """S2's messages of one turn as the event stream reported them.

    Args:
        session_id: S2.
        since: the turn's own user message id (chosen by the daemon before the prompt is sent).
        epoch: the event stream's connection epoch when the mirror was opened
            (:attr:`roundtabled.engine.shell.Shell.stream_epoch`).
    """

    session_id: str
    since: str
    epoch: int
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Message id → the latest ``info`` seen (the user message and the replies to it)."""
    parts: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Message id → part id → the latest part seen."""
    idle: bool = False
    """A ``session.idle`` (or ``session.status idle``) arrived after the last change of a reply."""
    doubt: str | None = None
    """Why this mirror can no longer be trusted (``None``: complete so far)."""
    changes: int = 0
    """How many times a message or part of the turn changed (idles do not count): a decision
    taken from the mirror stands only while this is unchanged."""

    def feed(self, event: ev.Event) -> bool:
        """Apply one event of S2. Returns True when the event made the turn look finished (an
        idle after a completed reply): the caller then wakes the worker.

        Never raises; an event it cannot account for sets :attr:`doubt`.
        """
        etype = event.type
        props = event.properties
        if etype == ev.MESSAGE_UPDATED:
            info = props.get("info")
            if not isinstance(info, dict):
                self._doubt("message.updated without info")
                return False
            mid = info.get("id")
            if not isinstance(mid, str):
                self._doubt("message.updated without id")
                return False
            if info.get("role") == "user":
                if mid == self.since:
                    old = self.infos.get(mid)
                    self.infos[mid] = info
                    # Of the prompt's info a view reads only when it was created: the update the
                    # server sends after the idle (the turn's summary) changes no decision.
                    if old is None or old.get("time") != info.get("time"):
                        self.changes += 1
                elif mid > self.since:
                    self._doubt("another user message")  # a person's interjection
                return False  # an older user message (the previous turn's summary update)
            if info.get("parentID") == self.since:
                self.infos[mid] = info
                self.changes += 1
                self.idle = False
            elif mid > self.since:
                self._doubt("a reply to another message")
            return False
        if etype == ev.MESSAGE_PART_UPDATED:
            part = props.get("part")
            if not isinstance(part, dict):
                # A huge payload the stream did not parse (lazy peek): its content is unknown.
                self._doubt("a part update that was not parsed")
                return False
            mid, pid = part.get("messageID"), part.get("id")
            if not isinstance(mid, str) or not isinstance(pid, str):
                self._doubt("a part without ids")
                return False
            if mid == self.since or mid in self.infos or mid > self.since:
                self.parts.setdefault(mid, {})[pid] = part
                self.changes += 1
                if mid != self.since:
                    self.idle = False
            return False
        if etype in (ev.MESSAGE_REMOVED, MESSAGE_PART_REMOVED):
            self._doubt(etype)
            return False
        if etype == ev.SESSION_ERROR:
            self._doubt("session.error")
            return False
        if etype == ev.SESSION_COMPACTED:
            self._doubt("compaction")
            return False
        if etype == ev.SESSION_STATUS:
            status = event.status_type
            if status == "idle":
                return self._went_idle()
            self.idle = False
            return False
        if etype == ev.SESSION_IDLE:
            return self._went_idle()
        return False

    def _went_idle(self) -> bool:
        self.idle = True
        return self.doubt is None and any(
            (i.get("time") or {}).get("completed") for i in self._replies()
        )

    def _doubt(self, why: str) -> None:
        if self.doubt is None:
            self.doubt = why

    def _replies(self) -> list[dict[str, Any]]:
        return [i for mid, i in self.infos.items() if mid != self.since]

    def prompt_message(self) -> dict[str, Any] | None:
        """The turn's own user message as ``GET`` would list it (``{info, parts}``), once its
        info and parts were seen and nothing made the picture doubtful; else ``None``."""
        user = self.infos.get(self.since)
        user_parts = self.parts.get(self.since)
        if self.doubt is not None or user is None or not user_parts:
            return None
        return {"info": user, "parts": _ordered(user_parts)}

    def messages(self, *, ahead: bool = False) -> list[dict[str, Any]] | None:
        """The turn as ``GET /session/{id}/message`` would list it (``{info, parts}`` items, the
        user message first, parts in id order), or ``None`` when the mirror cannot stand in for
        a read (doubt, not idle, or the user message or its parts not seen).

        ``ahead``: the picture before the idle arrives (a decision taken ahead of it, used only
        if :attr:`changes` is the same once the idle came)."""
        if self.doubt is not None or not (self.idle or ahead):
            return None
        user = self.infos.get(self.since)
        user_parts = self.parts.get(self.since)
        if user is None or not user_parts:
            return None
        if set(self.parts) - set(self.infos):
            return None  # parts of a message whose info never came
        out = [{"info": user, "parts": _ordered(user_parts)}]
        for mid in sorted(m for m in self.infos if m != self.since):
            out.append({"info": self.infos[mid], "parts": _ordered(self.parts.get(mid, {}))})
        return out


MESSAGE_PART_REMOVED = "message.part.removed"


def _ordered(parts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    # Part ids ascend in creation order (``prt_`` + time), which is the order GET returns.
    return [parts[k] for k in sorted(parts)]
