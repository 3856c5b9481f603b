"""A Ctrl-C of ``roundtabled eval`` while a question's debate ran said only "the report is
partial"; the debate it had started kept running in the daemon, and the user had to find it
with ``list`` to cancel it (a new user's report). The line now names the roundtables that keep
running, how to attach to them again and how to stop one.

Input: one easy arithmetic question (seed 1), protocols single, vote, debate; the seats' debate
opening answers only after 3 s; Ctrl-C once a seat is asked for its debate opening."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from roundtabled.eval.ledger import read_records
from roundtabled.eval.options import EvalOptions
from roundtabled.eval.run import run_eval
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import RecordedRequest
from tests.e2e.conftest import RT
from tests.e2e.eval_helpers import AGENTS, responder, target


async def test_an_interrupted_eval_names_the_roundtables_that_keep_running(
    rt: RT, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "interrupted; the report is partial" in x)
    assert "Roundtables of questions not recorded yet: ses_" in line, line
    assert "keeps running in the daemon" in line and "roundtabled cancel SESSION" in line, line
