"""Found while adding protocols: the checks of a start were written twice, once for the start
(``engine/launch.py``) and once for the dry run (``service/plan.py``), and the copies had drifted:
``roundtabled start --agents pm,dev --context recent --dry-run …`` on a server without the
roundtable plugin printed a plan, while the same command without ``--dry-run`` is refused (the
recent context needs the plugin). The dry run now runs the start's own checks
(``launch.check_start``): the same one line, exit 2, and no session created.
"""

from __future__ import annotations

from tests.e2e.cli_helpers import cli
from tests.e2e.conftest import RT


async def test_a_dry_run_refuses_the_recent_context_without_the_plugin_like_the_start(
    rt: RT,
) -> None:
    listed = await rt.oc("GET", "/session", params={"directory": rt.directory})
    before = {str(s["id"]) for s in listed}
    argv = ["start", "--agents", "pm,dev", "--rounds", "4", "--context", "recent"]
    argv += ["--directory", rt.directory]
    dry = await cli(rt, *argv, "--dry-run", "Split the monolith?")
    real = await cli(rt, *argv, "Split the monolith?")
    assert dry.code == real.code == 2, (dry, real)
    assert dry.out == real.out == ""
    assert dry.err == real.err, (dry.err, real.err)
    assert dry.err.startswith("Error: --context 'recent' needs the roundtable plugin"), dry.err
    listed = await rt.oc("GET", "/session", params={"directory": rt.directory})
    assert {str(s["id"]) for s in listed} == before
