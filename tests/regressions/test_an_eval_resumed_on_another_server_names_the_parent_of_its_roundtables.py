"""Field fault (``python -m bench.eval_local … --out bench/results/eval-easy-qlast``, run a
second time after the 12-question run had finished, to redraw its report): the bench starts a
private OpenCode server for each run, so the run's recorded parent session
(``ses_db72b2f2dffeBWGpGO2etKDE3z``) was not on the new server. With nothing left to run the
resume still created a new parent (``ses_db7155d6dffet0iohVQTWMV3b6``), wrote it into
``run.json`` in place of the old one, and the report said "parent session:
ses_db7155d6dffet0iohVQTWMV3b6 (12 roundtables under it)" — none were. Now a resume with nothing
to run creates no session, and one that must create a new parent keeps the old one in the report
with the roundtables that are under it."""

from __future__ import annotations

import json
from pathlib import Path

from roundtabled.eval.run import run_eval
from tests.e2e.conftest import RT
from tests.e2e.eval_helpers import scripted_run, target


async def test_a_resume_with_nothing_to_run_keeps_the_parent_and_creates_no_session(
    rt: RT, tmp_path: Path
) -> None:
    opts = scripted_run(rt, tmp_path, count=2, protocols=["single"])
    out = opts.out
    assert await run_eval(opts, target(rt)) == 0
    first = json.loads((out / "report.json").read_text())["parentSessionID"]
    await rt.oc("DELETE", f"/session/{first}")  # the recorded parent is not on this server
    before = {s["id"] for s in await rt.oc("GET", "/session")}
    assert await run_eval(opts, target(rt)) == 0
    assert {s["id"] for s in await rt.oc("GET", "/session")} == before
    report = json.loads((out / "report.json").read_text())
    assert report["parentSessionID"] == first and report["parents"] == {first: 2}
    assert f"parent session: {first} (2 roundtables under it;" in (out / "report.md").read_text()


async def test_a_new_parent_on_resume_leaves_the_earlier_one_named_with_its_roundtables(
    rt: RT, tmp_path: Path
) -> None:
    one = scripted_run(rt, tmp_path, count=2, limit=1, protocols=["single"])
    out = one.out
    assert await run_eval(one, target(rt)) == 0
    first = json.loads((out / "run.json").read_text())["parentSessionID"]
    await rt.oc("DELETE", f"/session/{first}")
    both = scripted_run(rt, tmp_path, count=2, protocols=["single"])
    assert await run_eval(both, target(rt)) == 0
    report = json.loads((out / "report.json").read_text())
    second = report["parentSessionID"]
    assert second != first and report["parents"] == {second: 1, first: 1}
    md = (out / "report.md").read_text()
    assert f"parent session: {second} (1 roundtables under it;" in md
    assert f"earlier parent session: {first} (1 roundtables under it; not reachable" in md
