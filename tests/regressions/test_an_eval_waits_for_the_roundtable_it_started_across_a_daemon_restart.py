"""Field fault (``roundtabled eval --agents pm,dev,rv --level easy --count 2 --seed 1 --protocols
single,vote,debate``, the daemon restarted while the first question's opening ran): the daemon
persists each roundtable in its own session and the restarted one resumed it, but the eval did not
know that roundtable. The running eval stopped on the lost connection; run again, it started the
question anew — two roundtables for one question, both paid for, and the report's count of
roundtables under the parent missed the first. The eval recorded a question only once it was
finished.

Now the eval records each roundtable's id as soon as it is started (``OUT/roundtables.jsonl``):
a running eval rides out the restart and keeps waiting on the same roundtable, a re-run attaches
to it, and a started roundtable that is gone is said, started again once, and counted in the
report with the new one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roundtabled.core.state import CONCLUDED_SUFFIX
from roundtabled.eval.options import EvalOptions, Target
from roundtabled.eval.run import run_eval
from roundtabled.offline.opencode_server import free_port
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import RecordedRequest, ScriptedLLM
from tests.e2e.conftest import RT
from tests.e2e.eval_helpers import AGENTS, responder, scripted_run, target
from tests.fakes.daemon_proc import DaemonProc, observer_config

FIRST = "easy-1-0"
"""The first question of the run: 'What is the result of 2+8*12?'."""
SLOW_S = 5.0
"""How long each seat takes to start its opening answer to the first question (s): the daemon is
restarted in that time."""


def slow_first_opening(req: RecordedRequest) -> Text | None:
    """:func:`responder`, with the seats' opening turns of the first question slow."""
    reply = responder(req)
    if reply is not None and "2+8*12" in req.last_user_text and "Round 1/" in req.last_user_text:
        return reply.model_copy(update={"first_byte_delay": SLOW_S})
    return reply


def opening_turns(llm: ScriptedLLM) -> list[RecordedRequest]:
    """The seats' opening turns of the first question the model was asked for."""
    return [
        r
        for r in llm.requests
        if r.agent in AGENTS and "2+8*12" in r.last_user_text and "Round 1/" in r.last_user_text
    ]


async def first_opening_in_flight(llm: ScriptedLLM, task: asyncio.Task[int]) -> None:
    """Wait until every seat was asked for its opening answer to the first question."""
    for _ in range(600):
        assert not task.done(), task.result()
        if len(opening_turns(llm)) >= len(AGENTS):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the first question's opening did not start")


def titles(qid: str) -> set[str]:
    """The titles of question ``qid``'s debate roundtable (running, concluded); the single
    seats are read from its independent opening."""
    return {f"eval {qid} debate", f"eval {qid} debate{CONCLUDED_SUFFIX}"}


async def roundtables_of(rt: RT, parent: str, qid: str) -> list[str]:
    """The sessions under ``parent`` titled as the roundtable of question ``qid``."""
    children = await rt.oc("GET", f"/session/{parent}/children")
    return [c["id"] for c in children if c["title"] in titles(qid)]


def options(rt: RT, tmp_path: Path) -> EvalOptions:
    opts = scripted_run(rt, tmp_path, count=2, protocols=["single", "debate"])
    rt.llm.responder = slow_first_opening
    return opts


