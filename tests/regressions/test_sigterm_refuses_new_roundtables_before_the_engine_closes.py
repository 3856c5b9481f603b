"""Shutdown order: on SIGTERM the control API stops taking roundtables before the engine closes.

Field failure: a tool call that reached the daemon while it was stopping got a roundtable (S2
created, turn 1 prompted) that the engine's shutdown then cut; the caller was told it started.
Proves, on the real ``opencode serve``: from the moment the engine begins to close, ``POST
/v1/roundtables`` answers 503 with an ``Error:`` saying the daemon is shutting down, and no session
is created for it.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import RT


async def test_a_start_during_shutdown_gets_503_and_creates_nothing(rt: RT) -> None:
    """Exact failing input: the daemon is asked to stop (what its SIGTERM handler does); at the
    first instant of ``Engine.close`` a client sends ``POST /v1/roundtables`` with
    ``{"agents": ["pm", "dev"], "prompt": "Late start", "rounds": 1}``."""
    engine = rt.daemon.engine
    original = engine.close
    seen: list[tuple[int, Any]] = []
    sessions_before = len(await rt.oc("GET", "/session", params={"directory": rt.directory}))

    async def close_after_a_late_start(window: float = 8.0) -> None:
        seen.append(
            await rt.api(
                "POST",
                "/v1/roundtables",
                {
                    "agents": ["pm", "dev"],
                    "prompt": "Late start",
                    "rounds": 1,
                    "directory": rt.directory,
                },
                timeout=20,
            )
        )
        await original(window=window)

    engine.close = close_after_a_late_start  # type: ignore[method-assign]
    rt.daemon.request_stop()
    assert await rt.task == 0
    assert len(seen) == 1, seen
    status, body = seen[0]
    assert status == 503, body
    assert body["error"].startswith("Error:") and "shutting down" in body["error"], body
    sessions_after = await rt.oc("GET", "/session", params={"directory": rt.directory})
    assert len(sessions_after) == sessions_before, sessions_after
