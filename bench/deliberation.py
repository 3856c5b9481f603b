"""Figures 7a–7e: deliberation (stop on convergence, budgets, independent openings, context).

Debates on the real server with the scripted LLM answering every turn after a realistic
:data:`TURN_DELAY_S` and with fixed usage (:data:`PROMPT_TOKENS` in, :data:`COMPLETION_TOKENS`
out per reply, the observer too). Each reply ends with the ``Position:`` line the turn prompt asks
for; the label each seat states per round is what a figure scripts. Baselines run in the same
run, on the same server, with the same script.

- **7a** converging panel (every seat keeps its label from round 1 on), 3 seats × 5 rounds:
  ``until: "converged"`` against fixed rounds; tokens and wall time ratios (target ≤ 0.45).
- **7b** diverging panel (labels change every round): ``until: "converged"`` must run all 5
  rounds; tokens ratio exactly 1.00 (no false stop).
- **7c** ``opening: "independent"``, 4 seats: round 1 wall time ≤ 1.25 × the slowest seat's turn.
- **7d** a token budget: never exceeded by more than the observer's reserve, and the debate stops
  within one seat turn of what the budget allows.
- **7e** ``context: "recent"`` against ``"full"``, 3 × 10: total input tokens ≤ 0.6 ×.

Tokens are read from the server: the sum of ``tokens.input + tokens.output`` over S2's assistant
messages. Times in seconds.
"""

from __future__ import annotations

import time
from typing import Any

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import default_text

from .debate import settle
from .env import TOPIC, Env
from .stats import rnd

AGENTS = ["pm", "dev", "rv"]
ROUNDS = 5
TURN_DELAY_S = 1.5
PROMPT_TOKENS = 1000
COMPLETION_TOKENS = 200
TURN_TOKENS = PROMPT_TOKENS + COMPLETION_TOKENS


def reply(agent: str, rnd_no: int, label: str) -> Text:
    """One seat reply closing with its Position line, after the turn delay, fixed usage."""
    # Varied filler: a steady position must not also read as a repetition (loop detection).
    return Text(
        text=default_text(agent, label, rnd_no)
        + f"\nPosition: {label} — {agent} holds this in round {rnd_no} (confidence 7/10)",
        first_byte_delay=TURN_DELAY_S,
        prompt_tokens=PROMPT_TOKENS,
        completion_tokens=COMPLETION_TOKENS,
    )


def observer_reply() -> Text:
    return Text(
        text="1. **Executive summary** the panel's view.\n2. **Key points** …",
        first_byte_delay=TURN_DELAY_S,
        prompt_tokens=PROMPT_TOKENS,
        completion_tokens=COMPLETION_TOKENS,
    )


async def script(env: Env, labels: dict[str, list[str]]) -> None:
    """Queue every seat's replies (one per round) and one observer reply."""
    for agent, per_round in labels.items():
        await env.llm.script(
            *(reply(agent, i + 1, lbl) for i, lbl in enumerate(per_round)), agent=agent
        )
    await env.llm.script(observer_reply(), agent=OBSERVER_AGENT)


async def server_tokens(env: Env, s2: str) -> tuple[int, int, int]:
    """(tokens, seat turns, observer turns) from S2's assistant messages."""
    msgs = await env.oc("GET", f"/session/{s2}/message")
    total = turns = observers = 0
    for m in msgs:
        info = m["info"]
        if info.get("role") != "assistant":
            continue
        tok = info.get("tokens") or {}
        total += int(tok.get("input") or 0) + int(tok.get("output") or 0)
        if info.get("agent") == OBSERVER_AGENT:
            observers += 1
        else:
            turns += 1
    return total, turns, observers


async def one(env: Env, labels: dict[str, list[str]], **body: Any) -> dict[str, Any]:
    """One debate: (wall seconds, tokens, turns, end reason, notes)."""
    await env.llm.reset()  # an early stop leaves replies queued: never let them leak into a run
    await script(env, labels)
    parent = await env.new_parent()
    t0 = time.perf_counter()
    s2 = await env.start_rt(agents=list(labels), prompt=TOPIC, parentSessionID=parent, **body)
    result = await env.result(s2)
    wall = time.perf_counter() - t0
    await env.wait_idle(s2)
    tokens, turns, observers = await server_tokens(env, s2)
    assert env.daemon is not None
    await settle(env, s2)
    state = await env.daemon.engine.load_state(s2)  # the signed final state, as written in S2
    return {
        "wall_s": rnd(wall, 2),
        "tokens": tokens,
        "seat_turns": turns,
        "observer_turns": observers,
        "end_reason": state.end_reason.value if state.end_reason else None,
        "rounds_completed": max((e.round for e in state.seat_turns()), default=0),
        "notes": state.notes,
        "result_keys": sorted(result),
    }


