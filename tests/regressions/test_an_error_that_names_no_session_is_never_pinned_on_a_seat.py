"""Errors that name no session: ``session.error`` without ``sessionID``.

Field failure: the server publishes ``session.error`` with no ``sessionID`` for failures outside
any session (an MCP server that fails to start, a plugin). Such an error must not be taken as the
running seat's: that seat's turn is fine. It is still worth a line in the log, since the user's
configuration is broken. Proves, on the real ``opencode serve`` with the fault proxy (the error
is injected into the event stream while dev's turn runs; starting a broken MCP server produced
no such event on the pinned server): every turn is answered and none failed, the debate
completes, and one WARNING names the error's message.
"""

from __future__ import annotations

import logging
from typing import Any

from roundtabled.offline.scripted_actions import Text
from tests.e2e.edge_helpers import memory_state

from .conftest import LogCapture, inject_after_prompts, proxied_rt

MESSAGE = "MCP server 'broken' failed to start: spawn /nonexistent/mcp ENOENT"


async def test_a_session_less_error_during_a_turn_is_logged_and_not_the_seat_s(
    rt_factory: Any,
) -> None:
    """Exact failing input: pm, dev, rv × 1 round; dev's reply starts 1.5 s after its request;
    0.2 s after dev's ``prompt_async`` the stream carries ``{"type": "session.error",
    "properties": {"error": {"name": "UnknownError", "data": {"message": MESSAGE}}}}``."""
    rt, proxy = await proxied_rt(rt_factory)
    error = {
        "directory": rt.directory,
        "payload": {
            "type": "session.error",
            "properties": {"error": {"name": "UnknownError", "data": {"message": MESSAGE}}},
        },
    }
    # pm's prompt is the first, dev's the second
    prompts = inject_after_prompts(proxy, 0.2, lambda _: [error] if len(prompts) == 2 else [])
    rt.llm.script(Text(text="DEV: slow but sound.", first_byte_delay=1.5), agent="dev")
    try:
        with LogCapture() as logs:
            s2 = await rt.start(agents=["pm", "dev", "rv"], prompt="Stray error", rounds=1)
            result = await rt.result(s2, timeout=90)
            await rt.finalized(s2)
    finally:
        await proxy.stop()
    assert len(prompts) >= 2, prompts
    assert result["endReason"] == "completed", result
    state = memory_state(rt, s2)
    turns = state.seat_turns()
    assert [e.agent for e in turns] == ["pm", "dev", "rv"], turns
    assert not any(e.has_error for e in turns), [e for e in turns if e.has_error]
    assert turns[1].response.strip() == "DEV: slow but sound."
    assert not state.errors, state.errors
    warned = [line for line in logs.lines(logging.WARNING) if MESSAGE in line]
    assert len(warned) == 1, logs.lines(logging.WARNING)
