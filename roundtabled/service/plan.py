"""The shell of a dry run (``dryRun``, ``roundtabled start --dry-run``): read the server, estimate.

Checks the call's directory, reads the agents (their prompts and models), the server's
configuration (its default model) and its providers (the models' prices) for it, checks the
seats and a USD budget as a start would (the same functions of
:mod:`roundtabled.engine.launch`), and hands the figures to the pure estimate
(:mod:`roundtabled.core.estimate`). Creates no session and writes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from roundtabled.core import wire
from roundtabled.core.estimate import Price, Seat, estimate, plan_json, plan_text
from roundtabled.core.state import BUILTIN_OBSERVER, ModelRef, observer_agent_of
from roundtabled.core.validation import RoundtableRequest, check_agents
from roundtabled.engine.launch import (
    check_directory_exists,
    check_usd_budget,
    parent_session,
    seat_models,
    unpriced_agents,
)
from roundtabled.engine.v2run import V2Runner
from roundtabled.errors import RoundtableError
from roundtabled.opencode.client import OpenCodeClient


async def dry_run(client: OpenCodeClient, req: RoundtableRequest) -> dict[str, Any]:
    """The plan of ``req`` (a new roundtable, preset applied) without running it.

    Returns:
        ``{"dryRun": true, "plan": …, "text": …}``: the plan as JSON
        (:func:`roundtabled.core.estimate.plan_json`, with ``full`` and ``recent`` estimates)
        and in words (:func:`roundtabled.core.estimate.plan_text`).

    Raises:
        ValidationFailed: the directory, the seats, the observer or a USD budget as a start
            would refuse them.
        TransportError: the server could not be reached.
    """
    assert req.agents is not None
    directory = req.directory
    # First: the agents are read from this directory, so a missing one would be reported as
    # an agent it lacks.
    check_directory_exists(directory)
    if directory is None and req.parent_session_id:
        directory = wire.session_directory(await parent_session(client, req.parent_session_id))
    available = await client.agents(directory)
    config = await client.config(directory)
    providers: dict[str, Any] | None = None
    with contextlib.suppress(RoundtableError):  # no listing: every price is unknown
        providers = await client.providers(directory)
    observer = req.observer or BUILTIN_OBSERVER
    check_agents(req.agents, req.observer, available)
    models = seat_models(req.agents, observer, available, config)
    listed = wire.model_prices(providers or {})
    priced = None if providers is None else set(listed)
    check_usd_budget(req, models, unpriced_agents(req.agents, observer, models, priced))
    prompt_of = {str(a.get("name")): a.get("prompt") for a in available}
    prices = {k: Price(i, o) for k, (i, o) in listed.items()}
    return _plan(req, models, prompt_of, prices)


async def dry_run_v2(runner: V2Runner, req: RoundtableRequest) -> dict[str, Any]:
    """The plan of ``req`` on OpenCode 2.x, as :func:`dry_run` answers it: the seats and the
    observer checked and their models read as the 2.x shell's start reads them
    (:meth:`~roundtabled.engine.v2run.V2Runner.plan_reads`), each agent's system prompt from
    ``GET /api/agent``. 2.x lists no model price, so every price is unknown (``null``, no cost
    estimate) and a USD budget is refused as a start refuses it.

    Raises:
        ValidationFailed: the directory, the seats, the observer, a USD budget, or what 2.x
            cannot run (:func:`roundtabled.engine.v2run.refusal`).
        TransportError: the server could not be reached.
    """
    assert req.agents is not None
    check_directory_exists(req.directory)
    directory, models = await runner.plan_reads(req)
    observer = observer_agent_of(req.observer or BUILTIN_OBSERVER)
    check_usd_budget(req, models, sorted({*req.agents, observer}))
    agents = await runner.port.client.agents(directory)
    prompt_of: dict[str, object] = {a.id: a.system for a in agents}
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
    estimates = [
        estimate(
            seats,
            obs,
            rounds=req.rounds,
            topic_chars=len(req.prompt),
            context=context,
            prices=prices,
            budget=req.budget,
        )
        for context in ("full", "recent")
    ]
    return {
        "dryRun": True,
        "plan": plan_json(seats, obs, req.rounds, prices, estimates),
        "text": plan_text(
            seats, obs, req.rounds, prices, estimates, req.context or "full", req.until
        ),
    }
