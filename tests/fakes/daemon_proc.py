"""A roundtabled daemon as a real subprocess (``python -m roundtabled serve``), for the fault
suite: its own ``XDG_CONFIG_HOME`` (token, signing key) and ``XDG_STATE_HOME``, settings through
``ROUNDTABLED_*`` variables, stdout+stderr appended to ``<root>/daemon.log``; optional
``ROUNDTABLED_FAULT=<point>:<n>`` (see :mod:`roundtabled.faults`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from roundtabled.core.state import META_KEY, OBSERVER_AGENT, Marker, Signer, read_marker
from roundtabled.offline.opencode_server import free_port, offline_config
from roundtabled.offline.scripted_llm import ScriptedLLM, content_text
from roundtabled.service.daemon import load_signer

OBSERVER_PROMPT = "You are the roundtable observer: consolidate the debate you are shown."


def observer_config(llm: ScriptedLLM) -> dict[str, Any]:
    """The seats on their own models plus the built-in observer agent defined in the config
    (what ``roundtabled install-tool`` installs), so this file needs no tool shim."""
    seats = {"pm": "debater-1", "dev": "debater-2", "rv": "debater-3"}
    return offline_config(
        llm.base_url,
        extra_agents={
            **{name: {"model": f"scripted/{mid}"} for name, mid in seats.items()},
            OBSERVER_AGENT: {
                "mode": "subagent",
                "hidden": True,
                "description": "Consolidates a roundtable debate.",
                "prompt": OBSERVER_PROMPT,
                "permission": {"*": "deny"},
            },
        },
    )


@dataclass
class DaemonProc:
    """One ``python -m roundtabled serve`` subprocess with its own config/state directories."""

    root: Path
    server_url: str
    directory: str
    runs: list[asyncio.subprocess.Process] = field(default_factory=list)
    port: int = 0
    keep_port: bool = False
    """Listen on ``port`` at every start (a plugin installed for this daemon reports to it);
    otherwise each start takes a free port."""
    password: str | None = None
    """The server's password (``OPENCODE_SERVER_PASSWORD``; a 2.x server always has one)."""

    @property
    def log_path(self) -> Path:
        return self.root / "daemon.log"

    @property
    def token(self) -> str:
        return (self.root / "config" / "roundtabled" / "token").read_text().strip()

    @property
    def signer(self) -> Signer:
        return load_signer(self.root / "config" / "roundtabled" / "signing-key")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, fault: str | None) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ROUNDTABLED_", "OPENCODE_", "XDG_"))
        }
        env.update(
            HOME=str(self.root / "home"),
            XDG_CONFIG_HOME=str(self.root / "config"),
            XDG_STATE_HOME=str(self.root / "state"),
            ROUNDTABLED_SERVER_URL=self.server_url,
            ROUNDTABLED_CONTROL_PORT=str(self.port),
            ROUNDTABLED_RESYNC_PERIOD="1",
            ROUNDTABLED_DIRECTORIES=self.directory,
            ROUNDTABLED_SHUTDOWN_WINDOW="6",
        )
        if fault:
            env["ROUNDTABLED_FAULT"] = fault
        if self.password:
            env["OPENCODE_SERVER_PASSWORD"] = self.password
        return env

    async def start(self, http: aiohttp.ClientSession, fault: str | None = None) -> None:
        """Spawn the daemon and wait until its control API reports ``ready``."""
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.keep_port and self.port):
            self.port = free_port()
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start (fault={fault}) ===\n".encode())
            log.flush()
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "roundtabled",
                "serve",
                env=self.env(fault),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        self.runs.append(proc)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                break
            try:
                async with http.get(
                    self.url + "/v1/health",
                    headers={"Authorization": f"Bearer {self.token}"},
                    timeout=aiohttp.ClientTimeout(total=2),
                ) as resp:
                    if resp.status == 200 and (await resp.json()).get("ready"):
                        return
            except (aiohttp.ClientError, TimeoutError, OSError):
                pass
            await asyncio.sleep(0.2)
        if proc.returncode == -signal.SIGKILL and fault:
            return  # the fault fired during start-up recovery: fine, the caller checks
        raise AssertionError(f"daemon not ready in 60 s; log:\n{self.log()[-3000:]}")

    async def settled(self, http: aiohttp.ClientSession, s2: str, timeout: float = 60) -> None:
        """Wait until the roundtable ``s2`` can change nothing more, what a check that nothing
        was duplicated must look at: its status says ``finalized`` (the result delivered, the
        delimiter, the title and the toast), the daemon drives no roundtable any more
        (``/v1/health`` ``active`` 0: the worker has returned) and S2 and its parent are idle
        on the server (a prompt sent before that has reached the model and ended)."""
        headers = {"Authorization": f"Bearer {self.token}"}
        deadline = time.monotonic() + timeout
        parent: str | None = None
        while True:
            async with http.get(f"{self.url}/v1/roundtables/{s2}", headers=headers) as resp:
                status = await resp.json() if resp.status == 200 else {}
            async with http.get(f"{self.url}/v1/health", headers=headers) as resp:
                active = (await resp.json()).get("active")
            if status.get("finalized") and active == 0:
                parent = status.get("parentSessionID")
                break
            assert time.monotonic() < deadline, f"{s2} not settled: {status}, {active} active"
            await asyncio.sleep(0.1)
        while True:
            async with http.get(
                f"{self.server_url}/session/status", params={"directory": self.directory}
            ) as resp:
                busy = await resp.json()
            waiting = [
                s for s in (s2, parent) if s and s in busy and (busy[s] or {}).get("type") != "idle"
            ]
            if not waiting:
                return
            assert time.monotonic() < deadline, f"still busy on the server: {waiting}"
            await asyncio.sleep(0.1)

    @property
    def proc(self) -> asyncio.subprocess.Process:
        return self.runs[-1]

    async def terminate(self) -> int:
        """SIGTERM the current run; returns its exit code (asserts it exits within 10 s)."""
        proc = self.proc
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
                raise AssertionError("daemon did not exit within 10 s of SIGTERM") from None
        return proc.returncode if proc.returncode is not None else -1

    def kill_all(self) -> None:
        for proc in self.runs:
            if proc.returncode is None:
                proc.kill()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def text_of(msg: dict[str, Any], *, ignored: bool = False) -> str:
    """The text parts of a message (visible ones unless ``ignored``)."""
    return "\n".join(
        str(p.get("text") or "")
        for p in msg.get("parts") or []
        if p.get("type") == "text" and (ignored or not p.get("ignored"))
    )


