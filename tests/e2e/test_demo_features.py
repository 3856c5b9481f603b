"""Every option a newcomer tries on ``scripts/demo --serve`` shows its effect on the offline
model: the real CLI against the demo's daemon, and what the person reads.

After the first debate the demo's model used to answer with filler (its script was a queue the
first debate used up), so each of these ended degraded with no decision."""

from __future__ import annotations

import re
from pathlib import Path

from tests.e2e.demo_serve import DemoServe


def _ok(run_out: str, run_err: str, code: int) -> None:
    assert code == 0, (run_out, run_err)
    assert "DEGRADED" not in run_out, run_out
    assert "decision: " in run_out, run_out


def test_until_converged_stops_the_debate_early(demo: DemoServe) -> None:
    run = demo.start(
        "--rounds", "5", "--until", "converged", topic="Should we adopt trunk-based development?"
    )
    _ok(run.stdout, run.stderr, run.returncode)
    status = re.search(r"^Status: converged, (\d)/5 rounds$", run.stdout, re.M)
    assert status and int(status.group(1)) < 5, run.stdout
    assert f"converged after round {status.group(1)} of 5" in run.stdout


def test_a_side_is_argued_and_shown_on_every_header(demo: DemoServe) -> None:
    run = demo.start(
        "--rounds", "2", "--side", "rv=against", topic="Should we move CI to GitHub Actions?"
    )
    _ok(run.stdout, run.stderr, run.returncode)
    for rnd in (1, 2):
        assert f"── rv · round {rnd} · side: against ──" in run.stdout, run.stdout
        assert f"── pm · round {rnd} ──" in run.stdout
    assert "Arguing my assigned side (against)" in run.stdout
    assert re.search(r"^rv \(side: against\) ", run.stdout, re.M), run.stdout
    # Free seats agree in their own words; the side-bound seat is not counted.
    assert "consensus: unanimous" in run.stdout, run.stdout


def test_recent_context_hands_the_seats_a_digest(demo: DemoServe) -> None:
    run = demo.start(
        "--rounds", "4", "--context", "recent", topic="Should we rewrite the billing UI?"
    )
    _ok(run.stdout, run.stderr, run.returncode)
    round4 = run.stdout[run.stdout.index("── pm · round 4 ──") :]
    # The seats read the digest of the hidden round and cite what it says each seat held.
    assert re.search(
        r"From the digest of round\(s\) 2 \(those turns are hidden from me\): pm held “", round4
    ), round4
    assert "From the digest" not in run.stdout[: run.stdout.index("── pm · round 4 ──")]


def test_an_independent_opening_answers_without_the_others(demo: DemoServe) -> None:
    topic = "Should we adopt Rust for the parser?"
    run = demo.start("--rounds", "2", "--opening", "independent", topic=topic)
    _ok(run.stdout, run.stderr, run.returncode)
    opening = run.stdout[: run.stdout.index("── pm · round 2 ──")]
    assert "I answer on my own, without having seen the other openings." in opening, opening
    assert "Having read" not in opening
    sequential = demo.start("--rounds", "1", topic=topic)
    assert "Having read pm's opening" in sequential.stdout, sequential.stdout


def test_eval_scores_the_protocols_apart(demo: DemoServe, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    # The eval line the demo prints, exactly as printed (it once said "eval --limit 4", which
    # names no seats and no directory and is refused), plus where to write the report.
    printed = next(w for line in demo.lines if (w := line.split())[1:2] == ["eval"])
    assert printed[0].endswith("roundtabled") and printed[1] == "eval", printed
    run = demo.cli(*printed[1:], "--out", str(out), timeout=600)
    assert run.returncode == 0, (run.stdout, run.stderr)
    report = (out / "report.md").read_text()
    scores = dict(re.findall(r"^\| (\S+) \| (\d)/4 = ", report, re.M))
    # Each protocol is the product's own roundtable: the offline panel's debates stop early on
    # repetition (the daemon's rule), one of them before the seat that erred could recheck.
    assert scores == {
        "single:pm": "1",
        "single:dev": "1",
        "single:rv": "3",
        "vote": "1",
        "debate": "3",
        "adaptive": "3",
        "council": "1",
    }, report
    # The seats that erred in the opening changed their answers in the debate.
    assert re.search(r"\| debate \| [^\n]*\| [1-9]\d* / 0 \|", report), report
