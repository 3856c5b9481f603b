"""Reported by a user: ``roundtabled start --agents pm,dev --budget-usd 0.5 --dry-run …`` on
models without a price printed a plan noting that the USD limit "cannot be estimated", while the
same command without ``--dry-run`` is refused (a USD budget cannot be kept without a price). And
``--dry-run --directory`` with a mistyped directory complained about the agents, which are read
from that directory, instead of the directory. A dry run now checks the directory first and
refuses a USD budget on an unpriced model with the start's own rule: the same one line, exit 2.

The CLI prints that line naming ``--budget-usd`` alone (the daemon's message names
``budget.usd (--budget-usd)`` for the tool's caller).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli_helpers import cli
from tests.e2e.conftest import RT


async def _sessions(rt: RT) -> set[str]:
    listed = await rt.oc("GET", "/session", params={"directory": rt.directory})
    return {str(s["id"]) for s in listed}


async def test_a_dry_run_refuses_a_usd_budget_on_an_unpriced_model_like_the_start(
    rt: RT,
) -> None:
    before = await _sessions(rt)
    argv = ["start", "--agents", "pm,dev", "--budget-usd", "0.5", "--directory", rt.directory]
    dry = await cli(rt, *argv, "--dry-run", "Split the monolith?")
    real = await cli(rt, *argv, "Split the monolith?")
    assert dry.code == real.code == 2, (dry, real)
    assert dry.out == real.out == ""
    assert dry.err == real.err, (dry.err, real.err)
    assert dry.err.count("\n") == 1
    assert dry.err.startswith(
        "Error: --budget-usd: the price of pm (scripted/debater-1), dev (scripted/debater-2)"
    ), dry.err
    assert "or use --budget-tokens" in dry.err
    assert await _sessions(rt) == before
    assert rt.llm.requests_for(kind="turn") == []


@pytest.mark.parametrize("agents", ["pm,dev", "pm,nosuch"])
async def test_a_dry_run_names_a_missing_directory_before_the_agents(
    rt: RT, tmp_path: Path, agents: str
) -> None:
    missing = str(tmp_path / "my-projetc")
    argv = ["start", "--agents", agents, "--directory", missing]
    dry = await cli(rt, *argv, "--dry-run", "Split the monolith?")
    real = await cli(rt, *argv, "Split the monolith?")
    assert dry.code == real.code == 2, (dry, real)
    line = (
        f"Error: --directory {missing!r} does not exist (give the project directory OpenCode "
        "serves, or omit it for the server's own)\n"
    )
    assert dry.err == real.err == line, (dry.err, real.err)
