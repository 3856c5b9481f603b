"""The ``kill -9`` harness shared by ``test_kill_points.py`` and ``test_kill_points_opening.py``.

One real server, one project directory and one daemon subprocess per kill point (a daemon only
resumes roundtables of its own directories); each daemon runs with ``ROUNDTABLED_FAULT=<point>:<n>``
(:mod:`roundtabled.faults`), which SIGKILLs it the n-th time it passes that crash point, then a
fresh daemon without the fault finishes the debate on the same state. Kill points run in batches
of ``batch`` at once; what each test checks after the restart is its own ``check`` callable.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from roundtabled.core.state import CONCLUDED_SUFFIX, DELIMITER_TEXT, META_KEY, OBSERVER_AGENT
from roundtabled.offline.opencode_server import OpenCodeServer
from roundtabled.offline.scripted_llm import ScriptedLLM
from tests.fakes.daemon_proc import DaemonProc, text_of

from .conftest import server_call


@dataclass
class Case:
    """One kill point and what it produced."""

    point: str
    n: int
    daemon: DaemonProc
    s1: str = ""
    s2: str = ""
    killed: bool = False

    @property
    def fault(self) -> str:
        return f"{self.point}:{self.n}"


class Oc:
    """Minimal reader of the real server."""

    def __init__(self, server: OpenCodeServer, http: aiohttp.ClientSession) -> None:
        self.server = server
        self.http = http

    async def call(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None
    ) -> Any:
        return await server_call(
            self.http, self.server, method, path, body, params=params, timeout=60
        )


Check = Callable[[Case, Oc, ScriptedLLM], Awaitable[None]]
"""What a test proves of one case after the restarted daemon concluded the debate."""


async def run_case(case: Case, oc: Oc, http: aiohttp.ClientSession, debate: dict[str, Any]) -> None:
    """Start the debate under the fault, wait for the kill, restart, wait for the end.

    ``debate``: the start request's debate fields (``agents``, ``rounds``, ``opening``…); the
    prompt, ``parentSessionID`` and ``directory`` are added here.
    """
    d = case.daemon
    await d.start(http, case.fault)
    s1 = await oc.call("POST", "/session", {"title": "S1"}, {"directory": d.directory})
    case.s1 = str(s1["id"])
    body = {
        **debate,
        "prompt": f"Kill point {case.fault}: should we split the payments monolith?",
        "parentSessionID": case.s1,
        "directory": d.directory,
    }
    try:
        async with http.post(
            d.url + "/v1/roundtables",
            json=body,
            headers={"Authorization": f"Bearer {d.token}"},
            timeout=aiohttp.ClientTimeout(total=60),
        ) as resp:
            data = await resp.json()
            assert resp.status == 200, data
            case.s2 = str(data["sessionID"])
    except (aiohttp.ClientError, TimeoutError) as exc:
        # The start request sends turn 1 before answering: only a kill during it may cut it.
        await asyncio.wait_for(d.proc.wait(), 30)
        assert d.proc.returncode == -signal.SIGKILL, f"{case.fault}: start failed: {exc!r}"
    try:
        await asyncio.wait_for(d.proc.wait(), 180)
    except TimeoutError:
        raise AssertionError(f"{case.fault}: the kill point was never reached") from None
    case.killed = d.proc.returncode == -signal.SIGKILL
    assert case.killed, f"{case.fault}: daemon exited with {d.proc.returncode}, not SIGKILL"
    if not case.s2:
        children = await oc.call("GET", f"/session/{case.s1}/children")
        assert len(children) == 1, children
        case.s2 = str(children[0]["id"])
    await d.start(http, None)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        info = await oc.call("GET", f"/session/{case.s2}")
        idx = (info.get("metadata") or {}).get(META_KEY) or {}
        if idx.get("finalized") and str(info.get("title", "")).endswith(CONCLUDED_SUFFIX):
            break
        await asyncio.sleep(0.5)
    else:
        raise AssertionError(f"{case.fault}: the debate did not conclude after the restart")
    # Anything duplicated needs a worker or a busy session: counted once there is neither.
    await d.settled(http, case.s2)


async def assert_result_once(
    case: Case, oc: Oc, llm: ScriptedLLM, msgs: list[dict[str, Any]]
) -> str:
    """S2 (``msgs``) holds one delimiter and S1 exactly one message, holding the observer's
    summary once. Returns that summary."""
    f = case.fault
    assert sum(DELIMITER_TEXT in text_of(m) for m in msgs) == 1, f"{f}: delimiters"
    s1_msgs = await oc.call("GET", f"/session/{case.s1}/message")
    summary = llm.requests_for(session=case.s2, agent=OBSERVER_AGENT)[0].reply_text.strip()
    hits = sum(summary in text_of(m) for m in s1_msgs)
    assert hits == 1 and len(s1_msgs) == 1, f"{f}: result in S1 {hits}× ({len(s1_msgs)} msgs)"
    return summary


async def assert_clean_exit(case: Case) -> str:
    """The restarted daemon exits 0 on SIGTERM with no traceback in its log. Returns the log."""
    f = case.fault
    code = await case.daemon.terminate()
    assert code == 0, f"{f}: restarted daemon exited {code}"
    log = case.daemon.log()
    assert "Traceback" not in log, f"{f}: traceback in the daemon log:\n{log[-4000:]}"
    return log


async def run_batch(
    cases: list[Case],
    server: OpenCodeServer,
    llm: ScriptedLLM,
    debate: dict[str, Any],
    check: Check,
) -> list[BaseException | None]:
    """Run ``cases`` at once, then ``check`` each one that concluded; one error (or ``None``)
    per case, in order."""
    async with aiohttp.ClientSession() as http:
        oc = Oc(server, http)
        try:
            results = await asyncio.gather(
                *(run_case(c, oc, http, debate) for c in cases), return_exceptions=True
            )
            out: list[BaseException | None] = []
            for c, res in zip(cases, results, strict=True):
                if isinstance(res, BaseException):
                    out.append(res)
                    continue
                try:
                    await check(c, oc, llm)
                    out.append(None)
                except BaseException as exc:
                    out.append(exc)
            return out
        finally:
            for c in cases:
                c.daemon.kill_all()


def selected(points: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """``points``, or only those named in ``RT_KP_ONLY`` (``point:n,point:n``) when it is set."""
    only = os.environ.get("RT_KP_ONLY")
    return [kp for kp in points if not only or f"{kp[0]}:{kp[1]}" in only.split(",")]


async def run_kill_points(
    points: list[tuple[str, int]],
    *,
    server: OpenCodeServer,
    llm: ScriptedLLM,
    root: Path,
    project: str,
    debate: dict[str, Any],
    check: Check,
    batch: int,
    label: str,
) -> tuple[list[Case], list[str]]:
    """One daemon (under ``root``) and one project directory (``<project>NN``) per kill point,
    run ``batch`` at a time. Returns the cases and one line per failed case; prints
    ``<label>: N planned, K killed, P passed in S s``."""
    cases: list[Case] = []
    for i, (point, n) in enumerate(points):
        directory = await server.add_project(f"{project}{i:02d}")
        cases.append(
            Case(point, n, DaemonProc(root / f"daemon-{i:02d}", server.url, str(directory)))
        )
    t0 = time.monotonic()
    failures: list[str] = []
    for start in range(0, len(cases), batch):
        chunk = cases[start : start + batch]
        for c, err in zip(chunk, await run_batch(chunk, server, llm, debate, check), strict=True):
            if err is not None:
                failures.append(f"{c.fault}: {err!r}"[:2000])
    tried = sum(c.killed for c in cases)
    passed = len(cases) - len(failures)
    print(
        f"\n{label}: {len(cases)} planned, {tried} killed, {passed} passed "
        f"in {time.monotonic() - t0:.0f} s"
    )
    return cases, failures
