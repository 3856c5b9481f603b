"""``roundtabled start --rounds 5 --budget-tokens 3000 --dry-run`` said "expected to stop
before pm's turn in round 1"; the real run went 5/5 rounds. The dry run kept back the whole
observer's estimate from the first turn on, where a run keeps back what the turns so far imply,
and the demo's model reported a fixed usage. The dry run never mentioned ``--until`` either.

Stated factor: the estimate assumes 400-token replies, so on the scripted model (replies of
about a hundred tokens, usage measured from each request) it is an upper bound of the real
tokens within 4×, and its expected budget stop comes no later than the real one and at least a
third of the way to it."""

from __future__ import annotations

import json
import re

from tests.e2e.demo_serve import DemoServe

TOPIC = "Should we adopt trunk-based development?"
SEATS = ("pm", "dev", "rv")


def _turns_before(agent: str, rnd: str) -> int:
    return (int(rnd) - 1) * len(SEATS) + SEATS.index(agent)


def test_the_estimate_bounds_the_real_usage(demo: DemoServe) -> None:
    plan = demo.start("--rounds", "5", "--dry-run", topic=TOPIC).stdout
    est = re.search(r"Context full \(this call\): ~([\d,]+) input \+ ~([\d,]+) output", plan)
    assert est, plan
    estimated = sum(int(g.replace(",", "")) for g in est.groups())
    run = demo.start("--rounds", "5", topic=TOPIC)
    total = json.loads(demo.cli("status", demo.session_of(run), "--json").stdout)["usage"]["total"]
    real = total["input"] + total["output"]
    assert real <= estimated <= 4 * real, (estimated, real)


def test_the_expected_budget_stop_is_near_the_real_one(demo: DemoServe) -> None:
    for budget in ("3000", "8000", "20000"):
        plan = demo.start(
            "--rounds", "5", "--budget-tokens", budget, "--dry-run", topic=TOPIC
        ).stdout
        expected = re.search(r"expected to stop before (\w+)'s turn in round (\d)", plan)
        assert expected, plan
        run = demo.start("--rounds", "5", "--budget-tokens", budget, topic=TOPIC).stdout
        real = re.search(r"the debate stopped in round (\d) of 5 \(after (\w+)'s turn\)", run)
        assert real, run
        predicted_turns = _turns_before(*expected.groups())
        real_turns = _turns_before(real.group(2), real.group(1)) + 1
        assert predicted_turns <= real_turns <= 3 * max(predicted_turns, 1), (budget, plan, run)


def test_the_dry_run_says_until_converged_may_stop_early(demo: DemoServe) -> None:
    plan = demo.start("--rounds", "5", "--until", "converged", "--dry-run", topic=TOPIC).stdout
    assert (
        "Until converged: the debate stops after the first round, from round 2 on, in which the "
        "panel converged; the figures below are for all 5 rounds, the most it can take"
    ) in plan
