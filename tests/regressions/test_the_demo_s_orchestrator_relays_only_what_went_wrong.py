"""The demo's offline orchestrator relayed a degraded result as "the debate did not run as asked
— <every status note>", the plugin's informational note (the seats' requests shaped by the
roundtable plugin) among the problems. It lists what went wrong only."""

from __future__ import annotations

import json

from roundtabled.core.state import MODE_NOTES
from roundtabled.offline.orchestrator import relay_text


def test_an_informational_note_is_not_relayed_as_a_problem() -> None:
    info = next(iter(MODE_NOTES.values()))
    output = json.dumps(
        {
            "status": {"degraded": True, "notes": [info, "dev failed in round 1 (APIError)"]},
            "verdict": {"decision": "ship in stages", "consensus": "majority"},
        }
    )
    text = relay_text(output)
    assert text.splitlines()[0] == (
        "Note: the debate did not run as asked — dev failed in round 1 (APIError)."
    )
    assert info not in text
