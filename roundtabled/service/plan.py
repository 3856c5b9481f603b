"""The shell of a dry run (``dryRun``, ``roundtabled start --dry-run``): read the server, estimate.

Runs the start's own checks (:func:`roundtabled.engine.launch.check_start`: the directory, S1,
the seats and their models, the recent context's plugin, a USD budget; the directory's agents,
configuration and providers read or kept as for a start), and hands the figures to the pure
estimate (:mod:`roundtabled.core.estimate`). Creates no session and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roundtabled.core import protocols
from roundtabled.core.estimate import (
    Price,
    Seat,
    estimate,
    plan_json,
    plan_text,
    protocol_lines,
    protocol_prices,
)
from roundtabled.core.state import BUILTIN_OBSERVER, ModelRef, Options, observer_agent_of
from roundtabled.core.validation import RoundtableRequest
from roundtabled.engine.launch import (
    InstanceReads,
    check_start,
    check_usd_budget,
    unpriced_agents,
)
from roundtabled.engine.plugins import PluginRegistry
from roundtabled.engine.v2run import V2Runner
from roundtabled.opencode.port import V1Port


async def dry_run(
    port: V1Port,
    req: RoundtableRequest,
    *,
    plugins: PluginRegistry | None = None,
    reads: InstanceReads | None = None,
) -> dict[str, Any]:
    """The plan of ``req`` (a new roundtable, preset applied) without running it, after the
    start's own checks (:func:`roundtabled.engine.launch.check_start`, with the engine's
    ``plugins`` and kept ``reads``).

    Returns:
        ``{"dryRun": true, "plan": …, "text": …}``: the plan as JSON
        (:func:`roundtabled.core.estimate.plan_json`, with ``full`` and ``recent`` estimates and
        each protocol's price) and in words (:func:`roundtabled.core.estimate.plan_text`).

    Raises:
        ValidationFailed: whatever a start would refuse before it creates S2.
        TransportError: the server could not be reached.
    """
    assert req.agents is not None
    checked = await check_start(port, req, plugins=plugins, reads=reads)
    available, models = checked.found.agents, checked.models
    listed = checked.found.prices
    prompt_of = {a.id: a.prompt for a in available}
    prices = {k: Price(i, o) for k, (i, o) in listed.items()}
    return _plan(req, models, prompt_of, prices)


async def dry_run_v2(runner: V2Runner, req: RoundtableRequest) -> dict[str, Any]:
    """The plan of ``req`` on OpenCode 2.x, as :func:`dry_run` answers it: the directory, S1, the
    seats and the observer checked and their models read as the 2.x shell's start reads them
    (:meth:`~roundtabled.engine.v2run.V2Runner.plan_reads`), each agent's system prompt from
    ``GET /api/agent``. 2.x lists no model price, so every price is unknown (``null``, no cost
    estimate) and a USD budget is refused as a start refuses it.

    Raises:
        ValidationFailed: the directory, S1, the seats, the observer, a USD budget, or what 2.x
            cannot run (:func:`roundtabled.engine.v2run.refusal`).
        TransportError: the server could not be reached.
    """
    assert req.agents is not None
    directory, models = await runner.plan_reads(req)
    # no price on 2.x: every model unpriced, named in seat order as a 1.x start names them
    unpriced = unpriced_agents(req.agents, req.observer or BUILTIN_OBSERVER, models, set())
    check_usd_budget(req, models, unpriced)
    prompt_of = {a.id: a.prompt for a in await runner.port.agents(directory)}
    return _plan(req, models, prompt_of, {})


def _plan(
    req: RoundtableRequest,
    models: Mapping[str, ModelRef],
    prompt_of: Mapping[str, object],
    prices: dict[str, Price],
) -> dict[str, Any]:
    """The dry run's answer from what was read: each agent's model and system prompt (its
    length is what the estimate needs) and the listed prices (USD per million tokens)."""
    assert req.agents is not None
    observer = req.observer or BUILTIN_OBSERVER
    sides = req.sides or {}

    def seat(name: str) -> Seat:
        text = prompt_of.get(name)
        return Seat(
            agent=name,
            model=models[name].label(),
            prompt_chars=len(text) if isinstance(text, str) else 0,
            side=sides.get(name),
        )

    seats = [seat(a) for a in req.agents]
    obs = seat(observer_agent_of(observer))
    # The options the protocol runs with (vote and adaptive: the independent opening).
    name = req.protocol or "debate"
    options, rounds = protocols.of(name).options(
        Options(
            opening=req.opening or "sequential",
            until=req.until or "rounds",
            adaptive_threshold=req.adaptive_threshold,
        ),
        req.rounds,
    )
    independent = options.opening == "independent"
    estimates = [
        estimate(
            seats,
            obs,
            rounds=rounds,
            topic_chars=len(req.prompt),
            context=context,
            prices=prices,
            budget=req.budget,
            independent=independent,
        )
        for context in ("full", "recent")
    ]
    context = req.context or "full"
    by_protocol = protocol_prices(
        seats,
        obs,
        rounds=rounds,
        topic_chars=len(req.prompt),
        context=context,
        prices=prices,
        opening_independent=(req.opening == "independent"),
    )
    plan = plan_json(seats, obs, rounds, prices, estimates)
    plan["protocol"] = name
    plan["protocols"] = by_protocol
    text = plan_text(seats, obs, rounds, prices, estimates, context, options.until)
    return {
        "dryRun": True,
        "plan": plan,
        "text": "\n".join([text, *protocol_lines(by_protocol, name, context)]),
    }
