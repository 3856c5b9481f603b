"""On OpenCode 2.x ``roundtabled start`` without ``--parent`` was refused with "give the
session's id", and a new user had no way to learn where such an id is. Now the same line says
it: ``opencode session list`` (OpenCode 2.x's own CLI) lists the project's sessions, exit 2 (the
real 2.x server; nothing reaches the model).
"""

from __future__ import annotations

import aiohttp
import pytest

from tests.e2e.test_v2_features import cli
from tests.e2e.test_v2_roundtable import Env, env
from tests.fakes.daemon_proc import DaemonProc

__all__ = ["env"]  # the 2.x server fixture, imported


async def test_the_refusal_names_opencode_session_list(
    env: Env, tmp_path_factory: pytest.TempPathFactory
) -> None:
    dp = DaemonProc(
        tmp_path_factory.mktemp("noparent"),
        env.server.url,
        env.directory,
        password=str(env.server.password),
    )
    async with aiohttp.ClientSession() as http:
        try:
            await dp.start(http)
            rc, out, err = await cli(dp, "start", "--agents", "pm,dev", "Monolith?")
        finally:
            dp.kill_all()
    lines = err.strip().splitlines()
    assert rc == 2, (out, err)
    assert len(lines) == 1 and lines[0].startswith("Error: --parent"), err
    assert "give that session's id" in lines[0] and "opencode session list" in lines[0], err
    assert env.llm.requests == [], "nothing was started"
