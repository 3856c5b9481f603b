"""The ``kill -9`` harness shared by ``test_kill_points.py`` and ``test_kill_points_opening.py``.

One real server, one project directory and one daemon subprocess per kill point (a daemon only
resumes roundtables of its own directories); each daemon runs with ``ROUNDTABLED_FAULT=<point>:<n>``
(:mod:`roundtabled.faults`), which SIGKILLs it the n-th time it passes that crash point, then a
fresh daemon without the fault finishes the debate on the same state. Kill points run in batches
of ``batch`` at once; what each test checks after the restart is its own ``check`` callable.

Each suite runs in every mode of the seat's view (docs/plugin.md), :data:`Mode`:

- ``patch``: no roundtable plugin; the daemon hides each answered turn prompt by a PATCH;
- ``plugin``: the plugin is installed in each case's project and reports to that case's daemon
  (a fixed control port across restarts); the prompts stay in S2 and the plugin leaves them out
  of each request; the restarted daemon waits for the plugin's report and goes on in that mode;
- ``plugin-removed``: a switch mid-way: the plugin is there for the daemon that is killed and
  gone (file deleted, the directory's instance disposed) for the restarted one, which must hide
  by a PATCH every prompt the plugin left visible before it prompts again.

In every mode :func:`assert_views` proves from the scripted model's requests that no seat saw an
earlier turn prompt.

Each suite runs for each :data:`Caller` too: ``none`` starts the roundtable through the control
API with nobody waiting for its result (the result goes to S1 as the fallback message);
``tool``: the orchestrator in S1 calls the real ``roundtable`` tool shim (installed in the case's
project, reporting to the case's daemon on its fixed port), which long-polls the daemon across
the kill and the restart: the restarted daemon's first answers to it included
(:func:`assert_delivered`).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import aiohttp

from bench.env import server_call
from roundtabled.core.state import (
    CONCLUDED_SUFFIX,
    DELIMITER_TEXT,
    META_KEY,
    MODE_NOTES,
    MODE_SWITCH_NOTES,
    OBSERVER_AGENT,
    ViewMode,
)
from roundtabled.offline.opencode_server import OpenCodeServer
from roundtabled.offline.scripted_actions import Text, tool_call
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.service import install
from tests.fakes.daemon_proc import DaemonProc, earlier_prompts_seen, signed_markers, text_of

Mode = Literal["patch", "plugin", "plugin-removed"]
"""How the seat's view is kept across the kill (module docstring)."""
MODES: tuple[Mode, ...] = get_args(Mode)
Caller = Literal["none", "tool"]
"""Who waits for the result across the kill (module docstring)."""
CALLERS: tuple[Caller, ...] = get_args(Caller)
START_CUT = {("state-created", 1), ("intent-persisted", 1), ("prompted", 1)}
"""Kill points passed inside the start request, before it is answered (turn 1's one POST, which
carries the state block: docs/design.md, "Exactly once")."""
ORCHESTRATOR_MODEL = {"providerID": "scripted", "modelID": "orchestrator-1"}
"""The model of S1's ``build`` agent that calls the tool."""


@dataclass
class Case:
    """One kill point and what it produced."""

    point: str
    n: int
    daemon: DaemonProc
    mode: Mode = "patch"
    caller: Caller = "none"
    s1: str = ""
    s2: str = ""
    killed: bool = False

    @property
    def fault(self) -> str:
        waiting = " tool-waiting" if self.caller == "tool" else ""
        return f"{self.mode}{waiting} {self.point}:{self.n}"

    @property
    def plugin_dir(self) -> Path:
        return Path(self.daemon.directory) / ".opencode" / install.PLUGIN_DIR


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


