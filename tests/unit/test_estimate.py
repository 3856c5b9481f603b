"""The cost preview's estimate (roundtabled/core/estimate.py; docs/result.md, "Cost preview").

Proves: requests and turns are counted exactly; input tokens never decrease when rounds, seats or
the topic grow, and ``recent`` never needs more than ``full`` (property-tested); a model without a
reported price makes the cost unknown, never 0; a budget names the turn before which it stops;
the server's price listing is read without guessing (0/0, the server's "no price", is unknown).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core.estimate import (
    REPLY_TOKENS,
    Price,
    Seat,
    estimate,
    plan_json,
    plan_text,
)
from roundtabled.core.state import Budget
from roundtabled.opencode.v1_wire import model_prices

OBS = Seat("roundtable-observer", "scripted/debater-1")
PRICES = {"scripted/debater-1": Price(3.0, 15.0)}


def seats(n: int, model: str = "scripted/debater-1") -> list[Seat]:
    return [Seat(f"s{i}", model, prompt_chars=60) for i in range(n)]


def test_the_plan_counts_turns_and_requests_and_prices_them() -> None:
    e = estimate(seats(3), OBS, rounds=2, topic_chars=400, context="full", prices=PRICES)
    assert len(e.turns) == 6 and len(e.per_round) == 2
    assert e.output == 6 * REPLY_TOKENS + 800
    # round 2 reads round 1's three replies more than round 1 did
    assert e.per_round[1] - e.per_round[0] == 3 * 3 * REPLY_TOKENS
    expected = sum(t_in * 3 + t_out * 15 for _, _, t_in, t_out in e.turns) / 1e6
    assert e.cost is not None and e.cost > expected  # plus the observer's
    plan = plan_json(seats(3), OBS, 2, PRICES, [e])
    assert (plan["turns"], plan["requests"]) == (6, 7)
    text = plan_text(seats(3), OBS, 2, PRICES, [e])
    assert "Dry run: nothing was started" in text and "requests: 7" in text
    assert "$3/$15 per 1M in/out" in text


def test_an_unknown_price_is_unknown_never_zero() -> None:
    mixed = [*seats(2), Seat("x", "local/qwen")]
    e = estimate(mixed, OBS, rounds=1, topic_chars=10, context="full", prices=PRICES)
    assert e.cost is None
    text = plan_text(mixed, OBS, 1, PRICES, [e])
    assert "local/qwen (price unknown)" in text and "cost unknown" in text
    assert plan_json(mixed, OBS, 1, PRICES, [e])["estimates"]["full"]["costUsd"] is None


def test_the_budget_names_the_turn_before_which_it_stops() -> None:
    e = estimate(
        seats(2),
        OBS,
        rounds=10,
        topic_chars=100,
        context="full",
        prices=PRICES,
        budget=Budget(tokens=20_000, seconds=60),
    )
    assert e.stop is not None and e.stop.startswith("expected to stop before s")
    assert "the seconds limit cannot be estimated" in e.stop
    roomy = estimate(
        seats(2), OBS, rounds=1, topic_chars=10, context="full", prices={}, budget=Budget(usd=5)
    )
    assert roomy.stop is not None and "price is unknown" in roomy.stop
    assert estimate(seats(2), OBS, rounds=1, topic_chars=1, context="full", prices={}).stop is None


def test_recent_hides_the_middle_rounds() -> None:
    full = estimate(seats(3), OBS, rounds=6, topic_chars=100, context="full", prices=PRICES)
    recent = estimate(seats(3), OBS, rounds=6, topic_chars=100, context="recent", prices=PRICES)
    assert full.per_round[:3] == recent.per_round[:3]  # nothing hidden before round 4
    assert recent.per_round[5] < full.per_round[5]


_ctx = st.sampled_from(["full", "recent"])


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(1, 8),
    rounds=st.integers(1, 12),
    topic=st.integers(0, 50_000),
    more=st.integers(1, 5),
    context=_ctx,
)
def test_input_tokens_are_monotone_in_rounds_seats_and_topic(
    n: int, rounds: int, topic: int, more: int, context: str
) -> None:
    def total(n_: int, r: int, t: int, c: str = context) -> int:
        return estimate(seats(n_), OBS, rounds=r, topic_chars=t, context=c, prices=PRICES).input  # type: ignore[arg-type]

    base = total(n, rounds, topic)
    assert total(n, rounds + more, topic) > base
    assert total(n + more, rounds, topic) > base
    assert total(n, rounds, topic + more * 100) > base
    assert total(n, rounds, topic, "recent") <= total(n, rounds, topic, "full")


def test_prices_are_read_from_the_provider_listing() -> None:
    data = {
        "providers": [
            {
                "id": "scripted",
                "models": {
                    "debater-1": {"cost": {"input": 3, "output": 15}},
                    "debater-2": {"cost": {"input": 0, "output": 0}},
                    "debater-3": {},
                    "debater-4": {"cost": {"input": True, "output": 1}},
                },
            },
            "junk",
        ]
    }
    # 0/0 is what the server reports for a model without a configured price: unknown
    assert model_prices(data) == {"scripted/debater-1": (3.0, 15.0)}
    assert model_prices(None) == {} and model_prices({"providers": 3}) == {}