async def converged_against_fixed(
    env: Env, labels: dict[str, list[str]], *, figure: str, target: str
) -> tuple[dict[str, Any], float]:
    """The same panel twice: :data:`ROUNDS` fixed rounds, then ``until: "converged"``.

    Args:
        labels: ``{agent: [label of round 1, round 2, …]}`` (see :func:`script`).
        figure, target: the figure's name and target, as the report shows them.

    Returns:
        The figure's common keys (``figure``, ``target``, the two runs of :func:`one` as
        ``fixed_rounds`` and ``until_converged``, ``tokens_ratio`` rounded) and the unrounded
        tokens ratio (converged / fixed) that the target is checked on.
    """
    fixed = await one(env, labels, rounds=ROUNDS)
    conv = await one(env, labels, rounds=ROUNDS, until="converged")
    ratio = conv["tokens"] / fixed["tokens"]
    common = {
        "figure": figure,
        "target": target,
        "fixed_rounds": fixed,
        "until_converged": conv,
        "tokens_ratio": rnd(ratio),
    }
    return common, ratio


async def fig_7a(env: Env) -> dict[str, Any]:
    labels = {a: [f"{a} view"] * ROUNDS for a in AGENTS}
    out, tok_ratio = await converged_against_fixed(
        env,
        labels,
        figure="7a converging panel, 3 x 5, until converged / fixed rounds",
        target="tokens and wall time <= 0.45",
    )
    wall_ratio = out["until_converged"]["wall_s"] / out["fixed_rounds"]["wall_s"]
    return {
        **out,
        "wall_ratio": rnd(wall_ratio),
        "met": tok_ratio <= 0.45 and wall_ratio <= 0.45,
    }


async def fig_7b(env: Env) -> dict[str, Any]:
    labels = {a: [f"{a} view {r}" for r in range(1, ROUNDS + 1)] for a in AGENTS}
    out, ratio = await converged_against_fixed(
        env,
        labels,
        figure="7b diverging panel, 3 x 5, until converged / fixed rounds",
        target="all 5 rounds run, tokens ratio 1.00",
    )
    all_turns = out["until_converged"]["seat_turns"] == ROUNDS * len(AGENTS)
    return {**out, "met": ratio == 1.0 and all_turns}


async def fig_7d(env: Env, budget: int = 10_000) -> dict[str, Any]:
    labels = {a: [f"{a} view {r}" for r in range(1, ROUNDS + 1)] for a in AGENTS}
    run = await one(env, labels, rounds=ROUNDS, budget={"tokens": budget})
    seat_tokens = run["seat_turns"] * TURN_TOKENS
    observer_tokens = run["tokens"] - seat_tokens
    # With every reply costing TURN_TOKENS, the most seat turns that fit beside the observer:
    fit = (budget - observer_tokens) // TURN_TOKENS
    within_one = run["seat_turns"] >= fit - 1
    return {
        "figure": "7d token budget, 3 x 5",
        "target": "spent <= budget (the observer runs inside its reserve); stops within one "
        "seat turn of what fits",
        "budget_tokens": budget,
        "run": run,
        "spent_tokens": run["tokens"],
        "seat_turns_that_fit": int(fit),
        "within_one_turn": within_one,
        "met": run["tokens"] <= budget and within_one and run["end_reason"] == "budget",
    }


QA_PROMPT = "You are qa, the tester of the roundtable."
"""The fourth seat of figure 7c (the bench configuration defines three; qa joins them here)."""


async def round_one(env: Env, independent: bool) -> dict[str, Any]:
    """One 4-seat, 1-round debate; round 1's wall time from the scripted LLM's own records."""
    seats = [*AGENTS, "qa"]
    await env.llm.reset()
    await script(env, {a: [f"{a} view"] for a in seats})
    parent = await env.new_parent()
    t0 = time.monotonic()  # the scripted LLM's records use the same system-wide clock
    body: dict[str, Any] = {"opening": "independent"} if independent else {}
    s2 = await env.start_rt(agents=seats, prompt=TOPIC, parentSessionID=parent, rounds=1, **body)
    await env.result(s2)
    sessions = [s2]
    if independent:
        sessions += [str(c["id"]) for c in await env.oc("GET", f"/session/{s2}/children")]
    reqs = [r for sid in sessions for r in await env.llm.requests_for(sid) if r.kind == "turn"]
    seat_reqs = [r for r in reqs if r.agent != OBSERVER_AGENT]
    [observer] = [r for r in reqs if r.agent == OBSERVER_AGENT]
    assert sorted(str(r.agent) for r in seat_reqs) == sorted(seats), [r.agent for r in seat_reqs]
    turns = [(r.finished_at or r.t_mono) - r.t_mono for r in seat_reqs]
    answered = max(r.finished_at or r.t_mono for r in seat_reqs)
    await settle(env, s2)
    return {
        "round1_wall_s": rnd(answered - t0, 3),
        "until_next_turn_s": rnd(observer.t_mono - t0, 3),
        "slowest_seat_turn_s": rnd(max(turns), 3),
        "seat_turns_s": [rnd(t, 3) for t in turns],
    }


