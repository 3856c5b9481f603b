"""Field failure (a new user's `scripts/demo --base-url http://127.0.0.1:18080/v1 --model local`:
every seat and the observer on a local model whose provider lists no price): the dry run said
"local/local (price unknown)" and `roundtabled eval` "USD/q unknown", but the result read
``Usage — pm: 200 in / 40 out · $0 | … total: 700 in / 140 out · $0``, `roundtabled status`
``$0.0000`` on every row and the JSON ``"cost": 0.0``: the server records a cost of 0 for a model
without a price, shown as measured. And ``--budget-usd 0.01`` on such a model ran to the end
without a word. Now the cost of those agents' turns is unknown everywhere, and a USD budget on
such a model is refused at the start, naming the flag.
"""

from __future__ import annotations

from roundtabled.cli.show import usage_cells
from roundtabled.core.result import build_result, delivery_text, usage_table
from roundtabled.core.state import Usage
from roundtabled.service.export import to_data, to_markdown
from tests.e2e.conftest import RT
from tests.states import finished as state_of
from tests.states import seat_turn as turn

REPORTED = Usage(input=200, output=40)  # what the server recorded: tokens, cost 0
HISTORY = [turn(a, r, REPORTED) for r in (1, 2) for a in ("pm", "dev")]


def test_an_unpriced_model_s_cost_is_unknown_in_the_result_and_the_texts() -> None:
    state = state_of(HISTORY, unpriced=["pm", "dev"])
    usage = build_result(state).dump()["usage"]
    assert usage["cost"] is None and usage["input"] == 800, usage
    assert usage["perAgent"]["pm"]["cost"] is None
    text = delivery_text(state)
    assert "$0" not in text and "cost unknown (no price listed)" in text
    total = usage_table(state.history, state.unpriced)["total"].dump()
    assert total["cost"] is None and "cost unknown" in usage_cells(total)
    data = to_data(state)
    assert data["usage"]["total"]["cost"] is None
    assert all(t["usage"]["cost"] is None for t in data["turns"])
    md = to_markdown(data)
    assert "| **total** | 800 | 160 | unknown |" in md and "$0" not in md


def test_a_priced_model_keeps_its_recorded_cost() -> None:
    priced = [turn(a, r, Usage(input=200, output=40, cost=0.0012)) for r in (1, 2) for a in "ab"]
    usage = build_result(state_of(priced, agents=["a", "b"])).dump()["usage"]
    assert usage["cost"] == 0.0048


async def test_the_scripted_models_without_a_price_report_an_unknown_cost(rt: RT) -> None:
    s2 = await rt.start(agents=["pm", "dev"], prompt="Split?", rounds=1)
    payload = await rt.result(s2)
    usage = payload["result"]["usage"]
    assert usage["cost"] is None and usage["perAgent"]["pm"]["cost"] is None
    assert "$0" not in payload["text"]


async def test_a_usd_budget_on_a_model_without_a_price_is_refused(rt: RT) -> None:
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {
            "agents": ["pm", "dev"],
            "prompt": "Split?",
            "rounds": 1,
            "budget": {"usd": 0.01},
            "directory": rt.directory,
        },
    )
    assert status == 400, data
    assert "budget.usd (--budget-usd)" in str(data) and "pm (scripted/" in str(data)
