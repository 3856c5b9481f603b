"""The command line as a user runs it: ``roundtabled ARGS`` through its real console entry point
(``.venv/bin/roundtabled`` as a subprocess), from a shell configured like the daemon under test.

Shared by the end-to-end CLI files and the regression files, so that every test drives the CLI
with the same environment.

- :func:`user_shell_env` is the caller's environment stripped of what a user's shell lacks.
- :func:`cli_env` adds what points that shell at one test's daemon and server.
- :func:`spawn` starts ``roundtabled ARGS``; :func:`cli` runs it to completion as a :class:`Run`.
- :func:`assert_clean_error` checks a run failed the way a user should see it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .conftest import RT

RT_BIN = Path(sys.executable).parent / "roundtabled"


@dataclass
class Run:
    """A finished CLI run."""

    code: int
    out: str
    err: str


def user_shell_env() -> dict[str, str]:
    """This process's environment as a user's shell would have it: no ``ROUNDTABLED_*`` or
    ``OPENCODE_*`` of the test run, UTF-8 output."""
    env = {
        k: v
        for k, v in os.environ.items()
        # a user's shell: no PYTHONUNBUFFERED (streaming through a pipe must not depend on it)
        if not k.startswith(("ROUNDTABLED_", "OPENCODE_")) and k != "PYTHONUNBUFFERED"
    }
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def cli_env(rt: RT, **extra: str) -> dict[str, str]:
    """The environment of a user shell configured like the daemon: same XDG dirs (token file),
    ``ROUNDTABLED_URL`` at its control API, ``ROUNDTABLED_SERVER_URL`` at the server; ``extra``
    last."""
    env = user_shell_env()
    env.update(rt.settings_env)
    env["ROUNDTABLED_URL"] = rt.control
    env["ROUNDTABLED_SERVER_URL"] = rt.server.url
    env.update(extra)
    return env


async def spawn(
    rt: RT, *args: str, env: dict[str, str] | None = None, cwd: str | None = None
) -> asyncio.subprocess.Process:
    """Start ``roundtabled ARGS`` with stdout and stderr piped (``env`` default
    :func:`cli_env`, ``cwd`` default the project directory)."""
    return await asyncio.create_subprocess_exec(
        str(RT_BIN),
        *args,
        env=env or cli_env(rt),
        cwd=cwd or rt.directory,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def cli(
    rt: RT,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    cwd: str | None = None,
) -> Run:
    """Run ``roundtabled ARGS`` to completion (``timeout`` s) and capture its output."""
    proc = await spawn(rt, *args, env=env, cwd=cwd)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(
            f"roundtabled {' '.join(args)} did not finish in {timeout} s"
        ) from None
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


def assert_clean_error(run: Run, code: int, *needles: str) -> None:
    """One ``Error:`` message on stderr, the exit code, no traceback."""
    assert run.code == code, run
    assert run.err.startswith("Error:"), run.err
    assert "Traceback" not in run.err
    for n in needles:
        assert n in run.err, (n, run.err)
