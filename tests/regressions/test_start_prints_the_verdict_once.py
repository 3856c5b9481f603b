"""The end of ``roundtabled start`` printed the verdict twice: the result text's own lines
(``Verdict (by the observer): …``, ``Positions: …``, ``Minority …``) and then the verdict table.
The table says it once; so do ``watch`` and ``extend``."""

from __future__ import annotations

from tests.e2e.demo_serve import DemoServe


def _once(out: str) -> None:
    assert out.count("decision: ") == 1, out
    assert "Verdict (by the observer)" not in out and "\nPositions: " not in out, out
    assert "── verdict ──" in out


def test_start_watch_and_extend_say_the_verdict_once(demo: DemoServe) -> None:
    run = demo.start("--rounds", "1", topic="Should we drop the legacy API in June?")
    assert run.returncode == 0, (run.stdout, run.stderr)
    _once(run.stdout)
    ses = demo.session_of(run)
    _once(demo.cli("watch", ses).stdout)
    extend = demo.cli("extend", ses, "--rounds", "1", "Continue: what about the partners?")
    assert extend.returncode == 0, (extend.stdout, extend.stderr)
    _once(extend.stdout)
