"""The ``kill -9`` harness on OpenCode 2.x (the 2.x shell, engine/v2run.py), for
``test_v2_faults.py``.

The same idea as the 1.x harness (``kill_point_harness.py``): the daemon runs as a real
subprocess with ``ROUNDTABLED_FAULT=<point>:<n>`` (:mod:`roundtabled.faults`), which SIGKILLs it
the n-th time it passes that crash point, and a fresh daemon without the fault (same signing key,
same state in S2's metadata) finishes the roundtable. Every wait is for a signal: the killed
process's exit, the control API's answers, the scripted model's requests.

One real 2.1.2 server and one project directory; the cases run one after another with one daemon
configuration whose control port is fixed, so the 2.x plugin installed in the project (its
``roundtable`` tool) reaches every run of it, the restarted one included. A daemon resumes the
unfinished roundtables of its directory, so two cases never run at once.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.env import control_call
from roundtabled.core.state import OBSERVER_AGENT, RoundtableState, decode_state
from roundtabled.engine.plugins import PLUGIN_VERSION_V2
from roundtabled.engine.v2_delivery import delivery_key
from roundtabled.offline.opencode_server import (
    OpenCodeServer,
    agent_prompts_of,
    free_port,
    offline_config,
)
from roundtabled.offline.scripted_actions import Text, ToolCall, ToolCalls
from roundtabled.offline.scripted_llm import RecordedRequest, ScriptedLLM, content_text
from roundtabled.opencode.port import STATE_KEY, V2Port, port_for, v2_delivery_id
from roundtabled.opencode.v2 import AssistantRecord, tool_call_of
from roundtabled.service import install
from tests.fakes.daemon_proc import DaemonProc

SEATS = ("pm", "dev")
SEAT_MODELS = {"pm": "debater-1", "dev": "debater-2"}
ROUNDS = 2
ARGUMENTS = {
    "pm": ("customers want the feature soon", "marketing needs a date we can keep"),
    "dev": ("a flag lets us roll back within minutes", "the ledger schema needs no migration"),
}
"""Replies that share few words, so loop detection never ends the debate early."""
SUMMARY = "SUMMARY: ship it behind a flag, staged."


def reply(seat: str, rnd: int) -> str:
    """Seat ``seat``'s scripted reply in round ``rnd`` (0-based)."""
    return f"{seat}: {ARGUMENTS[seat][rnd]}.\nPosition: flag — ship behind a flag (confidence 7/10)"


