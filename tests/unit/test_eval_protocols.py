"""How ``roundtabled eval`` runs and reads the product's protocols (docs/eval.md, "What runs per
question"): one roundtable per protocol, started as a user starts one, and its answer read from
the product's own result — never re-computed beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from roundtabled.core.scoring import Question
from roundtabled.eval.options import EvalOptions, protocol_names, runs_of, sample_agents
from roundtabled.eval.question import product_answer, start_body, tally_leader
from roundtabled.eval.spending import estimate, roundtable_spend, total_cost, total_tokens

Q = Question(id="q1", question="What is the result of 2+3*4?", answer="14")


def opts(protocols: list[str], **kw: Any) -> EvalOptions:
    return EvalOptions(agents=["a", "b", "c"], out=Path("run"), protocols=protocols, **kw)


@pytest.mark.parametrize(
    ("protocols", "runs"),
    [
        (
            ["single", "vote", "debate", "adaptive", "council", "self-consistency"],
            ["vote", "debate", "adaptive", "council", "self-consistency"],
        ),
        (["single"], ["single"]),
        (["single", "debate"], ["debate"]),
        (["council", "single"], ["single", "council"]),
        (["self-consistency"], ["self-consistency"]),
    ],
)
def test_each_protocol_is_one_roundtable(protocols: list[str], runs: list[str]) -> None:
    assert runs_of(opts(protocols)) == runs


def test_the_report_lists_the_single_seats_then_the_protocols_in_a_fixed_order() -> None:
    names = protocol_names(opts(["self-consistency", "council", "vote", "single"]))
    assert names == ["single:a", "single:b", "single:c", "vote", "council", "self-consistency"]


def test_the_start_requests_are_the_products_protocols() -> None:
    o = opts(["single", "vote", "debate", "adaptive", "council", "self-consistency"], sc_seat="b")
    bodies = {r: start_body(o, Q, r, "ses_parent", "/p") for r in runs_of(o)}
    assert bodies["vote"]["protocol"] == "vote" and "rounds" not in bodies["vote"]
    assert (bodies["adaptive"]["protocol"], bodies["adaptive"]["rounds"]) == ("adaptive", 3)
    assert bodies["council"]["protocol"] == "council" and "rounds" not in bodies["council"]
    # debate is the default protocol: three rounds after an independent opening.
    assert "protocol" not in bodies["debate"]
    assert (bodies["debate"]["rounds"], bodies["debate"]["opening"]) == (3, "independent")
    sc = bodies["self-consistency"]
    assert sc["agents"] == sample_agents(o) == ["b-sample1", "b-sample2", "b-sample3"]
    assert sc["protocol"] == "vote" and "rounds" not in sc
    for run, body in bodies.items():
        assert body["title"] == f"eval q1 {run}" and body["parentSessionID"] == "ses_parent"
        assert body["directory"] == "/p" and "What is the result of 2+3*4?" in body["prompt"]


def item(label: str, weight: float, seats: int = 1) -> dict[str, Any]:
    return {"label": label, "weight": weight, "seats": ["s"] * seats, "labels": [label]}


def test_the_tally_leader_is_the_most_weight_and_a_tie_decides_nothing() -> None:
    assert tally_leader([item("14", 0.9), item("20", 1.2, 2)]) == "20"
    assert tally_leader([item("14", 0.9), item("20", 0.3 + 0.6, 2)]) is None  # float sums tie
    assert tally_leader([]) is None


def verdict(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"decision": "20", "tally": [item("14", 1.5), item("20", 0.9)]}
    return {**base, **kw}


def test_each_protocol_is_read_where_the_product_reports_it() -> None:
    count = {"leader": "20", "stances": []}
    v = verdict(protocol={"name": "vote", "count": count})
    assert product_answer("vote", v) == ("20", "count")
    assert product_answer("debate", v) == ("14", "tally")
    assert product_answer("self-consistency", v) == ("20", "count")
    assert product_answer("council", v) == ("20", "decision")
    stopped = {"stopped": True, "threshold": 0.67, "why": "x"}
    v = verdict(protocol={"name": "adaptive", "count": count, "adaptive": stopped})
    assert product_answer("adaptive", v) == ("20", "count")
    debated = {**stopped, "stopped": False}
    v = verdict(protocol={"name": "adaptive", "count": count, "adaptive": debated})
    assert product_answer("adaptive", v) == ("14", "tally")
    # A vote whose count has no leader (a tie) decided nothing: no fallback to another reading.
    v = verdict(protocol={"name": "vote", "count": {"leader": None}})
    assert product_answer("vote", v) == (None, "count")


def test_a_question_spends_each_roundtable_once() -> None:
    rec: dict[str, Any] = {
        "runs": {"vote": {"tokens": 100, "cost": 0.5}, "debate": {"tokens": 300, "cost": 1.0}},
        "protocols": {"single:a": {"tokens": 30, "cost": 0.1}, "vote": {"tokens": 100}},
    }
    assert total_tokens(rec) == 400 and total_cost(rec) == 1.5
    rec["runs"]["debate"]["cost"] = None
    assert total_cost(rec) is None


def turn(agent: str, kind: str, tokens: int, cost: float | None = 0.01) -> dict[str, Any]:
    usage = {"input": tokens, "output": 0, "cost": cost}
    return {"agent": agent, "kind": kind, "round": 1, "response": "x" * 40, "usage": usage}


def test_a_roundtable_spends_every_seat_call_and_the_observer() -> None:
    """A protocol's second round (council's rankings) is a seat call too; the observer's call
    is counted apart and in the tokens."""
    turns = [
        turn("a", "turn", 100),
        turn("b", "turn", 100),
        turn("a", "ranking", 50),
        turn("roundtable-observer", "observer", 300),
    ]
    spent = roundtable_spend(turns, "t", ["a", "b"])
    assert (spent["calls"], spent["observerCalls"], spent["tokens"]) == (3, 1, 550)
    assert spent["cost"] == pytest.approx(0.04) and spent["estimated"] is False
    # A model without a price makes the cost unknown; a provider that reports no usage makes the
    # tokens estimated and the cost unknown, never 0.
    assert (
        roundtable_spend([*turns[:3], turn("o", "observer", 5, None)], "t", ["a"])["cost"] is None
    )
    silent = roundtable_spend([turn("a", "turn", 0), turn("b", "turn", 0)], "t", ["a", "b"])
    assert silent["tokens"] > 0 and silent["estimated"] and silent["cost"] is None


def test_the_estimate_counts_each_roundtable_at_its_most() -> None:
    """vote, self-consistency: one round; council: the answers and the rankings; debate and
    adaptive: three rounds; one observer call each."""
    qs = [Q, Q]
    est = estimate(opts(["single", "vote", "debate", "adaptive", "council"]), qs, {}, [])
    assert (est["roundtablesPerQuestion"], est["seatCallsPerQuestion"]) == (4, 3 * (1 + 3 + 3 + 2))
    assert est["observerCallsPerQuestion"] == 4 and est["usd"] is None
    assert estimate(opts(["single"]), qs, {}, [])["seatCallsPerQuestion"] == 3
