"""Transient write failures of the server: its SQLite write lock held by another process.

Field failure (public reports on OpenCode 1.18.29/1.18.30 with several OpenCode processes on one
database): the server answers 500 ``UnknownError`` (its log: ``Failed to execute statement …
database is locked``) to writes while another process holds the write lock, and a turn running
then ends in ``session.error`` of that name. The daemon gave up on its own writes after three
quick attempts (or at once for ``noReply`` messages) and took the seat's turn as failed.

Proves, on the real ``opencode serve`` with the scripted model: with the lock held from outside
(``BEGIN IMMEDIATE``, :mod:`tests.fakes.db_lock`) for 7 s when the state block is created (it
rides in turn 1's prompt, docs/design.md "State format"), again during a seat's turn and again
when the daemon writes the state block, the debate ends with one state block holding the
intended content, each seat prompted once per round and its text kept, the result delivered
once, and no traceback in the daemon's log.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from roundtabled.core.state import OBSERVER_AGENT, Phase
from roundtabled.offline.scripted_actions import Text
from roundtabled.opencode.v1_wire import is_state_part
from tests.e2e.conftest import RT
from tests.e2e.edge_helpers import stored_state
from tests.fakes.daemon_proc import assert_each_turn_once
from tests.fakes.db_lock import WriteLock

from .conftest import LogCapture

AGENTS = ["pm", "dev"]
ROUNDS = 2
LOCK_S = 7.0


async def test_lock_held_during_a_turn_and_during_the_state_write(rt: RT) -> None:
    """Exact failing input: pm, dev × 2 rounds; the write lock is taken for 7 s (1) when the
    daemon sends turn 1's prompt, whose message creates S2's state block, before it goes out
    (the server answers it and, 5 s later, reports the failed write with nothing stored: the
    daemon sends it again under its id, the block with it); (2) 0.2 s after pm's round-1
    request reaches the model (that reply streams in 12 chunks 0.15 s apart); (3) when the
    daemon sends its next state-block PATCH after that, before it goes out."""
    replies = {
        ("pm", 0): "PM round 1: ship the queue behind a feature flag, measured weekly.",
        ("dev", 0): "DEV round 1: the flag costs a day; the queue needs idempotent consumers.",
        ("pm", 1): "PM round 2: agreed on idempotency; the flag stays for rollback.",
        ("dev", 1): "DEV round 2: then we start with the consumer contract tests.",
    }
    rt.llm.script(Text(text=replies[("pm", 0)], chunk_size=6, chunk_delay=0.15), agent="pm")
    rt.llm.script(Text(text=replies[("pm", 1)]), agent="pm")
    rt.llm.script(*[Text(text=replies[("dev", r)]) for r in range(ROUNDS)], agent="dev")
    rt.llm.script(Text(text="SUMMARY: flag, idempotency, contract tests."), agent=OBSERVER_AGENT)
    lock = WriteLock(rt.server)
    client = rt.daemon.client
    original_patch, original_prompt = client.update_part, client.prompt_async
    locked_writes: list[str] = []

    async def prompt_async(session_id: str, body: dict[str, Any]) -> Any:
        if not locked_writes and any(is_state_part(p) for p in body["parts"]):
            locked_writes.append("state block created")
            await lock.hold(LOCK_S)
        return await original_prompt(session_id, body)

    async def update_part(session_id: str, message_id: str, part: dict[str, Any]) -> Any:
        # The third hold starts with the first state-block PATCH after the second hold ended.
        if len(lock.held) == 2 and len(locked_writes) == 1 and is_state_part(part):
            locked_writes.append("state block patched")
            await lock.hold(LOCK_S)
        return await original_patch(session_id, message_id, part)

    client.update_part = update_part  # type: ignore[method-assign]
    client.prompt_async = prompt_async  # type: ignore[method-assign]
    with LogCapture() as logs:
        s1 = await rt.new_parent()
        s2 = await rt.start(
            agents=AGENTS,
            prompt="Database lock: ship the queue?",
            rounds=ROUNDS,
            parentSessionID=s1,
        )
        await rt.llm.wait_for_requests(1, within=60, session=s2, agent="pm")
        await asyncio.sleep(0.2)
        await lock.hold(LOCK_S)
        result = await rt.result(s2, timeout=180)
        await rt.finalized(s2, timeout=60)
        await lock.released()
    assert len(lock.held) == 3, (lock.held, locked_writes)
    assert len(locked_writes) == 2, locked_writes
    assert result["endReason"] == "completed", result
    assert "SUMMARY: flag, idempotency, contract tests." in result["summary"]

    msgs = await rt.messages(s2)
    assert_each_turn_once(msgs, s2, rt.daemon.signer, rt.llm, AGENTS, ROUNDS, label="db lock")
    blocks = [p for m in msgs for p in m["parts"] if is_state_part(p)]
    assert len(blocks) == 1, f"{len(blocks)} state blocks in S2"
    state = await stored_state(rt, s2)
    assert state.phase == Phase.DONE, state.phase
    history = state.seat_turns()
    order = [(a, r) for r in range(ROUNDS) for a in AGENTS]
    assert [e.response.strip() for e in history] == [replies[k] for k in order]
    assert not any(e.has_error for e in history), [e for e in history if e.has_error]

    tracebacks = [r for r in logs.records if r.exc_info or "Traceback" in r.getMessage()]
    assert not tracebacks, [logging.Formatter().format(r) for r in tracebacks]
