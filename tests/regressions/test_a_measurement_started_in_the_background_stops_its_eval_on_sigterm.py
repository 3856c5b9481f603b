"""``kill -TERM`` of ``python -m bench.eval_local`` started with ``&`` from a script (as the
measurement is run for hours) left the ``roundtabled eval`` running: the SIGTERM is passed on to
the eval as a SIGINT, and a shell without job control starts a background command with SIGINT
ignored, which the eval inherited. Seen stopping the code-reading run: no "still running;
waiting" line, the eval went on with its next question until it was killed by hand. Now the
measurement gives its children SIGINT back. Real server and daemon (the terminated-measurement
test's run, started with SIGINT ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.regressions.test_a_terminated_eval_local_leaves_no_server_or_daemon_running import (
    terminate_mid_question,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


async def test_a_measurement_started_in_the_background_stops_its_eval_on_sigterm(
    tmp_path: Path,
) -> None:
    await terminate_mid_question(tmp_path, sigint_ignored=True)
