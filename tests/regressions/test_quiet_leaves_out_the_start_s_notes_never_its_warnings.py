"""``roundtabled start -q`` ("print only the result") still printed every note of the start on
stderr — on OpenCode 2.x several lines before the result (what the server cannot do, where
the seats' requests are shaped). Now ``--quiet`` leaves the notes out and keeps every warning
(what went wrong is never hidden: docs/result.md)."""

from __future__ import annotations

from roundtabled.cli.debate import start_notes
from roundtabled.core.state import went_wrong

# a note of a healthy 2.x start, and one that says something went wrong
NOTE = (
    "seats' model requests shaped by the roundtable plugin: earlier turn prompts left out in "
    "memory, no hiding write per turn"
)
WARNING = "a budget in usd cannot be enforced: the server reports no cost"


def test_quiet_leaves_out_the_start_s_notes_never_its_warnings() -> None:
    assert went_wrong([NOTE, WARNING]) == [WARNING]
    assert start_notes([NOTE, WARNING], quiet=True) == [f"warning: {WARNING}"]
    assert start_notes([NOTE, WARNING], quiet=False) == [f"note: {NOTE}", f"warning: {WARNING}"]
