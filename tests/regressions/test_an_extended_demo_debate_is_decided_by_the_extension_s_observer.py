"""The offline demo's ``extend`` (``scripts/demo``, both majors): after the extension every seat
ended on "a time-boxed pilot" (unanimous), yet the result still said ``decision: keep a modular
monolith …`` and repeated the round-2 summary. The demo's scripted model answered the observer
of its own topic with the fixed round-2 summary and verdict however far the debate had gone;
the product reported that observer's verdict faithfully. Now the extension's observer answers
from the extension's positions, so the extended result's decision and summary are its own (the
real 1.x server of ``demo --serve``; the observer prompt, and so the demo model's answer, is the
same on 2.x).
"""

from __future__ import annotations

from roundtabled.demo import EXTEND_PROMPT, TOPIC
from tests.e2e.demo_serve import DemoServe

ROUND_2_DECISION = "decision: keep a modular monolith"
ROUND_2_SUMMARY = "The panel rejects a big-bang split of the payments monolith"


def test_the_extended_result_decides_on_the_extension_s_positions(demo: DemoServe) -> None:
    started = demo.start("--rounds", "2", "-q", topic=TOPIC)
    assert started.returncode == 0, (started.stdout, started.stderr)
    assert ROUND_2_DECISION in started.stdout and ROUND_2_SUMMARY in started.stdout
    ses = demo.session_of(started)
    run = demo.cli("extend", ses, "--rounds", "1", "-q", EXTEND_PROMPT)
    assert run.returncode == 0, (run.stdout, run.stderr)
    verdict = run.stdout.split("── verdict ──", 1)[1]
    assert "consensus: unanimous" in verdict, run.stdout
    assert "decision: a time-boxed pilot" in verdict, run.stdout
    assert ROUND_2_DECISION not in run.stdout, run.stdout
    assert ROUND_2_SUMMARY not in run.stdout, run.stdout
