"""``roundtabled eval`` through the real OpenCode server and the daemon, with scripted seats whose
answers are known in advance (seeded per seat, question and round): the report's accuracy, flips
and McNemar counts must equal the values this test computes on its own."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roundtabled.core.scoring import (
    Question,
    arithmetic_questions,
    evaluate_expression,
    parse_task_lines,
)
from roundtabled.eval.ledger import read_records
from roundtabled.eval.options import EvalOptions
from roundtabled.eval.run import run_eval
from roundtabled.offline.panel import panel_reply
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import RecordedRequest, default_text

from . import cli_helpers
from .conftest import RT
from .eval_helpers import (
    AGENTS,
    confidence,
    interrupt_after,
    planned_answer,
    responder,
    scripted_run,
    target,
)


def vote(answers: list[tuple[int, int]]) -> int:
    """Majority; ties by the summed confidence, then by seat order (written apart from the
    product's rule)."""
    counts = Counter(a for a, _ in answers)
    top = max(counts.values())
    tied = [a for a in counts if counts[a] == top]
    conf = {a: sum(c for x, c in answers if x == a) for a in tied}
    best = max(conf.values())
    tied = [a for a in tied if conf[a] == best]
    return next(a for a, _ in answers if a in tied)


def expected(questions: list[Question]) -> dict[str, Any]:
    """Per question: the right-or-wrong of each protocol, and the flips, computed from the plan."""
    out: dict[str, Any] = {"ok": {}, "flips": {}}
    for q in questions:
        expr = q.question.removeprefix("What is the result of ").removesuffix("?")
        gold = evaluate_expression(expr)
        plan = {
            a: [(planned_answer(a, expr, r), confidence(a, expr, r)) for r in (1, 2, 3, 4)]
            for a in AGENTS
        }
        ok = {f"single:{a}": plan[a][0][0] == gold for a in AGENTS}
        ok["vote"] = vote([plan[a][0] for a in AGENTS]) == gold
        ok["debate"] = vote([plan[a][2] for a in AGENTS]) == gold
        stop = 3
        if all(plan[a][2][0] == plan[a][1][0] for a in AGENTS):
            stop = 2
        ok["adaptive"] = vote([plan[a][stop] for a in AGENTS]) == gold
        out["ok"][q.id] = ok
        for name, final in (("debate", 2), ("adaptive", stop)):
            f = out["flips"].setdefault(name, [0, 0])
            for a in AGENTS:
                first, last = plan[a][0][0] == gold, plan[a][final][0] == gold
                f[0] += (not first) and last
                f[1] += first and not last
    return out


@pytest.mark.timeout(900)  # 40 questions, about 550 model calls: ~1 min alone, more under load
async def test_report_matches_independently_computed_accuracy_flips_and_mcnemar(
    rt: RT, tmp_path: Path
) -> None:
    rt.llm.responder = responder
    out = tmp_path / "run"
    opts = EvalOptions(agents=AGENTS, out=out, level="medium", count=40, seed=7, concurrency=8)
    assert await run_eval(opts, target(rt)) == 0
    report = json.loads((out / "report.json").read_text())
    questions = arithmetic_questions("medium", 40, 7)
    exp = expected(questions)
    assert report["questions"] == {"done": 40, "planned": 40}
    assert not report["partial"]
    by_name = {p["name"]: p for p in report["protocols"]}
    assert list(by_name) == [*(f"single:{a}" for a in AGENTS), "vote", "debate", "adaptive"]
    for name, line in by_name.items():
        right = sum(exp["ok"][q.id][name] for q in questions)
        assert (line["correct"], line["n"]) == (right, 40), name
    single_right = {a: sum(exp["ok"][q.id][f"single:{a}"] for q in questions) for a in AGENTS}
    best = f"single:{max(AGENTS, key=lambda a: (single_right[a], -AGENTS.index(a)))}"
    assert report["bestSingle"] == best
    for name in ("vote", "debate", "adaptive"):
        only_a = sum(exp["ok"][q.id][name] and not exp["ok"][q.id][best] for q in questions)
        only_b = sum(exp["ok"][q.id][best] and not exp["ok"][q.id][name] for q in questions)
        vs = by_name[name]["vs_best_single"]
        assert (vs["only_a"], vs["only_b"]) == (only_a, only_b), name
    for name in ("debate", "adaptive"):
        only_a = sum(exp["ok"][q.id][name] and not exp["ok"][q.id]["vote"] for q in questions)
        only_b = sum(exp["ok"][q.id]["vote"] and not exp["ok"][q.id][name] for q in questions)
        vs = by_name[name]["vs_vote"]
        assert (vs["only_a"], vs["only_b"]) == (only_a, only_b), name
        fl = by_name[name]["flips"]
        assert [fl["wrong_to_right"], fl["right_to_wrong"]] == exp["flips"][name], name
    # The scripted server reports usage, so tokens are measured, not estimated; the sessions are
    # listed under one parent session of the run.
    assert report["tokensEstimated"] is False
    assert by_name["debate"]["tokens_per_question"] > by_name["vote"]["tokens_per_question"]
    kids = {c["id"] for c in await rt.oc("GET", f"/session/{report['parentSessionID']}/children")}
    assert set(report["sessions"]) <= kids and len(report["sessions"]) == 40
    md = (out / "report.md").read_text()
    assert f"| vote | {by_name['vote']['correct']}/40" in md


async def test_an_interrupted_run_leaves_a_partial_report_and_resumes(
    rt: RT, tmp_path: Path
) -> None:
    opts = scripted_run(rt, tmp_path, count=6, protocols=["single", "vote"])
    out = opts.out
    await interrupt_after(opts, rt, 2)
    results = out / "results.jsonl"
    partial = json.loads((out / "report.json").read_text())
    assert partial["partial"] and partial["interrupted"]
    first = {r["id"] for r in read_records(results)}
    assert 2 <= len(first) < 6
    assert "Partial report" in (out / "report.md").read_text()
    assert await run_eval(opts, target(rt)) == 0
    records = read_records(results)
    assert sorted(r["id"] for r in records) == sorted(
        q.id for q in arithmetic_questions("easy", 6, 1)
    )
    final = json.loads((out / "report.json").read_text())
    assert not final["partial"] and final["questions"]["done"] == 6
    assert final["parentSessionID"] == partial["parentSessionID"]


async def test_a_jsonl_set_with_choices(rt: RT, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows = [
        {"id": "q1", "question": "Which is a prime?", "answer": "B", "choices": ["4", "7", "9"]},
        {
            "id": "q2",
            "question": "Capital of France?",
            "answer": "Paris",
            "choices": ["Rome", "Paris"],
        },
        {"id": 3, "question": "2+2?", "answer": 4},
    ]
    tasks.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    replies = {
        "Which is a prime?": {"pm": "B", "dev": "(b) 7", "rv": "A"},
        "Capital of France?": {"pm": "Paris", "dev": "B", "rv": "Rome"},
        "2+2?": {"pm": "4.0", "dev": "5", "rv": "four"},
    }

    def answer(req: RecordedRequest) -> Text | None:
        if req.agent not in AGENTS:
            return None
        for question, by_agent in replies.items():
            if question in req.last_user_text:
                return Text(text=f"Position: {by_agent[req.agent]} — mine (confidence 5/10)")
        return None

    rt.llm.responder = answer
    out = tmp_path / "run"
    opts = EvalOptions(
        agents=AGENTS, out=out, tasks=str(tasks), protocols=["single", "vote"], concurrency=3
    )
    assert await run_eval(opts, target(rt)) == 0
    report = json.loads((out / "report.json").read_text())
    by_name = {p["name"]: p for p in report["protocols"]}
    # pm: B, Paris, 4.0 (= 4) → 3 of 3; dev: "(b) 7" is B, "B" is Paris, 5 → 2; rv: 0.
    assert [by_name[f"single:{a}"]["correct"] for a in AGENTS] == [3, 2, 0]
    assert by_name["vote"]["correct"] == 3
    # The choices reached the seats as lettered lines.
    turns = [
        r for r in rt.llm.requests if r.agent == "pm" and "Which is a prime?" in r.last_user_text
    ]
    assert turns and "B. 7" in turns[0].last_user_text


async def test_base_url_and_model_write_the_provider_configuration_for_the_run(
    rt: RT, tmp_path: Path
) -> None:
    """``--base-url URL --model NAME``: the run's project gets an openai-compatible provider and
    three seats on it; every model request of the run goes to that server under NAME (the
    scripted model stands in for a local llama.cpp / Ollama server)."""

    def right(req: RecordedRequest) -> Text | None:
        exprs = re.findall(r"What is the result of ([0-9+*-]+)\?", json.dumps(req.messages))
        if req.model != "my-local" or not exprs:
            return None
        return Text(text=f"Position: {evaluate_expression(exprs[0])} — sure (confidence 9/10)")

    rt.llm.responder = right
    out = tmp_path / "run"
    opts = EvalOptions(
        agents=["seat-a", "seat-b", "seat-c"],
        out=out,
        level="easy",
        count=2,
        protocols=["single", "vote"],
        base_url=rt.llm.base_url,
        model="my-local",
    )
    assert await run_eval(opts, target(rt)) == 0
    config = json.loads((out / "project" / "opencode.json").read_text())
    assert config["provider"]["local"]["options"]["baseURL"] == rt.llm.base_url
    assert (out / "project" / ".opencode").is_dir()  # the observer agent for this project
    report = json.loads((out / "report.json").read_text())
    by_name = {p["name"]: p for p in report["protocols"]}
    assert by_name["vote"]["correct"] == 2 and by_name["single:seat-b"]["correct"] == 2
    assert set(report["models"].values()) == {"local/my-local"}
    run_requests = [r for r in rt.llm.requests if "What is the result" in json.dumps(r.messages)]
    assert run_requests and {r.model for r in run_requests} == {"my-local"}


async def test_self_consistency_asks_one_seat_as_often_as_debate_calls_seats(
    rt: RT, tmp_path: Path
) -> None:
    """``sc``: the seat is asked alone seats × 3 times, each in a child session of the run's
    parent; the answer is the majority of those samples."""
    samples: dict[str, int] = {}

    def sc_answer(req: RecordedRequest) -> Text | None:
        if req.agent != "dev" or "Round " in req.last_user_text:
            return responder(req)
        exprs = re.findall(r"What is the result of ([0-9+*-]+)\?", req.last_user_text)
        n = samples[exprs[0]] = samples.get(exprs[0], 0) + 1
        gold = evaluate_expression(exprs[0])
        # 5 of 9 samples right: the majority is right.
        ans = gold if n <= 5 else gold + n
        return Text(text=f"{default_text('dev', exprs[0], n)}\nPosition: {ans} — x")

    rt.llm.responder = sc_answer
    out = tmp_path / "run"
    opts = EvalOptions(
        agents=AGENTS, out=out, level="easy", count=2, protocols=["vote", "sc"], sc_seat="dev"
    )
    assert await run_eval(opts, target(rt)) == 0
    report = json.loads((out / "report.json").read_text())
    sc = next(p for p in report["protocols"] if p["name"] == "sc")
    assert (sc["correct"], sc["calls_per_question"]) == (2, 9)
    assert sorted(samples.values()) == [9, 9]
    kids = await rt.oc("GET", f"/session/{report['parentSessionID']}/children")
    assert len(kids) == 2 + 2 * 9  # two roundtables and 18 samples under the run's parent


async def test_a_spend_cap_stops_before_the_next_question_and_says_so(
    rt: RT, tmp_path: Path
) -> None:
    """Also ``--cleanup``: the run's parent session (and the roundtables under it) is deleted
    after the report."""
    rt.llm.responder = responder
    out = tmp_path / "run"
    opts = EvalOptions(
        agents=AGENTS,
        out=out,
        level="easy",
        count=3,
        protocols=["single", "vote"],
        max_tokens=1,
        cleanup=True,
    )
    assert await run_eval(opts, target(rt)) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["questions"] == {"done": 1, "planned": 3}
    assert report["partial"] and "--max-tokens 1" in report["stopped"]
    assert "--max-tokens 1" in (out / "report.md").read_text()
    with pytest.raises(aiohttp.ClientResponseError) as gone:
        await rt.oc("GET", f"/session/{report['sessions'][0]}")
    assert gone.value.status == 404


async def test_the_code_reading_set_runs_through_the_cli_and_is_scored(
    rt: RT, tmp_path: Path
) -> None:
    """``roundtabled eval --tasks code --limit 2`` on the offline model (docs/eval.md, "Code
    reading"): its seats may answer a program wrongly, but every turn is read and scored, and
    the set the run generated is written beside the report as a ``--tasks FILE`` set."""
    rt.llm.responder = panel_reply
    out = tmp_path / "run"
    run = await cli_helpers.cli(
        rt,
        "eval", "--tasks", "code", "--limit", "2", "--agents", ",".join(AGENTS),
        "--protocols", "single,vote", "--out", str(out),
        timeout=300,
    )  # fmt: skip
    assert run.code == 0, run
    report = json.loads((out / "report.json").read_text())
    assert report["questions"] == {"done": 2, "planned": 2}
    assert report["task"]["tasks"] == "code" and report["task"]["level"] is None
    by_name = {p["name"]: p for p in report["protocols"]}
    assert set(by_name) == {*(f"single:{a}" for a in AGENTS), "vote"}
    assert all(p["n"] == 2 for p in by_name.values())
    written = parse_task_lines((out / "questions.jsonl").read_text().splitlines())
    assert [q.id for q in written] == ["code-0-0", "code-0-1"]
    for rec, q in zip(report["records"], written, strict=True):
        assert rec["gold"] == q.answer and "```python" in rec["question"]
        for p in rec["protocols"].values():
            assert p["correct"] == (p["answer"] is not None and p["answer"] == q.answer)
    asked = [r for r in rt.llm.requests if r.agent == AGENTS[0] and "```python" in r.last_user_text]
    assert asked and "What does this Python program print?" in asked[0].last_user_text