async def run_case(
    case: Case, oc: Oc, http: aiohttp.ClientSession, debate: dict[str, Any], llm: ScriptedLLM
) -> None:
    """Start the debate under the fault, wait for the kill, restart, wait for the end.

    ``debate``: the start request's debate fields (``agents``, ``rounds``, ``opening``…); the
    prompt, ``parentSessionID`` and ``directory`` are added here (for the ``tool`` caller: the
    tool call's arguments, the prompt added).
    """
    d = case.daemon
    await d.start(http, f"{case.point}:{case.n}")
    s1 = await oc.call("POST", "/session", {"title": "S1"}, {"directory": d.directory})
    case.s1 = str(s1["id"])
    if case.mode != "patch":
        # Creating S1 loaded the project's instance, whose plugin reports to the daemon; turn 1
        # runs in the plugin mode only once the daemon trusts that report (before, it rightly
        # runs in the patch mode: docs/plugin.md), so the case starts on that signal.
        await _plugin_trusted(case, http)
    prompt = f"Kill point {case.fault}: should we split the payments monolith?"
    if case.caller == "tool":
        await _call_the_tool(case, oc, llm, {**debate, "prompt": prompt})
    else:
        await _post_start(case, http, {**debate, "prompt": prompt})
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
    if case.mode == "plugin-removed":
        await remove_plugin(case, oc)
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


async def _plugin_trusted(case: Case, http: aiohttp.ClientSession, timeout: float = 60) -> None:
    """Wait until the case's daemon lists a trusted plugin report for its project
    (``GET /v1/health`` ``plugin.reports``, docs/control-api.md)."""
    d = case.daemon
    want = os.path.realpath(d.directory)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        async with http.get(
            d.url + "/v1/health", headers={"Authorization": f"Bearer {d.token}"}
        ) as resp:
            health = await resp.json()
        reports = (health.get("plugin") or {}).get("reports") or []
        if any(os.path.realpath(str(r.get("directory"))) == want for r in reports):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{case.fault}: the daemon never trusted the plugin's report")


async def _call_the_tool(case: Case, oc: Oc, llm: ScriptedLLM, arguments: dict[str, Any]) -> None:
    """S1's orchestrator calls the ``roundtable`` tool with ``arguments`` (its turn goes on
    with one line once the tool returned); S2 is learnt from S1's children."""
    llm.script(
        tool_call("roundtable", arguments),
        Text(text="The orchestrator goes on."),
        agent="build",
        session=case.s1,
    )
    await oc.call(
        "POST",
        f"/session/{case.s1}/prompt_async",
        {
            "agent": "build",
            "model": ORCHESTRATOR_MODEL,
            "parts": [{"type": "text", "text": "Convene a roundtable."}],
        },
    )


async def _post_start(case: Case, http: aiohttp.ClientSession, debate: dict[str, Any]) -> None:
    """Start the roundtable through the control API, nobody waiting for its result."""
    d = case.daemon
    body = {**debate, "parentSessionID": case.s1, "directory": d.directory}
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