def signed_markers(msgs: list[dict[str, Any]], s2: str, signer: Signer) -> list[Marker]:
    """The markers of S2's user messages (``msgs``) that carry S2's valid signature, in order."""
    out: list[Marker] = []
    for m in msgs:
        if m["info"]["role"] != "user":
            continue
        for p in m.get("parts") or []:
            marker = read_marker(p.get("metadata"), s2, signer)
            if marker is not None:
                out.append(marker)
    return out


def turn_markers(
    msgs: list[dict[str, Any]], s2: str, signer: Signer
) -> tuple[list[tuple[int, int]], int]:
    """``(sorted [(round, seat)] of signed turn prompts, number of observer prompts)`` in S2."""
    markers = signed_markers(msgs, s2, signer)
    turns = [(m.round, m.seat) for m in markers if m.kind == "turn"]
    return sorted(turns), sum(m.kind == "observer" for m in markers)


def assert_each_turn_once(
    msgs: list[dict[str, Any]],
    s2: str,
    signer: Signer,
    llm: ScriptedLLM,
    agents: list[str],
    rounds: int,
    *,
    label: str = "",
) -> None:
    """Every (round, seat) prompted exactly once and the observer once: in S2 (signed markers)
    and at the model (one request per turn)."""
    turns, observers = turn_markers(msgs, s2, signer)
    expected = [(r, s) for r in range(rounds) for s in range(len(agents))]
    assert turns == expected, f"{label}: turn prompts in S2 {turns}"
    assert observers == 1, f"{label}: {observers} observer prompts"
    reqs = [r.agent for r in llm.requests_for(session=s2, kind="turn")]
    assert reqs[:-1] == agents * rounds and len(reqs) == len(agents) * rounds + 1, (
        f"{label}: model requests {reqs}"
    )


def earlier_prompts_seen(
    msgs: list[dict[str, Any]], s2: str, signer: Signer, llm: ScriptedLLM
) -> list[str]:
    """One line per seat request of S2 that held an answered turn prompt of an earlier turn
    (the debate's first, which carries the topic, excepted) or lacked its own; ``[]`` when none.

    The i-th seat request answers the i-th signed turn prompt of S2 (``msgs``; one request per
    turn, which the callers check). The text compared is the prompt the model is sent: the
    message's text parts but the ignored label that carries the marker (a prompt hidden in the
    PATCH mode counts by its text all the same)."""
    prompts: list[tuple[int, int, str]] = []
    for m in msgs:
        if m["info"]["role"] != "user":
            continue
        marks = [x for x in signed_markers([m], s2, signer) if x.kind == "turn"]
        if marks:
            text = "\n".join(
                str(p.get("text") or "")
                for p in m.get("parts") or []
                if p.get("type") == "text" and META_KEY not in (p.get("metadata") or {})
            )
            prompts.append((marks[0].round, marks[0].seat, text))
    requests = [r for r in llm.requests_for(session=s2, kind="turn") if r.agent != OBSERVER_AGENT]
    if len(requests) != len(prompts):
        return [f"{len(requests)} seat requests for {len(prompts)} turn prompts"]
    out: list[str] = []
    for i, req in enumerate(requests):
        users = "\n".join(
            content_text(m.get("content")) for m in req.messages if m.get("role") == "user"
        )
        if prompts[i][2] not in users:
            out.append(f"request {i} ({req.agent}) lacks its own prompt")
        seen = [(r, s) for r, s, text in prompts[:i] if (r, s) != (0, 0) and text in users]
        if seen:
            out.append(f"request {i} ({req.agent}) saw the earlier prompts {seen}")
    return out
