"""Regression "the tool must never wedge the orchestrator".

Field failures: with the daemon down the ``roundtable`` tool hung the orchestrator's turn until
OpenCode's own timeout; with the daemon frozen (SIGSTOP, a laptop suspend, a debugger) aborting the
orchestrator's session did nothing because the tool awaited its cancel request; after the daemon
resumed, the result was posted into S1 twice; an interrupted ``install-tool`` left a half-written
shim that broke every tool listing; a project without network access lost both tools.

Proves, on the real ``opencode serve`` with the scripted model and the shims written by
``roundtabled/install.py``:

(a) daemon down → the tool returns ``Error:`` naming ``roundtabled serve`` in < 3 s;
(b) the daemon (a real subprocess) SIGSTOPped while the tool long-polls, the user aborts S1 → S1
    is idle within 5 s; after SIGCONT the roundtable's result reaches S1 once, never twice (slow);
(c) ``install_tools`` writes atomically (a failure at the rename leaves the old shim intact and no
    partial file), and a project whose OpenCode cannot reach a package registry still lists both
    tools (the finding of ``tests/e2e/test_tool_shim.py``: shims must not import packages).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roundtabled.offline.opencode_server import free_port
from roundtabled.offline.scripted_actions import Text, tool_call
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.service import install
from tests.conftest import OpenCodeFactory
from tests.e2e.conftest import roundtable_config
from tests.e2e.edge_helpers import ORCHESTRATOR_MODEL
from tests.e2e.test_tool_shim import oc, offline_project, run_tool, tool_files
from tests.fakes import daemon_proc
from tests.fakes.daemon_proc import DaemonProc, text_of


async def test_daemon_down_tool_returns_error_with_start_command_within_3_s(
    tmp_path: Path, scripted_llm: ScriptedLLM, opencode_factory: OpenCodeFactory
) -> None:
    """Exact failing input: the shims point at ``http://127.0.0.1:<free port>`` where nothing
    listens; the orchestrator calls ``roundtable({agents: [pm, dev], prompt: "x"})``."""
    server = await opencode_factory(files=tool_files(tmp_path, f"http://127.0.0.1:{free_port()}"))
    await oc(server, "GET", "/experimental/tool/ids", directory=str(server.project_dir))
    _, part = await run_tool(
        server, scripted_llm, "roundtable", {"agents": ["pm", "dev"], "prompt": "x"}
    )
    assert part.output.startswith("Error:"), part
    assert "roundtabled serve" in part.output
    assert part.ran_ms is not None and part.ran_ms < 3000, part


async def status_of(server: Any, directory: str) -> dict[str, Any]:
    return dict(await oc(server, "GET", "/session/status", directory=directory))


@pytest.mark.slow
async def test_sigstopped_daemon_abort_frees_s1_at_once_and_result_arrives_once(
    tmp_path: Path,
    scripted_llm: ScriptedLLM,
    opencode_factory: OpenCodeFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Exact failing input: daemon = ``python -m roundtabled serve`` subprocess; the orchestrator
    calls ``roundtable({agents: [pm, dev], prompt})``; pm's reply streams for ~4 s; the daemon is
    SIGSTOPped; ``POST /session/{S1}/abort``; 2 s later SIGCONT."""
    port = free_port()
    monkeypatch.setattr(daemon_proc, "free_port", lambda: port)
    root = tmp_path / "daemon"
    token_file = root / "config" / "roundtabled" / "token"
    staging = tmp_path / "staging"
    files = {
        ".opencode/" + p.relative_to(staging).as_posix(): p.read_text()
        for p in install.install_tools(
            staging, control_url=f"http://127.0.0.1:{port}", token_file=token_file
        )
    }
    server = await opencode_factory(roundtable_config(scripted_llm), files=files)
    directory = str(server.project_dir)
    daemon = DaemonProc(root, server.url, directory)
    async with aiohttp.ClientSession() as http:
        await daemon.start(http)
        try:
            scripted_llm.script(
                tool_call("roundtable", {"agents": ["pm", "dev"], "prompt": "Frozen daemon?"}),
                Text(text="The orchestrator goes on."),
                agent="build",
            )
            scripted_llm.script(
                Text(text="PM takes its time. " * 10, chunk_size=19, chunk_delay=0.4), agent="pm"
            )
            s1 = str((await oc(server, "POST", "/session", {}, directory=directory))["id"])
            await oc(
                server,
                "POST",
                f"/session/{s1}/prompt_async",
                {
                    "agent": "build",
                    "model": ORCHESTRATOR_MODEL,
                    "parts": [{"type": "text", "text": "Convene a roundtable."}],
                },
            )
            pm = (await scripted_llm.wait_for_requests(1, within=60, agent="pm"))[0]
            s2 = pm.session_id
            assert s2 is not None
            await asyncio.sleep(0.5)  # the tool is long-polling now
            os.kill(daemon.proc.pid, signal.SIGSTOP)
            try:
                t0 = time.monotonic()
                await oc(server, "POST", f"/session/{s1}/abort")
                while True:
                    st = await status_of(server, directory)
                    if s1 not in st or st[s1].get("type") == "idle":
                        break
                    assert time.monotonic() - t0 < 5.0, f"S1 still {st[s1]} after 5 s"
                    await asyncio.sleep(0.05)
                freed = time.monotonic() - t0
                await asyncio.sleep(2.0)
            finally:
                os.kill(daemon.proc.pid, signal.SIGCONT)
            assert freed < 5.0
            headers = {"Authorization": f"Bearer {daemon.token}"}

            async def done() -> dict[str, Any]:
                async with http.get(
                    f"{daemon.url}/v1/roundtables/{s2}/result",
                    params={"wait": "20"},
                    headers=headers,
                ) as resp:
                    return dict(await resp.json())

            deadline = time.monotonic() + 90
            result: dict[str, Any] = {}
            while time.monotonic() < deadline and not result.get("done"):
                result = await done()
            assert result.get("done"), result
            # Delivered, the worker returned, S1 idle: no second delivery can follow.
            await daemon.settled(http, s2)
            msgs = await oc(server, "GET", f"/session/{s1}/message")
        finally:
            daemon.kill_all()
    blob = [json.dumps(m, ensure_ascii=False) for m in msgs]
    delivered = [b for b in blob if result["summary"][:60] in b]
    assert len(delivered) == 1, [text_of(m)[:120] for m in msgs]


