"""Stream health after a reconnect: the server went away and came back.

Field failure: after the OpenCode server was restarted under a running daemon, ``GET /v1/health``
kept the old ``lastError`` ("connection refused") and ``roundtabled doctor`` said the event stream
was down (exit 1) although debates ran again. Proves, on the real ``opencode serve``: once the
stream has reconnected, ``lastError`` is ``null``, one INFO line says the stream is back, a debate
runs, and ``doctor`` exits 0 with every check passed.
"""

from __future__ import annotations

import logging

from roundtabled.offline.scripted_actions import Text
from tests.e2e.cli_helpers import cli
from tests.e2e.conftest import RT
from tests.e2e.edge_helpers import wait_for

from .conftest import LogCapture


async def test_doctor_passes_after_the_server_restarted_under_the_daemon(rt: RT) -> None:
    """Exact failing input: the default environment; the server is stopped (SIGTERM) and
    started again on the same port and data directory while the daemon runs; then a 2-seat,
    1-round debate, ``GET /v1/health`` and ``roundtabled doctor``."""
    stream = rt.daemon.stream
    with LogCapture() as logs:
        connects = stream.connects
        await rt.server.stop()
        await wait_for(lambda: stream.last_error is not None, 30, "the stream to notice")
        await rt.server.restart()
        assert rt.server.url == rt.daemon.settings.server_url, "the port was not reused"
        await wait_for(lambda: stream.connects > connects, 60, "the stream to reconnect")
    back = [line for line in logs.lines(logging.INFO) if "is back" in line]
    assert len(back) == 1, logs.lines(logging.INFO)
    assert back[0].startswith("INFO "), back

    rt.llm.script(Text(text="PM: after the restart."), agent="pm")
    rt.llm.script(Text(text="DEV: still here."), agent="dev")
    s2 = await rt.start(agents=["pm", "dev"], prompt="After a server restart", rounds=1)
    result = await rt.result(s2, timeout=120)
    assert result["endReason"] == "completed", result

    status, health = await rt.api("GET", "/v1/health")
    assert status == 200, health
    assert health["server"]["connected"] is True, health
    assert health["server"]["lastError"] is None, health
    run = await cli(rt, "doctor")
    assert run.code == 0, run.out + run.err
    assert "All checks passed." in run.out, run.out
