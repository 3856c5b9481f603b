"""``roundtabled start --agents pm,dev,rv --side rv=against …``: the TUI's label said
``── rv · round 1 · side: against ──``, the CLI and ``watch`` ``── rv · round 1 ──``, the export
``### rv · round 1``. One function renders a turn's header, the side with it, everywhere."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

from tests.e2e.demo_serve import DemoServe

HEAD = "rv · round 1 · side: against"


def _texts_in_the_session(demo: DemoServe, ses: str) -> list[str]:
    """The text parts of the roundtable's session, as the TUI shows them."""
    query = urllib.parse.urlencode({"directory": demo.project})
    with urllib.request.urlopen(f"{demo.server}/session/{ses}/message?{query}", timeout=30) as r:
        messages = json.load(r)
    return [str(p.get("text")) for m in messages for p in m["parts"] if p.get("type") == "text"]


def test_every_view_of_a_side_bound_turn_has_the_same_header(demo: DemoServe) -> None:
    run = demo.start(
        "--rounds", "1", "--side", "rv=against", topic="Should we ship the beta on Friday?"
    )
    assert run.returncode == 0, (run.stdout, run.stderr)
    ses = demo.session_of(run)
    watch = demo.cli("watch", ses)
    export = demo.cli("export", ses, "--format", "md")
    assert f"── {HEAD} ──" in run.stdout, run.stdout
    assert f"── {HEAD} ──" in watch.stdout, watch.stdout
    assert f"### {HEAD}\n" in export.stdout, export.stdout
    assert f"── {HEAD} ──" in _texts_in_the_session(demo, ses)
    # A free seat's header has no side part, in each of them.
    assert "── pm · round 1 ──" in run.stdout and "### pm · round 1\n" in export.stdout
