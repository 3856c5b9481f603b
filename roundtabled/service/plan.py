"""The shell of a dry run (``dryRun``, ``roundtabled start --dry-run``): read the server, estimate.

Checks the call's directory, reads the agents (their prompts and models), the server's
configuration (its default model) and its providers (the models' prices) for it, checks the
seats and a USD budget as a start would (the same functions of
:mod:`roundtabled.engine.launch`), and hands the figures to the pure estimate
(:mod:`roundtabled.core.estimate`). Creates no session and writes nothing.
"""

from __future__ import annotations

import contextlib
from typing import Any

from roundtabled.core import protocols, wire
from roundtabled.core.estimate import (
    Price,
    Seat,
    estimate,
    plan_json,
    plan_text,
    protocol_lines,
    protocol_prices,
)
from roundtabled.core.state import BUILTIN_OBSERVER, Options, observer_agent_of
from roundtabled.core.validation import RoundtableRequest, check_agents
from roundtabled.engine.launch import (
    check_directory_exists,
    check_usd_budget,
    parent_session,
    seat_models,
    unpriced_agents,
)
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
    prices = {k: Price(i, o) for k, (i, o) in listed.items()}
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