@dataclass
class V2Faults:
    """The server, the scripted model, the daemon's configuration and a port to read with."""

    server: OpenCodeServer
    llm: ScriptedLLM
    port: V2Port
    daemon: DaemonProc
    http: aiohttp.ClientSession

    @property
    def directory(self) -> str:
        return str(self.server.project_dir)

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One call to the running daemon's control API."""
        d = self.daemon
        return await control_call(self.http, d.url, d.token, method, path, body, timeout=60)

    async def plugin_trusted(self, within: float = 30) -> None:
        """Wait until the running daemon trusts the 2.x plugin's report for the directory (its
        health lists it with :data:`PLUGIN_VERSION_V2`): from then on a seat turn's state write
        follows its prompt (docs/design.md, "The 2.x shell"), the order the kill points after
        turn 1 are about."""
        health: Any = None
        await self.port.client.plugins(self.directory)  # the directory's instance loads it
        try:
            async with asyncio.timeout(within):
                while True:
                    status, health = await self.call("GET", "/v1/health")
                    reports = (health.get("plugin") or {}).get("reports") if status == 200 else []
                    if any(
                        os.path.realpath(r["directory"]) == os.path.realpath(self.directory)
                        and r["version"] == PLUGIN_VERSION_V2
                        for r in reports or []
                    ):
                        return
                    await asyncio.sleep(0.2)
        except TimeoutError:
            raise AssertionError((health, self.daemon.log()[-3000:])) from None

    async def s1(self) -> str:
        """A new S1 whose agent is ``build`` (the orchestrator)."""
        info = await self.port.client.create_session(directory=self.directory, agent="build")
        return info.id

    def script_debate(self, *, slow: tuple[str, int] | None = None) -> None:
        """Script every seat's turns and the observer's summary; ``slow``: (seat, round) whose
        reply starts 2 s late (a turn still running when the daemon is killed)."""
        for rnd in range(ROUNDS):
            for seat in SEATS:
                delay = 2.0 if slow == (seat, rnd) else 0.0
                self.llm.script(Text(text=reply(seat, rnd), first_byte_delay=delay), agent=seat)
        self.llm.script(Text(text=SUMMARY), agent=OBSERVER_AGENT)

    def turns(self, since: int) -> list[str | None]:
        """The agents of the model's turn requests since request ``since`` (S1's excluded)."""
        return [
            r.agent
            for r in self.llm.requests[since:]
            if r.kind == "turn" and r.agent in (*SEATS, OBSERVER_AGENT)
        ]

    async def killed(self, within: float = 90) -> None:
        """Wait for the daemon's fault to fire (SIGKILL)."""
        proc = self.daemon.proc
        await asyncio.wait_for(proc.wait(), within)
        assert proc.returncode == -9, (proc.returncode, self.daemon.log()[-3000:])

    async def child(self, s1: str, within: float = 60) -> str:
        """S2: the one child session of ``s1`` (a signal: it exists once the start is in)."""
        async with asyncio.timeout(within):
            while True:
                children = await self.port.client.children(s1)
                if children:
                    assert len(children) == 1, children
                    return children[0].id
                await asyncio.sleep(0.1)

    async def finalized(self, s2: str, within: float = 120) -> dict[str, Any]:
        """The daemon's status of ``s2`` once it says finalized (the result in S1, the title)."""
        async with asyncio.timeout(within):
            while True:
                status, st = await self.call("GET", f"/v1/roundtables/{s2}")
                if status == 200 and st.get("finalized"):
                    return dict(st)
                await asyncio.sleep(0.2)

    async def state(self, s2: str) -> RoundtableState:
        """The signed state in S2's metadata, authenticated with the daemon's key."""
        info = await self.port.client.get_session(s2)
        held = (info.metadata or {})[STATE_KEY]
        return decode_state(held["text"], held["metadata"], s2, self.daemon.signer)

    async def fallbacks(self, state: RoundtableState) -> tuple[int, int]:
        """``(parked, delivered)``: how many records of this call's fallback message S1 holds in
        its inbox and in its history (one id: never more than one in all)."""
        assert state.parent_session_id is not None
        mid = v2_delivery_id(delivery_key(state))
        client = self.port.client
        parked = sum(1 for i in await client.inbox(state.parent_session_id) if i.get("id") == mid)
        records = await client.all_messages(state.parent_session_id)
        return parked, sum(1 for r in records if r.id == mid)

    async def tool_parts(self, s1: str, call_id: str) -> list[tuple[str, str, dict[str, Any]]]:
        """Every part of the tool call ``call_id`` in S1's history: (status, text, metadata)."""
        out = []
        for r in await self.port.client.all_messages(s1):
            if isinstance(r, AssistantRecord) and any(
                p.get("type") == "tool" and p.get("id") == call_id for p in r.content
            ):
                out.append(tool_call_of(r, call_id))
        return out


def tool_results(req: RecordedRequest) -> list[str]:
    """The tool results a model request carries."""
    return [content_text(m.get("content")) for m in req.messages if m.get("role") == "tool"]


def said_by_user(req: RecordedRequest) -> list[str]:
    """The user messages' texts of a model request."""
    return [content_text(m.get("content")) for m in req.messages if m.get("role") == "user"]


def script_tool_call(llm: ScriptedLLM, s1: str, call_id: str) -> None:
    """S1's orchestrator calls ``roundtable`` once, then relays (its follow-up request carries
    the tool's result)."""
    llm.script(
        ToolCalls(
            calls=[
                ToolCall(
                    name="roundtable",
                    arguments={
                        "prompt": "Ship the payments change behind a flag?",
                        "agents": list(SEATS),
                        "rounds": ROUNDS,
                    },
                    id=call_id,
                )
            ]
        ),
        Text(text="relayed"),
        session=s1,
    )


def new_message_id() -> str:
    return "msg_" + secrets.token_hex(13)


async def v2_faults(root: Path) -> AsyncIterator[V2Faults]:
    """The module's server, model and daemon configuration (an async generator: a fixture)."""
    llm = ScriptedLLM()
    await llm.start(port=0)
    config = offline_config(
        llm.base_url,
        extra_agents={seat: {"model": f"scripted/{mid}"} for seat, mid in SEAT_MODELS.items()},
    )
    llm.agent_prompts.update(agent_prompts_of(config))
    server = OpenCodeServer(root / "oc", config, major=2)
    control_port = free_port()
    daemon_root = root / "daemon"
    install.install_tools(
        root / "oc" / server.directory_name / ".opencode",
        control_url=f"http://127.0.0.1:{control_port}",
        token_file=daemon_root / "config" / "roundtabled" / "token",
        major=2,
    )
    await server.start()
    port = await port_for(server.url, password=server.password)
    assert isinstance(port, V2Port)
    daemon = DaemonProc(
        daemon_root,
        server.url,
        str(server.project_dir),
        port=control_port,
        keep_port=True,
        password=str(server.password),
    )
    try:
        async with aiohttp.ClientSession() as http:
            yield V2Faults(server, llm, port, daemon, http)
    finally:
        daemon.kill_all()
        await port.close()
        await server.stop()
        await llm.stop()