def report_of(opts: EvalOptions) -> dict[str, Any]:
    return dict(json.loads((opts.out / "report.json").read_text()))


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
async def test_a_running_eval_keeps_waiting_on_its_roundtable_when_the_daemon_restarts(
    stop: str, tmp_path: Path, scripted_llm: ScriptedLLM, opencode_factory: Any
) -> None:
    """The daemon is a process of its own, stopped as ``systemctl --user restart`` does (or
    killed) while the first question's opening runs, and started again on the same address."""
    server = await opencode_factory(observer_config(scripted_llm))
    scripted_llm.responder = slow_first_opening
    daemon = DaemonProc(tmp_path / "daemon", server.url, str(server.project_dir))
    daemon.port, daemon.keep_port = free_port(), True
    opts = EvalOptions(
        agents=AGENTS,
        out=tmp_path / "run",
        level="easy",
        seed=1,
        count=2,
        protocols=["single", "debate"],
        directory=str(server.project_dir),
    )
    async with aiohttp.ClientSession(headers=server.auth_headers) as http:
        await daemon.start(http)
        try:
            run = Target(
                control_url=daemon.url,
                token_file=daemon.root / "config" / "roundtabled" / "token",
                server_url=server.url,
                server_password=server.password,
            )
            task = asyncio.create_task(run_eval(opts, run))
            await first_opening_in_flight(scripted_llm, task)
            if stop == "SIGKILL":
                daemon.proc.kill()
                await daemon.proc.wait()
            else:
                assert await daemon.terminate() == 0
            await daemon.start(http)
            assert await asyncio.wait_for(task, 180) == 0
        finally:
            daemon.kill_all()
        report = report_of(opts)
        parent = report["parentSessionID"]
        assert report["questions"] == {"done": 2, "planned": 2}
        async with http.get(f"{server.url}/session/{parent}/children") as resp:
            children = await resp.json()
    first = [c["id"] for c in children if c["title"] in titles(FIRST)]
    assert len(first) == 1, first
    assert report["records"][0]["runs"]["debate"]["sessionID"] == first[0]
    assert report["parents"] == {parent: 2} and not report["abandoned"]
    assert len(opening_turns(scripted_llm)) == len(AGENTS)  # each seat answered once


async def test_a_rerun_after_a_restart_mid_question_attaches_to_the_roundtable_started(
    rt: RT, tmp_path: Path
) -> None:
    opts = options(rt, tmp_path)
    task = asyncio.create_task(run_eval(opts, target(rt)))
    await first_opening_in_flight(rt.llm, task)
    task.cancel()  # Ctrl-C while the first question's opening runs
    assert await task == 130
    parent = json.loads((opts.out / "run.json").read_text())["parentSessionID"]
    started = await roundtables_of(rt, parent, FIRST)
    assert len(started) == 1
    await rt.restart_daemon()  # it resumes the roundtable from its session
    assert await run_eval(opts, target(rt)) == 0
    report = report_of(opts)
    assert report["questions"] == {"done": 2, "planned": 2}
    assert await roundtables_of(rt, parent, FIRST) == started
    assert report["records"][0]["runs"]["debate"]["sessionID"] == started[0]
    assert report["records"][0]["resumed"] is True
    assert report["parents"] == {parent: 2} and not report["abandoned"]
    assert len(opening_turns(rt.llm)) == len(AGENTS)


async def test_a_rerun_whose_started_roundtable_is_gone_starts_it_again_and_counts_both(
    rt: RT, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = options(rt, tmp_path)
    task = asyncio.create_task(run_eval(opts, target(rt)))
    await first_opening_in_flight(rt.llm, task)
    task.cancel()
    assert await task == 130
    parent = json.loads((opts.out / "run.json").read_text())["parentSessionID"]
    (gone,) = await roundtables_of(rt, parent, FIRST)
    await rt.oc("DELETE", f"/session/{gone}")
    capsys.readouterr()
    assert await run_eval(opts, target(rt)) == 0
    err = capsys.readouterr().err
    assert f"eval: {FIRST}/debate: its roundtable {gone} " in err and "starting it again" in err
    report = report_of(opts)
    assert report["questions"] == {"done": 2, "planned": 2}
    again = report["records"][0]["runs"]["debate"]["sessionID"]
    assert again != gone and await roundtables_of(rt, parent, FIRST) == [again]
    (abandoned,) = report["abandoned"]
    assert (abandoned["id"], abandoned["sessionID"]) == (f"{FIRST}/debate", gone)
    assert report["parents"] == {parent: 3}  # both roundtables of the first question
    md = (opts.out / "report.md").read_text()
    assert f"parent session: {parent} (3 roundtables under it;" in md
    assert f"abandoned roundtable of {FIRST}/debate: {gone}, which " in md
