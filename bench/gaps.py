"""Where figure 1's overhead sits: the gaps between turns, the server's events and its write cost.

Usage (from the repository root)::

    .venv/bin/python -m bench.gaps [--pairs N] [--turns N] [--out FILE]

Three measurements on the real, pinned ``opencode serve`` with the scripted model answering at
once, printed as one JSON document (times in ms):

- ``events_after_reply``: ``--turns`` prompts into one plain session; per event type, the median
  time from the scripted model's reply finished (its own record, same monotonic clock) to the
  event's arrival on ``/global/event``. Shows how long before ``session.idle`` the event that
  completes a turn's final step comes (the window the early hiding of ``roundtabled/handoff.py``
  has to overlap its PATCH with).
- ``request_cost``: 30 of each, one after another, on an idle session: ``GET /session/status``,
  ``PATCH`` of a part (the hiding write), ``PATCH /session/{id}``; then 3 part PATCHes while a
  turn streams (``busy``), to see whether the server holds writes while a turn runs.
- ``gaps``: ``--pairs`` interleaved debates of figure 1 (3 × 5 + observer through the daemon, then
  the same prompts into one session with ``prompt_async``); per gap between two model requests,
  ``reply_to_idle`` (reply finished → ``session.idle`` seen), ``idle_to_prompt`` (→ the next
  ``prompt_async`` sent), ``prompt_to_request`` (→ the next model request arrived), p50 and mean
  per side; and the daemon's wait in ``Handoff.hide`` (the early hiding's PATCH still in flight,
  or the PATCH itself), p50 / p90. The daemon's requests and ``Handoff.hide`` are timed by
  wrapping them in this process (instrumentation of the benchmark only).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from roundtabled import ids
from roundtabled.engine.handoff import Handoff
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import RecordedRequest
from roundtabled.opencode.client import HttpTransport
from roundtabled.opencode.events import Event, parse_event
from roundtabled.opencode.stream import SSEDecoder

from . import debate
from .env import Env
from .stats import percentile, rnd
from .tap import EventTap

Seen = tuple[float, str, str | None]
"""``(monotonic s, tag, session id)`` of one event."""


def tag_of(ev: Event) -> str:
    """A short name for an event: its type, the part type (and a step's finish reason), the
    message role (and an assistant's finish), the status."""
    props = ev.properties
    if ev.type == "message.part.updated":
        part = props.get("part") or {}
        kind = str(part.get("type"))
        if kind == "step-finish":
            return f"{ev.type}:step-finish:{part.get('reason')}"
        return f"{ev.type}:{kind}"
    if ev.type == "message.updated":
        info = props.get("info") or {}
        role = str(info.get("role"))
        done = ":completed" if (info.get("time") or {}).get("completed") else ""
        finish = f":finish={info.get('finish')}" if role == "assistant" else ""
        return f"{ev.type}:{role}{finish}{done}"
    if ev.type == "session.status":
        return f"{ev.type}:{(props.get('status') or {}).get('type')}"
    return ev.type


class Listener:
    """Every event of ``/global/event`` with its arrival time, until :meth:`close`."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/") + "/global/event"
        self.seen: list[Seen] = []
        self.ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self.ready.wait(), 30)

    async def _run(self) -> None:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as http,
            http.get(self.url) as resp,
        ):
            decoder = SSEDecoder()
            while chunk := await resp.content.readany():
                for payload in decoder.feed(chunk):
                    self.ready.set()
                    ev = parse_event(payload)
                    if ev is not None:
                        self.seen.append((time.monotonic(), tag_of(ev), ev.session_id))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await self._task


def summary(values: list[float]) -> dict[str, float]:
    """``n``, p50, p90, mean and min of ``values`` (ms, rounded)."""
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": rnd(percentile(values, 50), 1),
        "p90": rnd(percentile(values, 90), 1),
        "mean": rnd(statistics.fmean(values), 1),
        "min": rnd(min(values), 1),
    }


async def timed(call: Callable[[], Awaitable[Any]], times: int) -> list[float]:
    """``call`` ``times`` times in a row; each one's wall time (ms)."""
    out: list[float] = []
    for _ in range(times):
        t = time.monotonic()
        await call()
        out.append((time.monotonic() - t) * 1000)
    return out


async def events_and_costs(env: Env, tap: EventTap, listener: Listener, turns: int) -> Any:
    """``events_after_reply`` and ``request_cost`` (see the module docstring)."""
    parent = await env.new_parent("S1 gaps")
    sid = await debate.child_session(env, parent, "gaps")
    after: dict[str, list[float]] = {}
    for i in range(turns):
        idle = tap.expect_idle(sid)
        mark = len(listener.seen)
        body = {
            "messageID": ids.message_id(),
            "agent": debate.AGENTS[i % 3],
            "parts": [{"type": "text", "text": f"turn {i}"}],
        }
        await env.oc("POST", f"/session/{sid}/prompt_async", body)
        await asyncio.wait_for(idle.wait(), 60)
        await asyncio.sleep(0.05)  # the events that follow the idle
        reqs = sorted(await env.llm.requests_for(sid), key=lambda r: r.t_mono)
        end = reqs[-1].finished_at
        if i < 2 or end is None:  # the first turns warm the server up
            continue
        first: dict[str, float] = {}
        for t, tag, s_ in listener.seen[mark:]:
            if s_ == sid and t >= end:
                first.setdefault(tag, (t - end) * 1000)
        for tag, ms in first.items():
            after.setdefault(tag, []).append(ms)
    events = {
        tag: rnd(statistics.median(v), 1)
        for tag, v in sorted(after.items(), key=lambda kv: statistics.median(kv[1]))
    }
    msgs = await env.oc("GET", f"/session/{sid}/message")
    user = next(m for m in msgs if m["info"]["role"] == "user")
    part = user["parts"][0]
    part_path = f"/session/{sid}/message/{user['info']['id']}/part/{part['id']}"
    costs = {
        "get_status": summary(await timed(lambda: env.oc("GET", "/session/status"), 30)),
        "patch_part": summary(
            await timed(lambda: env.oc("PATCH", part_path, {**part, "ignored": True}), 30)
        ),
        "patch_session": summary(
            await timed(lambda: env.oc("PATCH", f"/session/{sid}", {"title": "gaps 2"}), 30)
        ),
    }
    await env.llm.script(Text(text="slow " * 40, chunk_size=5, chunk_delay=0.05), agent="dev")
    idle = tap.expect_idle(sid)
    body = {"messageID": ids.message_id(), "agent": "dev", "parts": [{"type": "text", "text": "x"}]}
    await env.oc("POST", f"/session/{sid}/prompt_async", body)
    await asyncio.sleep(1.0)
    costs["patch_part_busy"] = summary(
        await timed(lambda: env.oc("PATCH", part_path, {**part, "ignored": False}), 3)
    )
    await asyncio.wait_for(idle.wait(), 60)
    return events, costs


def gap_segments(
    sid: str, reqs: list[RecordedRequest], prompts: list[float], seen: list[Seen]
) -> Iterator[tuple[float, float, float]]:
    """Per gap between two model requests of ``sid``: (reply → idle, idle → prompt sent,
    prompt sent → next request), ms."""
    idles = sorted(t for t, tag, s in seen if s == sid and tag == "session.idle")
    for r, nxt in itertools.pairwise(reqs):
        end = r.finished_at
        idle = next((t for t in idles if end is not None and t > end), None)
        sent = max((p for p in prompts if p < nxt.t_mono), default=None)
        if end is None or idle is None or sent is None:
            continue
        yield (idle - end) * 1000, (sent - idle) * 1000, (nxt.t_mono - sent) * 1000


async def gaps(env: Env, tap: EventTap, listener: Listener, pairs: int) -> dict[str, Any]:
    """``gaps`` (see the module docstring)."""
    sent: list[tuple[float, str]] = []
    hide_waits: list[float] = []
    real_request = HttpTransport._request
    real_hide = Handoff.hide

    async def request(self: HttpTransport, method: str, path: str, **kw: Any) -> Any:
        if path.endswith("/prompt_async"):
            sent.append((time.monotonic(), path))
        return await real_request(self, method, path, **kw)

    async def hide(self: Handoff, table: Any, views: Any) -> None:
        t = time.monotonic()
        try:
            await real_hide(self, table, views)
        finally:
            hide_waits.append((time.monotonic() - t) * 1000)

    real_oc = env.oc

    async def oc(method: str, path: str, *a: Any, **kw: Any) -> Any:
        if path.endswith("/prompt_async"):
            sent.append((time.monotonic(), path))
        return await real_oc(method, path, *a, **kw)

    HttpTransport._request = request  # type: ignore[method-assign]
    Handoff.hide = hide  # type: ignore[method-assign]
    env.oc = oc  # type: ignore[method-assign]
    sides: dict[str, list[tuple[float, float, float]]] = {"daemon": [], "floor": []}
    try:
        parent = await env.new_parent("S1 gaps debate")
        _, s2 = await debate.daemon_debate(env, parent)
        script = await debate.turn_script(env, s2)
        await debate.floor_debate(env, tap, parent, script)
        hide_waits.clear()
        for _ in range(pairs):
            for side in ("daemon", "floor"):
                sent.clear()
                if side == "daemon":
                    _, sid = await debate.daemon_debate(env, parent)
                else:
                    spans: dict[str, debate.Span] = {}
                    await debate.floor_debate(env, tap, parent, script, spans)
                    [sid] = spans
                reqs = sorted(await env.llm.requests_for(sid), key=lambda r: r.t_mono)
                prompts = [t for t, path in sent if sid in path]
                sides[side] += gap_segments(sid, reqs, prompts, listener.seen)
    finally:
        HttpTransport._request = real_request  # type: ignore[method-assign]
        Handoff.hide = real_hide  # type: ignore[method-assign]
        env.oc = real_oc  # type: ignore[method-assign]
    names = ("reply_to_idle", "idle_to_prompt", "prompt_to_request")
    return {
        side: {name: summary([row[i] for row in rows]) for i, name in enumerate(names)}
        for side, rows in sides.items()
    } | {"daemon_hide_wait": summary(hide_waits)}


async def main(pairs: int, turns: int, *, patch: bool = False) -> dict[str, Any]:
    """All three measurements on one environment (``patch``: without the roundtable plugin)."""
    with tempfile.TemporaryDirectory(prefix="rt-gaps-") as tmp:
        env = Env(Path(tmp) / "gaps")
        await env.start(plugin=not patch)
        await env.launch_daemon()
        if not patch:
            await env.plugin_reported()
        tap = EventTap(env.srv.url)
        listener = Listener(env.srv.url)
        await tap.start()
        await listener.start()
        try:
            events, costs = await events_and_costs(env, tap, listener, turns)
            between = await gaps(env, tap, listener, pairs)
        finally:
            await listener.close()
            await tap.close()
            await env.close()
    return {
        "events_after_reply_ms": events,
        "request_cost_ms": costs,
        "gaps_ms": between,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.gaps")
    parser.add_argument("--pairs", type=int, default=4, help="interleaved debate pairs")
    parser.add_argument("--turns", type=int, default=12, help="prompts for the event timings")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--patch", action="store_true", help="without the roundtable plugin (PATCH hiding)"
    )
    args = parser.parse_args()
    doc = orjson.dumps(
        asyncio.run(main(args.pairs, args.turns, patch=args.patch)), option=orjson.OPT_INDENT_2
    )
    if args.out:
        args.out.write_bytes(doc)
    print(doc.decode())
