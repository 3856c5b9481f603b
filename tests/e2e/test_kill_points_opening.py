"""``kill -9`` of the daemon inside an independent opening round (docs/deliberation.md).

The harness of ``test_kill_points.py``: a real daemon subprocess with ``ROUNDTABLED_FAULT=
<point>:<n>`` SIGKILLs itself at a crash point of the parallel round (a seat's session created, its
prompt accepted, its answer settled, a record written); a fresh daemon on the same state finishes
the debate. From the server's truth: each seat has one session, prompted once (one model request
in it), one record in the roundtable's session; round 2 gives each seat exactly one turn, the
observer runs once, the result reaches S1 once, nothing raised. Marked ``slow``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roundtabled.state import (
    CONCLUDED_SUFFIX,
    DELIMITER_TEXT,
    META_KEY,
    OBSERVER_AGENT,
    read_marker,
)
from roundtabled.testing.opencode_server import OpenCodeServer
from roundtabled.testing.scripted_llm import ScriptedLLM
from roundtabled.wire import OPENING_KEY
from tests.fakes.daemon_proc import DaemonProc, observer_config

from .test_kill_points import Case, Oc, text_of

pytestmark = pytest.mark.slow

AGENTS = ["pm", "dev", "rv"]
ROUNDS = 2
# 3 seats: three sessions created and three prompts in one pass; the answers settle as they come;
# the records are the topic's (1), then the seats' (2-4).
KILL_POINTS: list[tuple[str, int]] = [
    ("opening-session-created", 1),
    ("opening-session-created", 3),
    ("opening-prompted", 1),
    ("opening-prompted", 2),
    ("opening-prompted", 3),
    ("opening-answered", 1),
    ("opening-answered", 3),
    ("opening-recorded", 1),
    ("opening-recorded", 2),
    ("opening-recorded", 4),
]
BATCH = int(os.environ.get("RT_KP_BATCH", "5"))


async def run_case(case: Case, oc: Oc, http: aiohttp.ClientSession) -> None:
    d = case.daemon
    await d.start(http, case.fault)
    s1 = await oc.call("POST", "/session", {"title": "S1"}, {"directory": d.directory})
    case.s1 = str(s1["id"])
    body = {
        "agents": AGENTS,
        "rounds": ROUNDS,
        "opening": "independent",
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
    await asyncio.sleep(1.5)  # anything duplicated would show up now


async def check_case(case: Case, oc: Oc, llm: ScriptedLLM) -> None:
    f, s2, signer = case.fault, case.s2, case.daemon.signer
    kids = [
        c
        for c in await oc.call("GET", f"/session/{s2}/children")
        if OPENING_KEY in (c.get("metadata") or {})
    ]
    seats = sorted(int(c["metadata"][OPENING_KEY]["seat"]) for c in kids)
    assert seats == [0, 1, 2], f"{f}: seat sessions {seats}"
    for c in kids:
        agent = AGENTS[int(c["metadata"][OPENING_KEY]["seat"])]
        msgs = await oc.call("GET", f"/session/{c['id']}/message")
        prompts = [m for m in msgs if m["info"]["role"] == "user"]
        assert len(prompts) == 1, f"{f}: {agent}'s session holds {len(prompts)} prompts"
        reqs = [r.agent for r in llm.requests_for(session=c["id"], kind="turn")]
        assert reqs == [agent], f"{f}: model requests in {agent}'s session {reqs}"
    msgs = await oc.call("GET", f"/session/{s2}/message")
    records: list[int] = []
    turns: list[tuple[int, int]] = []
    observers = 0
    for m in msgs:
        if m["info"]["role"] != "user":
            continue
        for p in m.get("parts") or []:
            marker = read_marker(p.get("metadata"), s2, signer)
            if marker is None:
                continue
            if marker.kind == "opening":
                records.append(marker.seat)
            elif marker.kind == "turn":
                turns.append((marker.round, marker.seat))
            elif marker.kind == "observer":
                observers += 1
    assert sorted(records) == [-1, 0, 1, 2], f"{f}: opening records {sorted(records)}"
    expected = [(r, s) for r in range(1, ROUNDS) for s in range(len(AGENTS))]
    assert sorted(turns) == expected, f"{f}: turn prompts in S2 {sorted(turns)}"
    assert observers == 1, f"{f}: {observers} observer prompts"
    reqs = [r.agent for r in llm.requests_for(session=s2, kind="turn")]
    assert reqs == AGENTS * (ROUNDS - 1) + [OBSERVER_AGENT], f"{f}: model requests {reqs}"
    assert sum(DELIMITER_TEXT in text_of(m) for m in msgs) == 1, f"{f}: delimiters"
    s1_msgs = await oc.call("GET", f"/session/{case.s1}/message")
    summary = llm.requests_for(session=s2, agent=OBSERVER_AGENT)[0].reply_text.strip()
    hits = sum(summary in text_of(m) for m in s1_msgs)
    assert hits == 1 and len(s1_msgs) == 1, f"{f}: result in S1 {hits}× ({len(s1_msgs)} msgs)"
    code = await case.daemon.terminate()
    assert code == 0, f"{f}: restarted daemon exited {code}"
    log = case.daemon.log()
    assert "Traceback" not in log, f"{f}: traceback in the daemon log:\n{log[-4000:]}"


async def run_batch(
    cases: list[Case], server: OpenCodeServer, llm: ScriptedLLM
) -> list[BaseException | None]:
    async with aiohttp.ClientSession() as http:
        oc = Oc(server, http)
        try:
            results = await asyncio.gather(
                *(run_case(c, oc, http) for c in cases), return_exceptions=True
            )
            out: list[BaseException | None] = []
            for c, res in zip(cases, results, strict=True):
                if isinstance(res, BaseException):
                    out.append(res)
                    continue
                try:
                    await check_case(c, oc, llm)
                    out.append(None)
                except BaseException as exc:
                    out.append(exc)
            return out
        finally:
            for c in cases:
                c.daemon.kill_all()


@pytest.mark.timeout(900)
async def test_kill_9_inside_the_independent_opening_each_seat_once_per_round(
    tmp_path: Path, scripted_llm: ScriptedLLM, opencode_factory: Any
) -> None:
    """Each crash point of the parallel round: after the kill and a restart, each seat's session
    was created once, prompted once and recorded once, round 2 ran each seat once, the observer
    once, and the result reached S1 once."""
    server: OpenCodeServer = await opencode_factory(observer_config(scripted_llm))
    only = os.environ.get("RT_KP_ONLY")
    points = [kp for kp in KILL_POINTS if not only or f"{kp[0]}:{kp[1]}" in only.split(",")]
    cases: list[Case] = []
    for i, (point, n) in enumerate(points):
        directory = await server.add_project(f"ko{i:02d}")
        cases.append(
            Case(point, n, DaemonProc(tmp_path / f"daemon-{i:02d}", server.url, str(directory)))
        )
    t0 = time.monotonic()
    failures: list[str] = []
    for start in range(0, len(cases), BATCH):
        batch = cases[start : start + BATCH]
        for c, err in zip(batch, await run_batch(batch, server, scripted_llm), strict=True):
            if err is not None:
                failures.append(f"{c.fault}: {err!r}"[:2000])
    tried = sum(c.killed for c in cases)
    print(
        f"\nopening kill points: {len(cases)} planned, {tried} killed, "
        f"{len(cases) - len(failures)} passed in {time.monotonic() - t0:.0f} s"
    )
    assert not failures, "\n".join(failures)
    assert tried == len(cases)