async def test_install_is_atomic_and_an_offline_project_lists_both_tools(
    tmp_path: Path,
    scripted_llm: ScriptedLLM,
    opencode_factory: OpenCodeFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Exact failing input: ``install_tools`` over an existing install with ``os.replace``
    failing (disk full / crash at the rename); then a project with no ``node_modules`` whose
    OpenCode's npm points at a dead registry (``npm_config_registry=http://127.0.0.1:9``)."""
    target = tmp_path / "tools-target"
    token = tmp_path / "token"
    old = install.install_tools(target, control_url="http://127.0.0.1:4747", token_file=token)
    before = {p: p.read_bytes() for p in old}

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(install.InstallError):
        install.install_tools(target, control_url="http://127.0.0.1:5858", token_file=token)
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in old} == before, "a shim was changed in place"
    # The offline preparation (install.prepare_offline) is written on purpose, not a stray.
    prepared = {target / n for n in ("package.json", "package-lock.json", ".gitignore")}
    strays = [p for p in target.rglob("*") if p.is_file() and p not in before and p not in prepared]
    assert not strays, strays
    # The offline project: the real shims, no package install possible.
    server = await opencode_factory(
        env={"npm_config_registry": "http://127.0.0.1:9", "npm_config_fetch_retries": "0"}
    )
    project = offline_project(server, "offline", tool_files(tmp_path, "http://127.0.0.1:9"))
    ids = await oc(server, "GET", "/experimental/tool/ids", directory=str(project))
    assert "roundtable" in ids and "available_agents" in ids
