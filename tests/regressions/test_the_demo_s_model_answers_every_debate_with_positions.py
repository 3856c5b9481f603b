"""After the first debate the demo's offline model wrote only filler: its script was a queue per
seat, used up by the first debate, and every later turn got the scripted server's default text
(no ``Position:`` line), so every later debate ended degraded with no decision. The offline
panel answers each debate from its prompt: real positions, one after another."""

from __future__ import annotations

import re

from tests.e2e.demo_serve import DemoServe


def test_three_debates_in_a_row_each_reach_a_decision(demo: DemoServe) -> None:
    for topic in (
        "Should we split the payments monolith?",  # the demo's own first command
        "Should we split the payments monolith?",  # the same again: no script left before
        "Should we hire a second SRE?",
    ):
        run = demo.start("--rounds", "2", topic=topic)
        assert run.returncode == 0, (run.stdout, run.stderr)
        assert "DEGRADED" not in run.stdout, run.stdout
        assert len(re.findall(r"^Position: \S", run.stdout, re.M)) == 6, run.stdout
        assert re.search(r"^decision: \S", run.stdout, re.M), run.stdout
