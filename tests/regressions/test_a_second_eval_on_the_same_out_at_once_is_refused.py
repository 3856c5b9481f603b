"""``roundtabled eval --agents pm,dev,rv --level easy --count 2 --seed 1 --protocols single,vote
--out run`` typed a second time while the first still ran (a second terminal): both runs drove
the same run directory. Once a run attaches to the roundtables it started, the second would
attach to the first one's roundtable and append its own record of the question — two callers
deciding for one roundtable. Now the second run is refused, naming ``--out`` and the process that
holds it, before it starts or records anything."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from roundtabled.cli.client import EXIT_ERROR, CliError
from roundtabled.eval.run import run_eval
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import RecordedRequest
from tests.e2e.conftest import RT
from tests.e2e.eval_helpers import AGENTS, responder, scripted_run, target


def slow(req: RecordedRequest) -> Text | None:
    """:func:`responder`, each seat taking 3 s to start: the first run is still running."""
    reply = responder(req)
    return reply.model_copy(update={"first_byte_delay": 3.0}) if reply is not None else None


async def test_a_second_eval_on_the_same_out_at_once_is_refused(rt: RT, tmp_path: Path) -> None:
    opts = scripted_run(rt, tmp_path, count=2, protocols=["single"])
    rt.llm.responder = slow
    first = asyncio.create_task(run_eval(opts, target(rt)))
    await rt.llm.wait_for_requests(1, 60, agent=AGENTS[0])
    with pytest.raises(CliError) as refused:
        await run_eval(opts, target(rt))
    assert refused.value.code == EXIT_ERROR
    assert str(refused.value).startswith(f"Error: --out {opts.out} is in use by another")
    first.cancel()
    assert await first == 130
    parent = json.loads((opts.out / "run.json").read_text())["parentSessionID"]
    kids = await rt.oc("GET", f"/session/{parent}/children")
    assert [k["title"] for k in kids] == ["eval easy-1-0 single"]  # the second run started nothing
