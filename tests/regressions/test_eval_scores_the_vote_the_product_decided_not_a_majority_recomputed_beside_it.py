"""Fault (``roundtabled eval --protocols vote``): the eval's ``vote`` was a majority it computed
itself from a debate's opening answers, beside the product — not the product's ``vote``
protocol, whose count weighs each answer by its stated confidence (docs/deliberation.md,
"Protocols"). Two seats answering 15 at confidence 2/10 and one answering 14 at 9/10: the eval
said the panel voted 15 (two of three), while the product's vote decides 14 (0.9 of 1.3 of the
weight). The report measured a protocol the product does not run.

Now each protocol is one roundtable started with that ``protocol`` and its answer is read from
the product's own result (``verdict.protocol.count.leader``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from roundtabled.eval.options import EvalOptions
from roundtabled.eval.run import run_eval
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import RecordedRequest
from tests.e2e.conftest import RT
from tests.e2e.eval_helpers import AGENTS, target

ANSWERS = {"pm": (15, 2), "dev": (15, 2), "rv": (14, 9)}
"""Each seat's answer to ``2+3*4`` (14) and its confidence (tenths)."""


def reply(req: RecordedRequest) -> Text | None:
    if req.agent not in AGENTS or not re.search(r"What is the result of", req.last_user_text):
        return None
    answer, confidence = ANSWERS[req.agent]
    return Text(text=f"I worked it out.\n\nPosition: {answer} — mine (confidence {confidence}/10)")


async def test_eval_scores_the_vote_the_product_decided(rt: RT, tmp_path: Path) -> None:
    rt.llm.responder = reply
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        json.dumps({"id": "q", "question": "What is the result of 2+3*4?", "answer": 14})
    )
    opts = EvalOptions(agents=AGENTS, out=tmp_path / "run", tasks=str(tasks), protocols=["vote"])
    assert await run_eval(opts, target(rt)) == 0
    report = json.loads((opts.out / "report.json").read_text())
    (vote,) = report["protocols"]
    assert (vote["name"], vote["correct"], vote["n"]) == ("vote", 1, 1)
    (record,) = report["records"]
    assert record["runs"]["vote"]["protocol"] == "vote"  # the product ran its vote
    assert record["protocols"]["vote"]["label"] == "14"
