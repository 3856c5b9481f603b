"""A new user's ``roundtabled extend ses_… PROMPT`` of an id no roundtable has exited 1 with the
server's raw error (``GET /api/session/ses_…: SessionNotFoundError…`` on 2.x; "session … does
not exist" on 1.x), while ``status``, ``watch``, ``export`` and ``cancel`` of the same id say
``Error: SES: no roundtable '…' is known to this daemon`` and exit 2. Now ``extend`` says that
same line and exits 2, on both majors (the real servers; only the model is scripted).
"""

from __future__ import annotations

import aiohttp
import pytest

from tests.e2e.demo_serve import DemoServe
from tests.e2e.test_v2_features import cli
from tests.e2e.test_v2_roundtable import Env, env
from tests.fakes.daemon_proc import DaemonProc

__all__ = ["env"]  # the 2.x server fixture, imported

UNKNOWN = "ses_unknown0000000000000000"
LINE = f"Error: SES: no roundtable '{UNKNOWN}' is known to this daemon"


def test_extend_on_1x_says_the_status_line_and_exits_2(demo: DemoServe) -> None:
    status = demo.cli("status", UNKNOWN)
    run = demo.cli("extend", UNKNOWN, "And the risks?")
    assert status.stderr.strip() == LINE, status.stderr
    assert (run.returncode, run.stderr.strip()) == (2, LINE), (run.stdout, run.stderr)


async def test_extend_on_2x_says_the_status_line_and_exits_2(
    env: Env, tmp_path_factory: pytest.TempPathFactory
) -> None:
    dp = DaemonProc(
        tmp_path_factory.mktemp("unknownextend"),
        env.server.url,
        env.directory,
        password=str(env.server.password),
    )
    async with aiohttp.ClientSession() as http:
        try:
            await dp.start(http)
            said = {}
            for argv in (("status", UNKNOWN), ("extend", UNKNOWN, "And the risks?")):
                rc, _out, err = await cli(dp, *argv)
                said[argv[0]] = (rc, err.strip())
            assert said == dict.fromkeys(said, (2, LINE)), (said, dp.log()[-2000:])
        finally:
            dp.kill_all()
