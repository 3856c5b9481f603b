"""``roundtabled eval`` through the real OpenCode server and the daemon, with scripted seats whose
answers are known in advance (seeded per seat, question and round): the report's accuracy, flips
and McNemar counts must equal the values this test computes on its own."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roundtabled.cli.client import CliError
from roundtabled.core.scoring import (
    Question,
    arithmetic_questions,
    evaluate_expression,
    parse_task_lines,
)
from roundtabled.core.state import CONCLUDED_SUFFIX
from roundtabled.eval.ledger import read_records
from roundtabled.eval.options import EvalOptions
from roundtabled.eval.run import run_eval
from roundtabled.offline.opencode_server import free_port
from roundtabled.offline.panel import panel_reply
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import RecordedRequest, ScriptedLLM

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


def leader(answers: list[tuple[int, int]]) -> int | None:
    """The stance with the most summed confidence (tenths, so sums compare exactly); a tie is
    no decision (written apart from the product's rule, docs/result.md "tally")."""
    weight: Counter[int] = Counter()
    for a, c in answers:
        weight[a] += c
    top = max(weight.values())
    tied = [a for a, w in weight.items() if w == top]
    return tied[0] if len(tied) == 1 else None


def expected(questions: list[Question]) -> dict[str, Any]:
    """Per question: the right-or-wrong of each protocol, and the flips, computed from the plan
    (the product's protocols as docs/eval.md says they are read)."""
    out: dict[str, Any] = {"ok": {}, "flips": {}}
    for q in questions:
        expr = q.question.removeprefix("What is the result of ").removesuffix("?")
        gold = evaluate_expression(expr)
        plan = {
            a: [(planned_answer(a, expr, r), confidence(a, expr, r)) for r in (1, 2, 3)]
            for a in AGENTS
        }
        ok = {f"single:{a}": plan[a][0][0] == gold for a in AGENTS}
        opening = [plan[a][0] for a in AGENTS]
        ok["vote"] = leader(opening) == gold
        # council: the chair's decision; the scripted observer writes no verdict, so the result
        # takes the decision from the ledger: the label most seats hold when more than half do.
        held = Counter(x for x, _ in opening).most_common(1)[0]
        ok["council"] = held[1] * 2 > len(AGENTS) and held[0] == gold
        ok["debate"] = leader([plan[a][2] for a in AGENTS]) == gold
        # adaptive: stops at the opening when its leader holds 0.67 of the confidence (the
        # product's default threshold); else debates until a round in which no seat changed
        # its answer, at most 3 rounds.
        top = leader(opening)
        share = sum(c for x, c in opening if x == top) / sum(c for _, c in opening)
        final: int | None = None
        if top is None or share < 0.67:
            final = 1 if all(plan[a][1][0] == plan[a][0][0] for a in AGENTS) else 2
        ok["adaptive"] = (
            top if final is None else leader([plan[a][final] for a in AGENTS])
        ) == gold
        out["ok"][q.id] = ok
        out.setdefault("debated", {})[q.id] = final is not None
        for name, last_round in (("debate", 2), ("adaptive", final)):
            f = out["flips"].setdefault(name, [0, 0])
            if last_round is None:
                continue
            for a in AGENTS:
                first, last = plan[a][0][0] == gold, plan[a][last_round][0] == gold
                f[0] += (not first) and last
                f[1] += first and not last
    return out


@pytest.mark.timeout(600)  # 12 questions, 4 roundtables each: ~1.5 min alone, more under load
async def test_report_matches_independently_computed_accuracy_flips_and_mcnemar(
    rt: RT, tmp_path: Path
) -> None:
    """Each protocol is one roundtable the daemon ran with that protocol, its answer the one the
    product reports (vote's count, adaptive's count or final tally, debate's final tally, the
    council's decision); the single seats are the vote's independent answers."""
    rt.llm.responder = responder
    out = tmp_path / "run"
    names = ["vote", "debate", "adaptive", "council"]
    opts = EvalOptions(
        agents=AGENTS,
        out=out,
        level="medium",
        count=12,
        seed=7,
        concurrency=4,
        protocols=["single", *names],
    )
    assert await run_eval(opts, target(rt)) == 0
    report = json.loads((out / "report.json").read_text())
    questions = arithmetic_questions("medium", 12, 7)
    exp = expected(questions)
    assert report["questions"] == {"done": 12, "planned": 12}
    assert not report["partial"] and report["singlesFrom"] == "vote"
    by_name = {p["name"]: p for p in report["protocols"]}
    assert list(by_name) == [*(f"single:{a}" for a in AGENTS), *names]
    for name, line in by_name.items():
        right = sum(exp["ok"][q.id][name] for q in questions)
        assert (line["correct"], line["n"]) == (right, 12), name
    single_right = {a: sum(exp["ok"][q.id][f"single:{a}"] for q in questions) for a in AGENTS}
    best = f"single:{max(AGENTS, key=lambda a: (single_right[a], -AGENTS.index(a)))}"
    assert report["bestSingle"] == best
    for name in names:
        for other, key in ((best, "vs_best_single"), ("vote", "vs_vote")):
            if name == other:
                continue
            only_a = sum(exp["ok"][q.id][name] and not exp["ok"][q.id][other] for q in questions)
            only_b = sum(exp["ok"][q.id][other] and not exp["ok"][q.id][name] for q in questions)
            vs = by_name[name][key]
            assert (vs["only_a"], vs["only_b"]) == (only_a, only_b), (name, other)
    for name in ("debate", "adaptive"):
        fl = by_name[name]["flips"]
        if name == "adaptive" and not any(exp["debated"].values()):
            assert fl is None
            continue
        assert [fl["wrong_to_right"], fl["right_to_wrong"]] == exp["flips"][name], name
    assert by_name["vote"]["flips"] is None  # one round: nothing deliberated
    assert by_name["council"]["flips"] is None  # the rankings change no answer
    # One roundtable per protocol and question, started with the protocol and read from the
    # product's own result.
    for rec in report["records"]:
        assert list(rec["runs"]) == names
        assert [rec["runs"][n]["protocol"] for n in names] == names
        assert rec["protocols"]["vote"]["readFrom"] == "count"
        assert rec["protocols"]["council"]["readFrom"] == "decision"
        assert rec["runs"]["debate"]["rounds"] == 3 and rec["runs"]["vote"]["rounds"] == 1
        debated = exp["debated"][rec["id"]]
        assert rec["protocols"]["adaptive"]["readFrom"] == ("tally" if debated else "count")
    # The scripted server reports usage, so tokens are measured, not estimated; the sessions are
    # listed under one parent session of the run.
    assert report["tokensEstimated"] is False
    assert by_name["debate"]["tokens_per_question"] > by_name["vote"]["tokens_per_question"]
    assert by_name["vote"]["tokens_per_question"] > by_name[best]["tokens_per_question"]
    assert by_name["debate"]["extra"]["observerCallsPerQuestion"] >= 1
    kids = {c["id"] for c in await rt.oc("GET", f"/session/{report['parentSessionID']}/children")}
    assert set(report["sessions"]) <= kids and len(report["sessions"]) == 4 * 12
    md = (out / "report.md").read_text()
    assert f"| vote | {by_name['vote']['correct']}/12" in md


async def test_an_interrupted_run_leaves_a_partial_report_and_resumes(
    rt: RT, tmp_path: Path
) -> None:
    opts = scripted_run(rt, tmp_path, count=6, protocols=["single"])
    out = opts.out
    await interrupt_after(opts, rt, 2)
    results = out / "results.jsonl"
    partial = json.loads((out / "report.json").read_text())
    assert partial["partial"] and partial["interrupted"]
    first = {r["id"] for r in read_records(results)}
    assert 2 <= len(first) < 6
    assert "Partial report" in (out / "report.md").read_text()
    # Every roundtable the stopped run started is counted under its parent (for --cleanup),
    # also one whose question was not recorded yet.
    started = (out / "roundtables.jsonl").read_text().splitlines()
    assert partial["parents"] == {partial["parentSessionID"]: len(started)}
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
        "Which is a prime?": {"pm": "B", "dev": "B", "rv": "A"},
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
    # pm: B, Paris, 4.0 (= 4) → 3 of 3; dev: B, "B" is Paris, 5 → 2; rv: 0.
    assert [by_name[f"single:{a}"]["correct"] for a in AGENTS] == [3, 2, 0]
    # The vote is the product's count of stances, which are the seats' labels: q1 "B" (pm, dev)
    # over "A"; q2 "Paris", "B" and "Rome" are three stances of equal weight (the product does
    # not read "B" as Paris), q3 "4.0", "5", "four" too: ties, no decision.
    assert by_name["vote"]["correct"] == 1
    assert [r["protocols"]["vote"]["label"] for r in report["records"]] == ["B", None, None]
    md = (out / "report.md").read_text()
    assert "- vote: the product decided nothing (a tie, or no stance stated) in 2 of 3" in md
    # The choices reached the seats as lettered lines.
    turns = [
        r for r in rt.llm.requests if r.agent == "pm" and "Which is a prime?" in r.last_user_text
    ]
    assert turns and "B. 7" in turns[0].last_user_text


async def test_base_url_and_model_write_the_provider_configuration_for_the_run(
    rt: RT, tmp_path: Path
) -> None:
    """``--base-url URL --model NAME``: the run's project gets an openai-compatible provider and
    three seats on it, and for ``self-consistency`` three copies of the sampled seat; every
    model request of the run goes to that server under NAME (the scripted model stands in for a
    local llama.cpp / Ollama server). Self-consistency is the product's vote of the copies:
    two of three samples right make it right."""

    def reply(req: RecordedRequest) -> Text | None:
        exprs = re.findall(r"What is the result of ([0-9+*-]+)\?", json.dumps(req.messages))
        # The seats share one prompt, so the seat is the one the turn prompt names.
        seat = re.findall(r"Current agent: (\S+)", req.last_user_text)
        if req.model != "my-local" or not exprs or not seat:
            return None
        gold = evaluate_expression(exprs[0])
        ans = gold + 1 if seat[-1] == "seat-b-sample3" else gold
        return Text(text=f"Position: {ans} — sure (confidence 9/10)")

    rt.llm.responder = reply
    out = tmp_path / "run"
    opts = EvalOptions(
        agents=["seat-a", "seat-b", "seat-c"],
        out=out,
        level="easy",
        count=2,
        protocols=["single", "self-consistency"],
        sc_seat="seat-b",
        base_urls=[rt.llm.base_url],
        models=["my-local"],
    )
    assert await run_eval(opts, target(rt)) == 0
    config = json.loads((out / "project" / "opencode.json").read_text())
    assert config["provider"]["local"]["options"]["baseURL"] == rt.llm.base_url
    samples = ["seat-b-sample1", "seat-b-sample2", "seat-b-sample3"]
    for name in samples:
        copy, seat = config["agent"][name], config["agent"]["seat-b"]
        assert (copy["prompt"], copy["model"]) == (seat["prompt"], seat["model"])
    assert (out / "project" / ".opencode").is_dir()  # the observer agent for this project
    report = json.loads((out / "report.json").read_text())
    by_name = {p["name"]: p for p in report["protocols"]}
    assert by_name["single:seat-b"]["correct"] == 2
    sc = by_name["self-consistency"]
    assert (sc["correct"], sc["n"], sc["calls_per_question"]) == (2, 2, 3)
    assert set(report["models"].values()) == {"local/my-local"}
    run_requests = [r for r in rt.llm.requests if "What is the result" in json.dumps(r.messages)]
    assert run_requests and {r.model for r in run_requests} == {"my-local"}
    seats = [re.findall(r"Current agent: (\S+)", r.last_user_text) for r in run_requests]
    asked = Counter(s[-1] for s in seats if s and s[-1] in samples)
    assert asked == dict.fromkeys(samples, 2)
    assert {r["runs"]["self-consistency"]["protocol"] for r in report["records"]} == {"vote"}
    kids = await rt.oc("GET", f"/session/{report['parentSessionID']}/children")
    assert len(kids) == 2 * 2  # per question: the single round and the samples' roundtable


def mixed_vote(out: Path, first: str, second: str) -> EvalOptions:
    """One question's ``vote`` on a mixed panel: ``m-one`` at ``first``, ``m-two`` at
    ``second``."""
    return EvalOptions(
        agents=["seat-a", "seat-b", "seat-c"],
        out=out,
        level="easy",
        count=1,
        protocols=["vote"],
        base_urls=[first, second],
        models=["m-one", "m-two"],
    )


async def test_a_mixed_panel_runs_each_seat_on_its_own_model_and_server(
    rt: RT, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--base-url A,B --model m-one,m-two`` (two scripted servers stand in for two llama.cpp
    servers): seats 1 and 3 on the first model at A, seat 2 on the second at B, the observer on
    the first; the requests each server recorded carry those models, and the printed line and
    the report name them."""

    def reply(req: RecordedRequest) -> Text | None:
        exprs = re.findall(r"What is the result of ([0-9+*-]+)\?", json.dumps(req.messages))
        seat = re.findall(r"Current agent: (\S+)", req.last_user_text)
        if not exprs or not seat:
            return None
        return Text(text=f"Position: {evaluate_expression(exprs[0])} — sure (confidence 9/10)")

    second = ScriptedLLM()
    await second.start()
    try:
        rt.llm.responder = second.responder = reply
        out = tmp_path / "run"
        assert await run_eval(mixed_vote(out, rt.llm.base_url, second.base_url), target(rt)) == 0
    finally:
        await second.stop()
    config = json.loads((out / "project" / "opencode.json").read_text())
    urls = {k: v["options"]["baseURL"] for k, v in config["provider"].items()}
    assert urls == {"local": rt.llm.base_url, "local-2": second.base_url}
    assert f"seat-a, seat-c on local/m-one at {rt.llm.base_url}; seat-b on local-2/m-two at " in (
        capsys.readouterr().err
    )

    def seats_and_models(llm: ScriptedLLM) -> set[tuple[str, str | None]]:
        asked = [r for r in llm.requests if "What is the result" in json.dumps(r.messages)]
        seats = [(re.findall(r"Current agent: (\S+)", r.last_user_text), r) for r in asked]
        return {(s[-1], r.model) for s, r in seats if s and r.agent != "roundtable-observer"}

    assert seats_and_models(rt.llm) == {("seat-a", "m-one"), ("seat-c", "m-one")}
    assert seats_and_models(second) == {("seat-b", "m-two")}
    observer = rt.llm.requests_for(agent="roundtable-observer")
    assert observer and {r.model for r in observer} == {"m-one"}
    assert not second.requests_for(agent="roundtable-observer")
    report = json.loads((out / "report.json").read_text())
    assert report["models"] == {
        "seat-a": "local/m-one",
        "seat-b": "local-2/m-two",
        "seat-c": "local/m-one",
        "roundtable-observer": "local/m-one",
    }
    assert report["protocols"][0]["correct"] == 1


async def test_a_model_server_nobody_runs_is_one_line_before_anything_starts(
    rt: RT, tmp_path: Path
) -> None:
    """A mixed panel whose second model server is not running (nothing listens at its URL):
    the run says so in one line naming ``--base-url`` and that URL, exit 1, before it writes a
    run or starts a roundtable (each seat-b turn would fail otherwise)."""
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    out = tmp_path / "run"
    with pytest.raises(CliError) as caught:
        await run_eval(mixed_vote(out, rt.llm.base_url, nobody), target(rt))
    assert caught.value.code == 1
    message = str(caught.value)
    assert message.startswith(f"Error: --base-url {nobody}: no OpenAI-compatible server answers")
    assert "\n" not in message
    assert not (out / "run.json").exists() and not (out / "project").exists()
    assert not rt.llm.requests


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
        protocols=["single"],
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
        "--protocols", "single", "--out", str(out),
        timeout=300,
    )  # fmt: skip
    assert run.code == 0, run
    report = json.loads((out / "report.json").read_text())
    assert report["questions"] == {"done": 2, "planned": 2}
    assert report["task"]["tasks"] == "code" and report["task"]["level"] == "medium"
    by_name = {p["name"]: p for p in report["protocols"]}
    assert set(by_name) == {f"single:{a}" for a in AGENTS}
    assert all(p["n"] == 2 for p in by_name.values())
    written = parse_task_lines((out / "questions.jsonl").read_text().splitlines())
    assert [q.id for q in written] == ["code-0-0", "code-0-1"]
    for rec, q in zip(report["records"], written, strict=True):
        assert rec["gold"] == q.answer and "```python" in rec["question"]
        for p in rec["protocols"].values():
            assert p["correct"] == (p["answer"] is not None and p["answer"] == q.answer)
    asked = [r for r in rt.llm.requests if r.agent == AGENTS[0] and "```python" in r.last_user_text]
    assert asked and "What does this Python program print?" in asked[0].last_user_text


async def test_a_resumed_question_reruns_none_of_its_finished_protocols(
    rt: RT, tmp_path: Path
) -> None:
    """Stopped while a question's debate runs (its vote finished), the same run again attaches
    to that debate and reads the vote back: one roundtable per protocol, each paid once."""

    def slow_debate(req: RecordedRequest) -> Text | None:
        reply = responder(req)
        if reply is not None and "Round 1/3" in req.last_user_text:
            return reply.model_copy(update={"first_byte_delay": 3.0})
        return reply

    rt.llm.responder = slow_debate
    opts = EvalOptions(
        agents=AGENTS, out=tmp_path / "run", level="easy", seed=1, count=1,
        protocols=["single", "vote", "debate"],
    )  # fmt: skip
    task = asyncio.create_task(run_eval(opts, target(rt)))
    for _ in range(1200):  # until a seat is asked for its debate opening (the vote is done)
        assert not task.done(), task.result()
        if any("Round 1/3" in r.last_user_text for r in rt.llm.requests if r.agent in AGENTS):
            break
        await asyncio.sleep(0.05)
    task.cancel()  # Ctrl-C while the debate's opening runs
    assert await task == 130
    assert not read_records(opts.out / "results.jsonl")
    assert await run_eval(opts, target(rt)) == 0
    report = json.loads((opts.out / "report.json").read_text())
    (record,) = report["records"]
    assert record["resumed"] and record["runs"]["vote"]["resumed"]
    kids = await rt.oc("GET", f"/session/{report['parentSessionID']}/children")
    titles = Counter(str(k["title"]).removesuffix(CONCLUDED_SUFFIX) for k in kids)
    assert titles == {"eval easy-1-0 vote": 1, "eval easy-1-0 debate": 1}, titles
    openings = [r for r in rt.llm.requests if r.agent in AGENTS and "Round 1/1" in r.last_user_text]
    assert len(openings) == len(AGENTS)  # the vote ran once
