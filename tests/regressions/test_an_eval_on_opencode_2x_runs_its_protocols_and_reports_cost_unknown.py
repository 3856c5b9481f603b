"""``roundtabled eval`` against an OpenCode 2.x server failed before its first question with
"Error: cannot reach the OpenCode server at http://127.0.0.1:PORT: GET /global/health: response
is not JSON": eval read the server (its version, the seats' models, the prices) and wrote the
run's parent session through the 1.x client, and 2.x answers ``/global/health`` with its web app.
Now eval asks the server its major and uses that major's client: on the real 2.1.2 server with
the scripted model a small run of ``--protocols single,vote,debate`` runs end to end, its report
names the 2.x version and the seats' configured models, and the cost is unknown (2.x lists no
price), never 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roundtabled.core.scoring import arithmetic_questions
from roundtabled.eval.run import run_eval
from roundtabled.opencode.v2 import V2NotFound
from tests.e2e.conftest import RT
from tests.e2e.eval_helpers import AGENTS, scripted_run, target
from tests.e2e.test_eval import expected

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]


@pytest.fixture
def opencode_major() -> int:
    """This fault is OpenCode 2.x's, whatever major the run's other servers are."""
    return 2


async def test_eval_on_2x_reports_accuracy_the_version_and_cost_unknown(
    rt: RT, tmp_path: Path
) -> None:
    assert rt.major == 2
    names = ["vote", "debate"]
    opts = scripted_run(rt, tmp_path, count=2, protocols=["single", *names])
    out = opts.out
    assert await run_eval(opts, target(rt)) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["questions"] == {"done": 2, "planned": 2} and not report["partial"]
    assert str(report["opencodeVersion"]).startswith("2."), report["opencodeVersion"]
    exp = expected(arithmetic_questions("easy", 2, 1))
    by_name = {p["name"]: p for p in report["protocols"]}
    assert list(by_name) == [*(f"single:{a}" for a in AGENTS), *names]
    for name, line in by_name.items():
        right = sum(ok[name] for ok in exp["ok"].values())
        assert (line["correct"], line["n"]) == (right, 2), name
        # 2.x lists no price: unknown, not a measured 0
        assert line["cost_per_question"] is None, (name, line)
    run = json.loads((out / "run.json").read_text())
    assert run["costListed"] is False
    # the seats' own configured models (the rt environment's), read through the 2.x client
    assert all(str(m).startswith("scripted/") for m in report["models"].values()), report
    # every roundtable ran under the run's parent session, as its children on the server
    kids = await rt.v2.client.children(report["parentSessionID"])
    assert set(report["sessions"]) <= {k.id for k in kids}
    assert len(report["sessions"]) == 2 * len(names)
    md = (out / "report.md").read_text()
    assert f"- OpenCode {report['opencodeVersion']}," in md
    assert f"| vote | {by_name['vote']['correct']}/2" in md
    assert f"| debate | {by_name['debate']['correct']}/2" in md
    assert "| unknown |" in md


async def test_eval_on_2x_resumes_under_its_parent_and_cleanup_deletes_its_sessions(
    rt: RT, tmp_path: Path
) -> None:
    """A resume reads the recorded parent through the 2.x client and runs the rest under it;
    ``--cleanup`` deletes the parent and its roundtables on the 2.x server."""
    one = scripted_run(rt, tmp_path, count=2, limit=1, protocols=["single"])
    assert await run_eval(one, target(rt)) == 0
    parent = json.loads((one.out / "run.json").read_text())["parentSessionID"]
    both = scripted_run(rt, tmp_path, count=2, protocols=["single"], cleanup=True)
    assert await run_eval(both, target(rt)) == 0
    report = json.loads((both.out / "report.json").read_text())
    assert report["parentSessionID"] == parent and report["parents"] == {parent: 2}
    with pytest.raises(V2NotFound):
        await rt.v2.client.get_session(parent)