def _held_port() -> int:
    """A free port below the kernel's ephemeral range: the case's daemon listens on it across
    its restarts and it stays unbound for minutes meanwhile, so it must not be one that
    ``free_port`` (an ephemeral port) can hand to a test in another worker."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise AssertionError("no free port in 20000-32000")


def install_plugin(case: Case, staging: Path) -> None:
    """Put what ``roundtabled install-tool`` installs into the case's project, reporting to the
    case's daemon, before the server loads the project: the roundtable plugin in the plugin
    modes, the tool shims for the ``tool`` caller (the observer agent the suites' config
    defines)."""
    token = case.daemon.root / "config" / "roundtabled" / "token"
    skip = {install.AGENT_DIR}
    if case.mode == "patch":
        skip.add(install.PLUGIN_DIR)
    if case.caller != "tool":
        skip.add(install.TOOL_DIR)
    for path in install.install_tools(staging, control_url=case.daemon.url, token_file=token):
        rel = path.relative_to(staging)
        if rel.parts[0] in skip or rel.parts[0] not in (
            install.TOOL_DIR,
            install.PLUGIN_DIR,
            install.CONTROL_DIR,
        ):
            continue
        dest = Path(case.daemon.directory) / ".opencode" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(path.read_text())


async def remove_plugin(case: Case, oc: Oc) -> None:
    """Take the plugin out of the project's instance while the daemon is down: once a prompt
    the killed daemon sent has run to its end with the plugin (a dispose aborts a running turn),
    delete the file and dispose the instance (OpenCode loads plugins once per instance: the
    next request loads one without)."""
    where = {"directory": case.daemon.directory}
    deadline = time.monotonic() + 60
    while not await _latest_prompt_answered(case, oc) or (
        await oc.call("GET", "/session/status", params=where)
    ).get(case.s2):
        assert time.monotonic() < deadline, f"{case.fault}: S2's last prompt never ended"
        await asyncio.sleep(0.1)
    for path in case.plugin_dir.iterdir():
        path.unlink()
    await oc.call("POST", "/instance/dispose", params=where)


async def _latest_prompt_answered(case: Case, oc: Oc) -> bool:
    """Whether the latest daemon prompt of S2 (a turn's or the observer's) and of each seat's own
    session of the independent opening has a completed reply that ended its turn (no prompt:
    nothing to wait for)."""
    sessions = [case.s2] + [
        str(c["id"]) for c in await oc.call("GET", f"/session/{case.s2}/children")
    ]
    for sid in sessions:
        msgs = await oc.call("GET", f"/session/{sid}/message")
        prompts = [
            m
            for m in msgs
            if m["info"]["role"] == "user"
            and (
                sid != case.s2  # a seat's own session holds its opening prompt only
                or any(
                    x.kind in ("turn", "observer")
                    for x in signed_markers([m], case.s2, case.daemon.signer)
                )
            )
        ]
        if not prompts:
            continue
        pid = prompts[-1]["info"]["id"]
        if not any(
            r["info"].get("time", {}).get("completed")
            and r["info"].get("finish") not in (None, "tool-calls", "unknown")
            for r in msgs
            if r["info"].get("parentID") == pid
        ):
            return False
    return True


async def assert_views(case: Case, oc: Oc, llm: ScriptedLLM, msgs: list[dict[str, Any]]) -> None:
    """No seat's model request held an earlier turn prompt, whichever mode ran it
    (:func:`tests.fakes.daemon_proc.earlier_prompts_seen`), and the result names the modes the
    debate ran in: the one of the case, or the switch for ``plugin-removed``."""
    f = case.fault
    seen = earlier_prompts_seen(msgs, case.s2, case.daemon.signer, llm)
    assert not seen, f"{f}: {seen}"
    # The modes S2's prompts ran in, in order (a marker's view; none: the PATCH mode), and the
    # one line of the result that says them.
    ran: list[ViewMode] = []
    for m in signed_markers(msgs, case.s2, case.daemon.signer):
        mode: ViewMode = m.view or "patch"
        if m.kind in ("turn", "observer") and mode not in ran:
            ran.append(mode)
    allowed: dict[Mode, list[list[ViewMode]]] = {
        "patch": [["patch"]],
        "plugin": [["plugin"]],
        # killed before S2's first prompt, or after its last (the observer's)
        "plugin-removed": [["plugin", "patch"], ["patch"], ["plugin"]],
    }
    assert ran in allowed[case.mode], f"{f}: S2's prompts ran in {ran}"
    expected = [MODE_NOTES[ran[0]] if len(ran) == 1 else MODE_SWITCH_NOTES[(ran[0], ran[1])]]
    notes = (await daemon_status(case, oc))["result"]["status"]["notes"]
    said = [n for n in (*MODE_NOTES.values(), *MODE_SWITCH_NOTES.values()) if n in notes]
    if ran == ["plugin"] and case.mode == "plugin-removed":
        # Killed after the observer's prompt: the restarted daemon hid the answered prompts by
        # a PATCH before finishing (what the patch mode needs), and may say the switch.
        assert said in ([MODE_NOTES["plugin"]], [MODE_SWITCH_NOTES[("plugin", "patch")]]), said
    else:
        assert said == expected, f"{f}: the modes {ran} said as {said}"


async def daemon_status(case: Case, oc: Oc) -> dict[str, Any]:
    """The case's concluded roundtable as its (restarted) daemon's control API reports it
    (``result``: the result contract, docs/result.md)."""
    async with oc.http.get(
        f"{case.daemon.url}/v1/roundtables/{case.s2}",
        headers={"Authorization": f"Bearer {case.daemon.token}"},
    ) as resp:
        data: dict[str, Any] = await resp.json()
        assert resp.status == 200, data
        return data


async def assert_result_once(
    case: Case, oc: Oc, llm: ScriptedLLM, msgs: list[dict[str, Any]]
) -> str:
    """S2 (``msgs``) holds one delimiter and S1 exactly one message, holding the observer's
    summary once. Returns that summary."""
    f = case.fault
    assert sum(DELIMITER_TEXT in text_of(m) for m in msgs) == 1, f"{f}: delimiters"
    s1_msgs = await oc.call("GET", f"/session/{case.s1}/message")
    summary = llm.requests_for(session=case.s2, agent=OBSERVER_AGENT)[0].reply_text.strip()
    if case.caller == "tool":
        await assert_delivered(case, llm, s1_msgs, summary)
        return summary
    hits = sum(summary in text_of(m) for m in s1_msgs)
    assert hits == 1 and len(s1_msgs) == 1, f"{f}: result in S1 {hits}× ({len(s1_msgs)} msgs)"
    return summary


def _holds(text: str, summary: str) -> bool:
    """Whether ``text`` holds ``summary``, as it is or escaped in JSON (the tool's output)."""
    return summary in text or json.dumps(summary, ensure_ascii=False)[1:-1] in text


async def assert_delivered(
    case: Case, llm: ScriptedLLM, s1_msgs: list[dict[str, Any]], summary: str
) -> None:
    """The ``tool`` caller: S1 holds the result exactly once, in the tool call's part or as the
    fallback message, never both, never neither; the tool call that waited across the kill got
    the result (with the daemon's mark) from the restarted daemon, whose first answers to it
    were no error. It may end without the result only if it never waited: the kill cut the
    start request (:data:`START_CUT`: no roundtable id to wait on, and a second start would be
    a second S2), or the plugin's removal disposed the project's instance, which may abort S1's
    turn. No model ran on the fallback message."""
    f = case.fault
    tools = [
        p
        for m in s1_msgs
        for p in m.get("parts") or []
        if p.get("type") == "tool" and p.get("tool") == "roundtable"
    ]
    assert len(tools) == 1, f"{f}: {len(tools)} roundtable tool calls in S1"
    state = tools[0].get("state") or {}
    output = str(state.get("output") or state.get("error") or "")
    in_tool = _holds(output, summary)
    fallbacks = [m for m in s1_msgs if m["info"]["role"] == "user" and _holds(text_of(m), summary)]
    assert in_tool + len(fallbacks) == 1, (
        f"{f}: result in S1 {in_tool + len(fallbacks)}× (tool: {output[:300]!r})"
    )
    if in_tool:
        assert (state.get("metadata") or {}).get(META_KEY), f"{f}: no delivery mark: {state}"
    else:
        assert (case.point, case.n) in START_CUT or case.mode == "plugin-removed", (
            f"{f}: the waiting tool call ended without the result: {output[:300]!r}"
        )
    asked = llm.requests_for(session=case.s1)
    assert len(asked) <= 2, f"{f}: {len(asked)} model requests in S1"


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
                *(run_case(c, oc, http, debate, llm) for c in cases), return_exceptions=True
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
    mode: Mode = "patch",
    caller: Caller = "none",
) -> tuple[list[Case], list[str]]:
    """One daemon (under ``root``) and one project directory (``<project>NN``) per kill point,
    run ``batch`` at a time. Returns the cases and one line per failed case; prints
    ``<label>: N planned, K killed, P passed in S s``."""
    cases: list[Case] = []
    for i, (point, n) in enumerate(points):
        directory = await server.add_project(f"{project}{i:02d}")
        daemon = DaemonProc(root / f"daemon-{i:02d}", server.url, str(directory))
        case = Case(point, n, daemon, mode, caller)
        if mode != "patch" or caller == "tool":
            daemon.port, daemon.keep_port = _held_port(), True
            install_plugin(case, root / f"staging-{i:02d}")
        cases.append(case)
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
        f"\n{label} ({mode}, caller {caller}): {len(cases)} planned, {tried} killed, "
        f"{passed} passed in {time.monotonic() - t0:.0f} s"
    )
    return cases, failures