async def fig_7c(env: Env) -> dict[str, Any]:
    await env.llm.agent_prompt(QA_PROMPT, "qa")
    seq = await round_one(env, independent=False)
    ind = await round_one(env, independent=True)
    ratio = ind["round1_wall_s"] / ind["slowest_seat_turn_s"]
    return {
        "figure": "7c opening independent, 4 seats, round 1 wall time",
        "target": "round 1 wall time <= 1.25 x the slowest seat's turn (sequential: the sum)",
        "definition": "round 1 wall = start request sent -> the last round-1 reply finished at "
        "the model; until_next_turn = start request sent -> the next turn's model request "
        "(the openings recorded); a seat's turn = its model request, arrival to finish",
        "sequential": seq,
        "independent": ind,
        "ratio_to_slowest": rnd(ratio),
        "sequential_ratio_to_slowest": rnd(seq["round1_wall_s"] / seq["slowest_seat_turn_s"]),
        "met": ratio <= 1.25,
    }


def not_available(name: str, target: str, why: str) -> dict[str, Any]:
    return {"figure": name, "target": target, "met": False, "not_run": why}


async def run(env: Env) -> dict[str, Any]:
    """Figures 7a–7e on a started environment (server, scripted LLM, daemon)."""
    return {
        "7a": await fig_7a(env),
        "7b": await fig_7b(env),
        "7c": await fig_7c(env),
        "7d": await fig_7d(env),
        "7e": await fig_7e(env),
    }


E_ROUNDS = 10
E_TURN_DELAY_S = 0.2
E_REPLY_WORDS = 120


def fixed_reply(agent: str, rnd_no: int) -> Text:
    """A fixed-length seat reply (:data:`E_REPLY_WORDS` words) with its Position line; its
    usage is the scripted model's measured one (input from the request it received)."""
    words = (default_text(agent, "7e", rnd_no) + " ") * 4
    body = " ".join(words.split()[:E_REPLY_WORDS])
    return Text(
        text=f"{body}\nPosition: steady — {agent} in round {rnd_no} (confidence 6/10)",
        first_byte_delay=E_TURN_DELAY_S,
        completion_tokens=COMPLETION_TOKENS,
    )


async def context_run(env: Env, context: str) -> dict[str, Any]:
    """One 3 × :data:`E_ROUNDS` debate; the seats' input tokens as the server recorded them."""
    await env.llm.reset()
    for agent in AGENTS:
        await env.llm.script(*(fixed_reply(agent, r) for r in range(1, E_ROUNDS + 1)), agent=agent)
    await env.llm.script(observer_reply(), agent=OBSERVER_AGENT)
    parent = await env.new_parent()
    s2 = await env.start_rt(
        agents=AGENTS, prompt=TOPIC, rounds=E_ROUNDS, context=context, parentSessionID=parent
    )
    await env.result(s2)
    await env.wait_idle(s2)
    msgs = await env.oc("GET", f"/session/{s2}/message")
    seat_input = sum(
        int((m["info"].get("tokens") or {}).get("input") or 0)
        for m in msgs
        if m["info"].get("role") == "assistant" and m["info"].get("agent") in AGENTS
    )
    assert env.daemon is not None
    await settle(env, s2)
    state = await env.daemon.engine.load_state(s2)
    return {
        "seat_input_tokens": seat_input,
        "seat_turns": len(state.seat_turns()),
        "view": state.view,
        "end_reason": state.end_reason.value if state.end_reason else None,
    }


async def fig_7e(env: Env) -> dict[str, Any]:
    """``context: "recent"`` against ``"full"`` (needs the roundtable plugin in the server)."""
    name, target = "7e context recent / full, 3 x 10", "total seat input tokens <= 0.6 x"
    assert env.daemon is not None
    if env.daemon.engine.shell.plugins.version_for(env.directory) is None:
        return not_available(name, target, "the roundtable plugin is not loaded in the server")
    full = await context_run(env, "full")
    recent = await context_run(env, "recent")
    ratio = recent["seat_input_tokens"] / full["seat_input_tokens"]
    return {
        "figure": name,
        "target": target,
        "full": full,
        "recent": recent,
        "ratio": rnd(ratio, 3),
        "tokens_from": "the scripted model's prompt_tokens, measured from each request "
        "(characters / 4), as the server recorded them on each seat reply",
        "met": ratio <= 0.6 and recent["view"] == "plugin",
    }
