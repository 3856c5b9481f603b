"""Figures 1–3: whole-debate overhead, handoff latency, orchestration bytes per model request.

All three come from debates on the real server with the scripted LLM answering instantly:

1. **Overhead.** Interleaved pairs: a 3-agent × 5-round debate plus the built-in observer through
   the daemon (control API start → result available), then the *floor*: the same 16 agent turns
   (the daemon's own prompt texts, read back from its S2) sent to one fresh session with
   ``prompt_async``, each waiting for ``session.idle`` on the event stream; no orchestration at
   all. Reported: the median of the per-pair ratios daemon/floor, and both medians; where the
   time went (``breakdown_ms``: lead, between, tail, model; ``gaps_ms``: each gap between two
   model requests, median per gap); the daemon's calls to the server per measured debate by
   route, and their milliseconds (:class:`bench.overhead_v2.CallCount`, as on 2.x).
2. **Handoff latency.** The daemon's own measurement (``HandoffMetrics.handoffs``): from the event
   that woke the worker to the return of the next ``prompt_async`` POST, and the server's share
   of it (``HandoffMetrics.handoff_server``: wall time with at least one request in flight,
   measured by :class:`roundtabled.opencode.client.HttpClock`). Daemon-side = total − server. At 1
   roundtable (the debates of figure 1) and at 20 concurrent roundtables.
3. **Orchestration bytes.** From the scripted LLM's recorded requests of one debate: per seat
   turn, the bytes of user-role text minus the topic itself (the debate's content is the topic
   and the assistant replies); any ``[ROUNDTABLE META`` text is counted separately (must be 0).
   Beside it, the seed's design on the same debate: its turn prompt (never hidden, so every
   earlier one is still in the request) plus its META block with the full history so far.

Sizes in bytes (UTF-8), times in ms unless named ``_s``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from roundtabled import ids
from roundtabled.core.card import CARD_FOOTER
from roundtabled.core.prompts import TURN_ORCHESTRATION_BUDGET
from roundtabled.core.state import (
    META_KEY,
    OBSERVER_AGENT,
    HistoryEntry,
    RoundtableState,
    Signer,
    encode_state,
)
from roundtabled.offline.scripted_llm import RecordedRequest, content_text

from .env import SEAT_MODELS, TOPIC, Env
from .stats import median, percentile, rnd
from .tap import EventTap

OVERHEAD_TARGET = 1.10
"""Figure 1: daemon / floor median ratio, with the roundtable plugin (no hiding write)."""
"""Figure 3: orchestration bytes per seat request at most (turn prompt with its blocks: the
stance list and the recent-context digest, each capped — ``DIGEST_MAX_BYTES`` for the digest)."""

AGENTS = ["pm", "dev", "rv"]
ROUNDS = 5


Span = tuple[float, float]
"""``(start, end)`` of one debate, ``time.monotonic()`` seconds (the scripted model's clock)."""


async def daemon_debate(
    env: Env, parent: str, rounds: int = ROUNDS, spans: dict[str, Span] | None = None
) -> tuple[float, str]:
    """One debate through the daemon; (seconds from start request to result, S2). ``spans``
    gets S2's ``(start, end)``."""
    m0 = time.monotonic()
    t0 = time.perf_counter()
    s2 = await env.start_rt(agents=AGENTS, rounds=rounds, prompt=TOPIC, parentSessionID=parent)
    await env.result(s2)
    dt = time.perf_counter() - t0
    if spans is not None:
        spans[s2] = (m0, time.monotonic())
    await settle(env, s2)
    return dt, s2


def breakdown(requests: list[RecordedRequest], span: Span) -> dict[str, float]:
    """Where one debate's time went (ms), from the scripted model's records of its session:
    ``lead`` = start → first model request, ``model`` = Σ request arrival → reply finished,
    ``between`` = Σ reply finished → next request (the server's wind-down, the handoff, the
    server's start of the next turn), ``tail`` = last reply finished → end."""
    reqs = sorted(requests, key=lambda r: r.t_mono)
    if not reqs or any(r.finished_at is None for r in reqs):
        return {}
    ends = [float(r.finished_at or 0.0) for r in reqs]
    return {
        "requests": len(reqs),
        "lead": (reqs[0].t_mono - span[0]) * 1000,
        "model": sum(e - r.t_mono for r, e in zip(reqs, ends, strict=True)) * 1000,
        "between": sum(n.t_mono - e for n, e in zip(reqs[1:], ends, strict=False)) * 1000,
        "tail": (span[1] - ends[-1]) * 1000,
    }


def gaps(requests: list[RecordedRequest]) -> list[float]:
    """Each gap of one debate (ms): reply ``k`` finished → request ``k + 1`` arrived, in order
    (the terms of ``between`` in :func:`breakdown`; gap 1 follows turn 1, the last one leads
    to the observer)."""
    reqs = sorted(requests, key=lambda r: r.t_mono)
    if any(r.finished_at is None for r in reqs):
        return []
    return [(n.t_mono - float(e.finished_at or 0.0)) * 1000 for e, n in itertools.pairwise(reqs)]


def median_gaps(rows: list[list[float]]) -> list[float]:
    """Per gap index, the median over debates of the same length (ms, rounded)."""
    n = median([float(len(r)) for r in rows]) if rows else 0
    rows = [r for r in rows if len(r) == n]
    return [rnd(median([r[i] for r in rows]), 1) for i in range(int(n))] if rows else []


def median_breakdown(rows: list[dict[str, float]]) -> dict[str, float]:
    """Per key, the median over debates (ms, rounded)."""
    rows = [r for r in rows if r]
    return {k: rnd(median([r[k] for r in rows]), 1) for k in (rows[0] if rows else {})}


async def settle(env: Env, s2: str) -> None:
    """Wait until the daemon has finished finalizing ``s2`` (so runs do not overlap)."""
    assert env.daemon is not None
    deadline = time.monotonic() + 60
    while s2 in env.daemon.engine.tables and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    await env.wait_idle(s2)


async def turn_script(env: Env, s2: str) -> list[tuple[str, str]]:
    """(agent, prompt text) of every turn the daemon sent in ``s2`` (its visible text part)."""
    msgs = await env.oc("GET", f"/session/{s2}/message")
    out: list[tuple[str, str]] = []
    for m in msgs:
        info = m["info"]
        if info["role"] != "user" or not info.get("agent"):
            continue
        parts = [p for p in m["parts"] if p.get("type") == "text"]
        kinds = {((p.get("metadata") or {}).get(META_KEY) or {}).get("kind") for p in parts}
        if not kinds & {"turn", "observer"}:
            continue
        out.append((str(info["agent"]), str(parts[0].get("text") or "")))
    return out


def model_of(agent: str) -> dict[str, str]:
    mid = SEAT_MODELS.get(agent, "observer-1")
    return {"providerID": "scripted", "modelID": mid}


async def child_session(env: Env, parent: str, title: str) -> str:
    """A new session under ``parent`` in the project; its id."""
    s = await env.oc(
        "POST",
        "/session",
        {"parentID": parent, "title": title},
        params={"directory": env.directory},
    )
    return str(s["id"])


async def floor_debate(
    env: Env,
    tap: EventTap,
    parent: str,
    script: list[tuple[str, str]],
    spans: dict[str, Span] | None = None,
) -> float:
    """The floor: the same turns into one session, prompt_async + wait for idle; seconds.
    ``spans`` gets the session's ``(start, end)``."""
    m0 = time.monotonic()
    t0 = time.perf_counter()
    sid = await child_session(env, parent, "floor")
    for agent, text in script:
        idle = tap.expect_idle(sid)
        await env.oc(
            "POST",
            f"/session/{sid}/prompt_async",
            {
                "messageID": ids.message_id(),
                "agent": agent,
                "model": model_of(agent),
                "parts": [{"type": "text", "text": text}],
            },
        )
        await asyncio.wait_for(idle.wait(), 120)
    dt = time.perf_counter() - t0
    if spans is not None:
        spans[sid] = (m0, time.monotonic())
    return dt


def handoff_stats(total: list[float], server: list[float], queued: list[float]) -> dict[str, Any]:
    """p50/p99 of total, server (incl. waiting for a pool slot) and daemon-side handoff times
    (ms)."""
    daemon = [t - s for t, s in zip(total, server, strict=True)]
    return {
        "queued_p50_ms": rnd(percentile(queued, 50)),
        "queued_p99_ms": rnd(percentile(queued, 99)),
        "n": len(total),
        "total_p50_ms": rnd(percentile(total, 50)),
        "total_p99_ms": rnd(percentile(total, 99)),
        "server_p50_ms": rnd(percentile(server, 50)),
        "server_p99_ms": rnd(percentile(server, 99)),
        "daemon_p50_ms": rnd(percentile(daemon, 50)),
        "daemon_p99_ms": rnd(percentile(daemon, 99)),
        "daemon_max_ms": rnd(max(daemon) if daemon else float("nan")),
    }


def _user_text(req: RecordedRequest) -> list[str]:
    return [content_text(m.get("content")) for m in req.messages if m.get("role") == "user"]


def orchestration_bytes(requests: list[RecordedRequest], state: RoundtableState) -> dict[str, Any]:
    """Figure 3 on one finished debate (``requests`` of its S2, ``state`` its final state)."""
    topic = state.prompt
    tb = len(topic.encode())
    seat_reqs = [r for r in requests if r.kind == "turn" and r.agent != OBSERVER_AGENT]
    obs_reqs = [r for r in requests if r.kind == "turn" and r.agent == OBSERVER_AGENT]
    n = len(state.agents)
    per_turn: list[dict[str, Any]] = []
    seed_prompts = 0
    for k, req in enumerate(seat_reqs):
        texts = _user_text(req)
        user = sum(len(t.encode()) for t in texts)
        topic_copies = sum(t.count(topic) for t in texts)
        # the state block in either form: the seed's META text or the card (never expected)
        meta = sum(len(t.encode()) for t in texts if "[ROUNDTABLE META" in t or CARD_FOOTER in t)
        orch = user - meta - tb * topic_copies
        rnd_i, seat = divmod(k, n)
        seed_prompts += _seed_prompt_bytes(state, rnd_i, seat) - tb
        history: list[HistoryEntry] = [e for e in state.history if e.kind == "turn"][:k]
        seed_state = state.model_copy(
            update={"history": history, "current_round": rnd_i, "current_agent_index": seat}
        )
        seed_meta = len(encode_state(seed_state, _SIZING_KEY)[0].encode())
        per_turn.append(
            {
                "turn": k + 1,
                "round": rnd_i + 1,
                "agent": req.agent,
                "request_bytes": req.body_len,
                "orchestration_bytes": orch,
                "state_block_bytes": meta,
                "seed_orchestration_bytes": seed_prompts + seed_meta,
                "seed_meta_bytes": seed_meta,
            }
        )
    orch_all = [t["orchestration_bytes"] for t in per_turn]
    by_round: dict[int, list[int]] = {}
    for t in per_turn:
        by_round.setdefault(t["round"], []).append(t["orchestration_bytes"])
    # Growth with the round number: round 2 (the first with a full attribution block) against
    # the second-to-last round (the last round adds its fixed "last prompt" line).
    rounds = sorted(by_round)
    first = median([float(x) for x in by_round[rounds[1] if len(rounds) > 1 else rounds[0]]])
    last = median([float(x) for x in by_round[rounds[-2] if len(rounds) > 2 else rounds[-1]]])
    obs = obs_reqs[0] if obs_reqs else None
    return {
        "turns": len(per_turn),
        "max_orchestration_bytes": max(orch_all) if orch_all else None,
        "median_orchestration_bytes": median([float(x) for x in orch_all]),
        "median_by_round": {r: median([float(x) for x in v]) for r, v in by_round.items()},
        "growth_round2_to_second_last_bytes": rnd(last - first, 1),
        "state_block_bytes_total": sum(t["state_block_bytes"] for t in per_turn),
        "seed_max_orchestration_bytes": max(t["seed_orchestration_bytes"] for t in per_turn)
        if per_turn
        else None,
        "seed_last_turn_meta_bytes": per_turn[-1]["seed_meta_bytes"] if per_turn else None,
        "observer_request_user_bytes": sum(len(t.encode()) for t in _user_text(obs))
        if obs
        else None,
        "per_turn": per_turn,
    }


_SIZING_KEY = Signer(b"k" * 32)
"""Any key: only the size of the META text is used (the MAC is not part of the text)."""


def _seed_prompt_bytes(state: RoundtableState, round_index: int, seat: int) -> int:
    """Bytes of the seed's per-turn prompt (the layout of docs/behaviour.md, 'What each seat
    sees'), topic included."""
    agents = " → ".join(state.agents)
    lines = [
        "[System] You are participating in a roundtable debate. "
        f"Agents ({agents}) will discuss the topic below in {state.total_rounds} round(s).",
        "[System] The [ROUNDTABLE META] block above is internal routing data — ignore it for "
        "all analysis. Focus only on the topic given in [Topic] below.",
        f"[Topic] {state.prompt}",
        "",
        f"Round {round_index + 1}/{state.total_rounds} | Current agent: {state.agents[seat]}",
    ]
    if round_index + 1 >= state.total_rounds:
        lines += ["", "[System] This is the last prompt — finalize your thoughts"]
    return len("\n".join(lines).encode())


async def run(env: Env, *, pairs: int, concurrent: int, concurrent_rounds: int) -> dict[str, Any]:
    """Figures 1–3 (and the raw event recording of one debate, returned as ``_events``)."""
    # Imported here: bench.overhead_v2 imports this module.
    from .overhead_v2 import CallCount

    assert env.daemon is not None
    engine = env.daemon.engine
    metrics = engine.metrics
    tap = EventTap(env.srv.url)
    await tap.start()
    calls = CallCount()
    try:
        parent = await env.new_parent()
        # Warm-up pair (not counted): also records the event stream and the turn script.
        tap.recording = True
        _, s2 = await daemon_debate(env, parent)
        tap.recording = False
        script = await turn_script(env, s2)
        await floor_debate(env, tap, parent, script)
        metrics.handoffs.clear()
        metrics.handoff_server.clear()
        metrics.handoff_queued.clear()
        fast0, read0, early0 = metrics.fast_handoffs, metrics.read_handoffs, metrics.early_hides
        ahead0 = metrics.ahead_decisions
        d_times: list[float] = []
        f_times: list[float] = []
        d_spans: dict[str, Span] = {}
        f_spans: dict[str, Span] = {}
        last_s2 = s2
        for i in range(pairs):
            # Alternate which side goes first so drift hits both equally.
            if i % 2 == 0:
                calls.on = True
                d, last_s2 = await daemon_debate(env, parent, spans=d_spans)
                calls.on = False
                f = await floor_debate(env, tap, parent, script, f_spans)
            else:
                f = await floor_debate(env, tap, parent, script, f_spans)
                calls.on = True
                d, last_s2 = await daemon_debate(env, parent, spans=d_spans)
                calls.on = False
            d_times.append(d)
            f_times.append(f)
        ratios = [d / f for d, f in zip(d_times, f_times, strict=True)]
        where = {
            side: median_breakdown(
                [breakdown(await env.llm.requests_for(s), span) for s, span in spans.items()]
            )
            for side, spans in (("daemon", d_spans), ("floor", f_spans))
        }
        per_gap = {
            side: median_gaps([gaps(await env.llm.requests_for(s)) for s in spans])
            for side, spans in (("daemon", d_spans), ("floor", f_spans))
        }
        calls_per_debate = {k: rnd(v / pairs, 1) for k, v in sorted(calls.calls.items())}
        ms_per_debate = {k: rnd(v / pairs, 1) for k, v in sorted(calls.ms.items())}
        h1 = handoff_stats(
            list(metrics.handoffs), list(metrics.handoff_server), list(metrics.handoff_queued)
        )
        h1["fast_handoffs"] = metrics.fast_handoffs - fast0
        h1["read_handoffs"] = metrics.read_handoffs - read0
        h1["early_hides"] = metrics.early_hides - early0
        h1["ahead_decisions"] = metrics.ahead_decisions - ahead0
        # Figure 3 on the last measured debate.
        table = engine.recent[last_s2]
        fig3 = orchestration_bytes(await env.llm.requests_for(last_s2), table.state)
        # Figure 2 at N concurrent roundtables (the tap would only add load from here on).
        await tap.close()
        metrics.handoffs.clear()
        metrics.handoff_server.clear()
        metrics.handoff_queued.clear()
        parents = [await env.new_parent(f"S1 c{i}") for i in range(concurrent)]
        t0 = time.perf_counter()
        starts = await asyncio.gather(
            *(
                env.start_rt(
                    agents=AGENTS, rounds=concurrent_rounds, prompt=TOPIC, parentSessionID=p
                )
                for p in parents
            )
        )
        await asyncio.gather(*(env.result(s, timeout=600) for s in starts))
        conc_s = time.perf_counter() - t0
        for s in starts:
            await settle(env, s)
        hn = handoff_stats(
            list(metrics.handoffs), list(metrics.handoff_server), list(metrics.handoff_queued)
        )
        hn["wall_s"] = rnd(conc_s, 2)
        hn["fast_handoffs"] = metrics.fast_handoffs - fast0 - h1["fast_handoffs"]
        hn["read_handoffs"] = metrics.read_handoffs - read0 - h1["read_handoffs"]
        hn["early_hides"] = metrics.early_hides - early0 - h1["early_hides"]
        hn["ahead_decisions"] = metrics.ahead_decisions - ahead0 - h1["ahead_decisions"]
    finally:
        calls.close()
        await tap.close()
    return {
        "overhead": {
            "pairs": pairs,
            "turns_per_debate": len(script),
            "daemon_s": [rnd(x) for x in d_times],
            "floor_s": [rnd(x) for x in f_times],
            "ratios": [rnd(x) for x in ratios],
            "daemon_median_s": rnd(median(d_times)),
            "floor_median_s": rnd(median(f_times)),
            "median_ratio": rnd(median(ratios)),
            "breakdown_ms": where,
            "gaps_ms": per_gap,
            "daemon_server_calls_per_debate": calls_per_debate,
            "daemon_server_ms_per_debate": ms_per_debate,
            "target": OVERHEAD_TARGET,
            "met": median(ratios) <= OVERHEAD_TARGET,
        },
        "handoff": {
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
        },
        "bytes": {
            **fig3,
            "target_bytes": TURN_ORCHESTRATION_BUDGET,
            "met": (fig3["max_orchestration_bytes"] or 0) <= TURN_ORCHESTRATION_BUDGET
            and fig3["state_block_bytes_total"] == 0
            and fig3["growth_round2_to_second_last_bytes"] <= 32,
        },
        "_events": bytes(tap.recorded),
    }
