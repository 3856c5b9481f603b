"""Figures 1–3 on OpenCode 2.x: a roundtable's overhead against its own bare floor on the same
server, the handoff latency, the orchestration bytes per seat request.

The 2.x counterpart of figure 1 (:mod:`bench.debate`), on the pinned 2.x server (``opencode-v2/``)
with the roundtable plugin installed as ``roundtabled install-tool --opencode 2`` writes it, the
scripted model in its own process answering instantly, and the daemon in this process driving
the debate through the 2.x shell (``roundtabled/engine/v2run.py``):

- **daemon**: a 3-agent × 5-round debate plus the observer under one parent session, control API
  start → result available (the long poll), as on 1.x.
- **floor**: the same 16 turns (the daemon's own prompt texts, each with the agent and the model
  that answered it, read back from its S2) in a fresh child session of the same parent, one after
  the other: switch the agent, switch the model, ``prompt``, wait for the execution's end on the
  event stream (``session.execution.*``). That is the least any 2.x client does to run those
  turns as those seats: 2.x takes no agent or model with a prompt (docs/design.md, "The 2.x
  shell"), and each seat has its own model here.
- Interleaved pairs, the side that goes first alternating; reported: each pair's ratio
  daemon / floor and their median (the figure), both medians, and per side ``breakdown_ms``
  (:func:`bench.debate.breakdown`: ``lead``, ``model``, ``between`` the model requests,
  ``tail``), from the scripted model's records, plus the daemon's HTTP calls to the server per
  debate by route and the milliseconds they took (:class:`CallCount`), so the cause of a gap can
  be named.
- **Figure 2** (:class:`HandoffTap`): the handoffs of the debates above (one roundtable), then of
  ``concurrent`` roundtables of ``concurrent_rounds`` rounds started at once, as on 1.x: from the
  execution end that woke the roundtable to the next prompt accepted, its server share, and the
  daemon's = total − server.
- **Figure 3** (:func:`bench.debate.orchestration_bytes`): on the last debate of figure 1, from
  the requests the scripted model received, as on 1.x.

Usage (from the repository root)::

    .venv/bin/python -m bench.run debate --opencode 2 --pairs 9 --out bench/results/v2.json

Times in seconds unless a name ends in ``_ms``.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import SecretStr

from roundtabled.core.prompts import TURN_ORCHESTRATION_BUDGET
from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.engine.plugins import HEARTBEAT_S, PLUGIN_VERSION_V2
from roundtabled.offline.opencode_server import OpenCodeServer, free_port
from roundtabled.opencode import v2
from roundtabled.opencode.client import HttpTransport
from roundtabled.opencode.events import Event
from roundtabled.service import install
from roundtabled.service.config import load_settings
from roundtabled.service.daemon import Daemon

from .debate import (
    AGENTS,
    OVERHEAD_TARGET,
    ROUNDS,
    Span,
    breakdown,
    handoff_stats,
    median_breakdown,
    orchestration_bytes,
)
from .env import TOPIC, RemoteLLM, bench_config, control_call, result_polls
from .stats import median, rnd

INSTALLED_OBSERVER_PROMPT = "You are the impartial roundtable observer."
"""The first line of the observer agent ``install-tool --opencode 2`` installs (its file in the
project wins over the benchmark config's observer on 2.x)."""


ID = re.compile(r"(ses|msg|prt)_\w+")
"""A session's, a message's or a part's id in a route."""


class CallCount:
    """Counts the daemon's HTTP calls to the server by method and route (ids replaced by
    ``{id}``) while :attr:`on` is set, by wrapping :meth:`HttpTransport._request` once."""

    def __init__(self) -> None:
        self.on = False
        self.calls: Counter[str] = Counter()
        self.ms: defaultdict[str, float] = defaultdict(float)
        """Milliseconds spent in each route's calls (wall time, the call awaited)."""
        self.ignored: set[int] = set()
        """``id()`` of the benchmark's own clients (their calls are not the daemon's)."""
        self.spans: list[tuple[float, float, str]] = []
        """``(start, end, path)`` of each of the daemon's calls while :attr:`on` is set
        (``time.perf_counter()`` seconds): the server's share of a handoff."""
        original = HttpTransport._request
        counter = self

        async def counted(self: HttpTransport, method: str, path: str, **kw: Any) -> Any:
            if not counter.on or id(self) in counter.ignored:
                return await original(self, method, path, **kw)
            route = f"{method} {ID.sub('{id}', path)}"
            counter.calls[route] += 1
            t0 = time.perf_counter()
            try:
                return await original(self, method, path, **kw)
            finally:
                t1 = time.perf_counter()
                counter.ms[route] += (t1 - t0) * 1000
                counter.spans.append((t0, t1, path))

        HttpTransport._request = counted  # type: ignore[method-assign]
        self._original = original

    def close(self) -> None:
        HttpTransport._request = self._original  # type: ignore[method-assign]


class HandoffTap:
    """Figure 2 on 2.x, timed around the daemon's 2.x port (the 2.x shell keeps no handoff
    metrics of its own): from the execution's end that woke a roundtable (the port's
    ``turn_ended`` hint, as the runner's ``on_event`` sees it) to the return of the next
    ``start_turn`` (the ``prompt`` accepted), and the server's share of it: the wall time during
    which at least one of the daemon's calls on that session awaited the server
    (:attr:`CallCount.spans`). Daemon-side = total − server, as on 1.x."""

    def __init__(self, port: Any, calls: CallCount) -> None:
        self.calls = calls
        self.woke: dict[str, float] = {}
        self.handoffs: list[tuple[str, float, float]] = []
        """``(session, woke, prompted)`` of each handoff (reduced in :meth:`stats`, off the
        daemon's loop)."""
        turn_ended = port.turn_ended
        start_turn = port.start_turn
        tap = self

        def ended(event: Event) -> str | None:
            sid: str | None = turn_ended(event)
            if sid is not None:
                tap.woke.setdefault(sid, time.perf_counter())
            return sid

        async def started(session: Any, *args: Any, **kw: Any) -> str:
            prompt_id: str = await start_turn(session, *args, **kw)
            t1 = time.perf_counter()
            t0 = tap.woke.pop(session.id, None)
            if t0 is not None and tap.calls.on:
                tap.handoffs.append((session.id, t0, t1))
            return prompt_id

        port.turn_ended = ended
        port.start_turn = started

    def busy(self, session_id: str, t0: float, t1: float) -> float:
        """Seconds within ``[t0, t1]`` with at least one call on ``session_id`` in flight."""
        spans = sorted(
            (max(a, t0), min(b, t1))
            for a, b, path in self.calls.spans
            if session_id in path and b > t0 and a < t1
        )
        out, end = 0.0, t0
        for a, b in spans:
            if b > end:
                out += b - max(a, end)
                end = b
        return out

    def stats(self) -> dict[str, Any]:
        """:func:`bench.debate.handoff_stats` of what was recorded, then cleared (no pool wait
        is told apart on 2.x: ``queued`` reads 0)."""
        total = [(t1 - t0) * 1000 for _, t0, t1 in self.handoffs]
        server = [self.busy(sid, t0, t1) * 1000 for sid, t0, t1 in self.handoffs]
        out = handoff_stats(total, server, [0.0] * len(total))
        self.handoffs.clear()
        self.calls.spans.clear()
        return out


class TurnEnds:
    """``session.execution.*`` ends per session from the 2.x event stream (the floor's wait)."""

    def __init__(self, url: str, password: str) -> None:
        self.events: dict[str, asyncio.Event] = {}
        self.connected = asyncio.Event()
        self.stream = v2.v2_event_stream(url, self._on, password=password)
        self.task: asyncio.Task[None] | None = None

    def _on(self, event: Event) -> None:
        if event.type == "server.connected":
            self.connected.set()
        end = v2.turn_end(event)
        if end is not None and end.session_id in self.events:
            self.events[end.session_id].set()

    def expect(self, session: str) -> asyncio.Event:
        """An event set by the next execution end of ``session`` (call before prompting)."""
        ev = asyncio.Event()
        self.events[session] = ev
        return ev

    async def start(self) -> None:
        self.task = asyncio.create_task(self.stream.run())
        await asyncio.wait_for(self.connected.wait(), 30)

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


class V2Bench:
    """The 2.x server, the scripted model and the in-process daemon for figure 1 on 2.x."""

    def __init__(self, root: Path, calls: CallCount) -> None:
        self.root = root
        self.calls = calls
        self.llm = RemoteLLM()
        self.server: OpenCodeServer | None = None
        self.daemon: Daemon | None = None
        self.task: asyncio.Task[int] | None = None
        self.client: v2.V2Client | None = None
        self.http: aiohttp.ClientSession | None = None

    @property
    def srv(self) -> OpenCodeServer:
        assert self.server is not None
        return self.server

    @property
    def oc(self) -> v2.V2Client:
        assert self.client is not None
        return self.client

    async def start(self) -> None:
        await self.llm.start()
        await self.llm.agent_prompt(INSTALLED_OBSERVER_PROMPT, OBSERVER_AGENT)
        control_port = free_port()
        password = secrets.token_urlsafe(18)
        self.server = OpenCodeServer(
            self.root / "opencode", bench_config(self.llm), major=2, password=password
        )
        home = self.root / "home"
        env = {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(self.root / "rt-config"),
            "XDG_STATE_HOME": str(self.root / "rt-state"),
        }
        settings = load_settings(
            {
                "server_url": "http://127.0.0.1:9",  # set once the server is up
                "control_port": control_port,
                "resync_period": 15.0,
                "log_level": "warning",
            },
            env=env,
        )
        install.install_tools(
            self.srv.project_dir / ".opencode",
            control_url=f"http://127.0.0.1:{control_port}",
            token_file=settings.token_file,
            major=2,
        )
        await self.srv.start()
        settings = settings.model_copy(
            update={
                "server_url": self.srv.url,
                "server_password": SecretStr(password),
                "directories": (str(self.srv.project_dir),),
            }
        )
        self.daemon = Daemon(settings)
        self.task = asyncio.create_task(self.daemon.run())
        await asyncio.wait_for(self.daemon.engine.ready.wait(), 120)
        assert self.daemon.v2 is not None, "the daemon does not drive this server as 2.x"
        self.client = v2.V2Client(self.srv.url, password=password)
        self.calls.ignored.add(id(self.client))
        self.http = aiohttp.ClientSession()
        # The plugin loads with the directory's instance and reports itself; once the daemon
        # trusts the report, a seat turn's state write follows its prompt (docs/design.md, "The
        # 2.x shell"): every measured debate runs in that order, none in the slower one.
        directory = str(self.srv.project_dir)
        await self.client.plugins(directory)
        trusted = await self.daemon.v2.plugins.wait_for(directory, 3 * HEARTBEAT_S)
        if trusted != PLUGIN_VERSION_V2:
            raise RuntimeError("the roundtabled 2.x plugin did not report itself to the daemon")

    async def close(self) -> None:
        if self.daemon is not None and self.task is not None:
            self.daemon.request_stop()
            try:
                await asyncio.wait_for(self.task, 30)
            except (TimeoutError, asyncio.CancelledError):
                self.task.cancel()
        if self.client is not None:
            await self.client.close()
        if self.http is not None:
            await self.http.close()
        if self.server is not None:
            await self.server.stop()
        await self.llm.stop()

    async def api(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        assert self.http is not None and self.daemon is not None
        assert self.daemon.control_address is not None
        return await control_call(
            self.http,
            self.daemon.control_address,
            self.daemon.token,
            method,
            path,
            body,
            params=kw.get("params"),
            timeout=120,
        )

    async def debate(self, parent: str, spans: dict[str, Span] | None = None) -> tuple[float, str]:
        """One debate through the daemon; (seconds from the start request to the result, S2)."""
        m0 = time.monotonic()
        t0 = time.perf_counter()
        self.calls.on = spans is not None
        status, made = await self.api(
            "POST",
            "/v1/roundtables",
            {"agents": AGENTS, "rounds": ROUNDS, "prompt": TOPIC, "parentSessionID": parent},
        )
        if status != 200:
            raise RuntimeError(f"start failed: {status} {made}")
        s2 = str(made["sessionID"])
        async for st, data in result_polls(self.api, s2, 300):
            if st == 200 and data.get("done"):
                if data.get("endReason") != "completed":
                    raise RuntimeError(f"the debate ended {data.get('endReason')}: {data}")
                break
        else:
            raise RuntimeError(f"{s2} did not finish in 300 s")
        dt = time.perf_counter() - t0
        if spans is not None:
            spans[s2] = (m0, time.monotonic())
        await self.settle(s2)  # the conclusion's calls (title, last state) count too
        self.calls.on = False
        return dt, s2

    async def concurrent(self, handoffs: HandoffTap, n: int, rounds: int) -> dict[str, Any]:
        """Figure 2 at ``n`` roundtables of ``rounds`` rounds started at once, each under a
        parent of its own: :meth:`HandoffTap.stats` with the wall time of all of them."""
        parents = [
            (await self.oc.create_session(directory=str(self.srv.project_dir), title=f"S1 c{i}")).id
            for i in range(n)
        ]

        async def one(parent: str) -> str:
            status, made = await self.api(
                "POST",
                "/v1/roundtables",
                {"agents": AGENTS, "rounds": rounds, "prompt": TOPIC, "parentSessionID": parent},
            )
            if status != 200:
                raise RuntimeError(f"start failed: {status} {made}")
            s2 = str(made["sessionID"])
            async for st, data in result_polls(self.api, s2, 600):
                if st == 200 and data.get("done"):
                    return s2
            raise RuntimeError(f"{s2} did not finish in 600 s")

        self.calls.on = True
        t0 = time.perf_counter()
        started = await asyncio.gather(*(one(p) for p in parents))
        wall = time.perf_counter() - t0
        for s2 in started:
            await self.settle(s2)
        self.calls.on = False
        out = handoffs.stats()
        out["wall_s"] = rnd(wall, 2)
        return out

    async def settle(self, s2: str) -> None:
        """Wait until the daemon has concluded ``s2`` and no execution of it runs (so the runs
        do not overlap)."""
        assert self.daemon is not None and self.daemon.v2 is not None
        if not await self.daemon.v2.finalized(s2, 60):
            raise RuntimeError(f"{s2} was not concluded within 60 s")
        deadline = time.monotonic() + 30
        while s2 in await self.oc.active():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{s2} still runs 30 s after its result")
            await asyncio.sleep(0.05)

    async def turn_script(self, s2: str) -> list[tuple[str, v2.ModelRef, str]]:
        """(agent, model, prompt text) of every turn the daemon sent in ``s2``: each prompt with
        the agent and model of the step that answered it."""
        records = await self.oc.all_messages(s2)
        out: list[tuple[str, v2.ModelRef, str]] = []
        for i, r in enumerate(records):
            if not isinstance(r, v2.UserRecord):
                continue
            reply = next((x for x in records[i + 1 :] if isinstance(x, v2.AssistantRecord)), None)
            if reply is None or reply.agent is None or reply.model is None:
                raise RuntimeError(f"turn {r.id} of {s2} has no reply")
            out.append((reply.agent, reply.model, r.text))
        return out

    async def floor(
        self,
        ends: TurnEnds,
        parent: str,
        script: list[tuple[str, v2.ModelRef, str]],
        spans: dict[str, Span] | None = None,
    ) -> float:
        """The floor: the same turns in a fresh child session, each switch agent → switch model
        → prompt → the execution's end; seconds."""
        m0 = time.monotonic()
        t0 = time.perf_counter()
        sid = (await self.oc.create_session(parent_id=parent, title="floor", metadata={})).id
        for agent, model, text in script:
            ended = ends.expect(sid)
            await self.oc.switch_agent(sid, agent)
            await self.oc.switch_model(sid, model)
            await self.oc.prompt(sid, text)
            await asyncio.wait_for(ended.wait(), 120)
        dt = time.perf_counter() - t0
        if spans is not None:
            spans[sid] = (m0, time.monotonic())
        return dt


async def run(
    root: Path, *, pairs: int, concurrent: int = 20, concurrent_rounds: int = 3
) -> dict[str, Any]:
    """Figures 1–3 on OpenCode 2.x: figure 1 from ``pairs`` interleaved pairs after one
    warm-up pair, figure 2 at one roundtable (those debates) and at ``concurrent`` roundtables
    of ``concurrent_rounds`` rounds at once, figure 3 on the last debate of figure 1."""
    calls = CallCount()
    bench = V2Bench(root, calls)
    try:
        await bench.start()
        assert bench.daemon is not None and bench.daemon.v2 is not None
        runner = bench.daemon.v2
        handoffs = HandoffTap(runner.port, calls)
        ends = TurnEnds(bench.srv.url, str(bench.srv.password))
        await ends.start()
        try:
            parent = (
                await bench.oc.create_session(directory=str(bench.srv.project_dir), title="S1")
            ).id
            _, s2 = await bench.debate(parent)  # warm-up pair, not counted
            script = await bench.turn_script(s2)
            await bench.floor(ends, parent, script)
            d_times: list[float] = []
            f_times: list[float] = []
            d_spans: dict[str, Span] = {}
            f_spans: dict[str, Span] = {}
            handoffs.stats()  # the warm-up's
            last_s2 = s2
            for i in range(pairs):
                if i % 2 == 0:
                    d, last_s2 = await bench.debate(parent, d_spans)
                    f = await bench.floor(ends, parent, script, f_spans)
                else:
                    f = await bench.floor(ends, parent, script, f_spans)
                    d, last_s2 = await bench.debate(parent, d_spans)
                d_times.append(d)
                f_times.append(f)
            h1 = handoffs.stats()
            calls_per_debate = {k: rnd(v / pairs, 1) for k, v in sorted(calls.calls.items())}
            ms_per_debate = {k: rnd(v / pairs, 1) for k, v in sorted(calls.ms.items())}
            final = runner.state_of(last_s2)
            assert final is not None
            fig3 = orchestration_bytes(await bench.llm.requests_for(last_s2), final)
            hn = await bench.concurrent(handoffs, concurrent, concurrent_rounds)
            where = {
                side: median_breakdown(
                    [breakdown(await bench.llm.requests_for(s), span) for s, span in spans.items()]
                )
                for side, spans in (("daemon", d_spans), ("floor", f_spans))
            }
        finally:
            await ends.close()
    finally:
        calls.close()
        await bench.close()
    ratios = [d / f for d, f in zip(d_times, f_times, strict=True)]
    overhead = {
        "opencode": bench.srv.version,
        "pairs": pairs,
        "turns_per_debate": len(script),
        "daemon_s": [rnd(x) for x in d_times],
        "floor_s": [rnd(x) for x in f_times],
        "ratios": [rnd(x) for x in ratios],
        "daemon_median_s": rnd(median(d_times)),
        "floor_median_s": rnd(median(f_times)),
        "median_ratio": rnd(median(ratios)),
        "breakdown_ms": where,
        "daemon_server_calls_per_debate": calls_per_debate,
        "daemon_server_ms_per_debate": ms_per_debate,
        "floor_server_calls_per_turn": {
            "POST /api/session/{id}/agent": 1,
            "POST /api/session/{id}/model": 1,
            "POST /api/session/{id}/prompt": 1,
        },
        "target": OVERHEAD_TARGET,
        "met": median(ratios) <= OVERHEAD_TARGET,
    }
    handoff = {
        "one": h1,
        f"concurrent_{concurrent}": hn,
        "concurrent": concurrent,
        "concurrent_rounds": concurrent_rounds,
        "target_p50_ms": 2,
        "target_p99_ms": 20,
        "met": h1["daemon_p50_ms"] <= 2
        and h1["daemon_p99_ms"] <= 20
        and hn["daemon_p50_ms"] <= 2
        and hn["daemon_p99_ms"] <= 20,
    }
    fig3_out = {
        **fig3,
        "target_bytes": TURN_ORCHESTRATION_BUDGET,
        "met": (fig3["max_orchestration_bytes"] or 0) <= TURN_ORCHESTRATION_BUDGET
        and fig3["state_block_bytes_total"] == 0
        and fig3["growth_round2_to_second_last_bytes"] <= 32,
    }
    return {"overhead": overhead, "handoff": handoff, "bytes": fig3_out}
