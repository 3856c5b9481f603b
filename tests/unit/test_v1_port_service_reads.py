"""The 1.x port's reads for the service layer (``GET /v1/agents``, ``GET /v1/roundtables``,
export; docs/design.md "The server port"): OpenCode 1.x's JSON read into the product's records,
so the service reads no 1.x JSON of its own.

The answers are OpenCode 1.18.33's (the pinned 1.x server), shared with
``test_v1_port_start_reads.py``; that the real server still answers so is pinned by
``tests/contract/test_server_port.py`` (``test_1x_the_service_s_reads_go_through_v1_session``).
"""

from __future__ import annotations

from typing import Any

from roundtabled.core.server_records import IndexedSession, SessionRef
from roundtabled.core.validation import seat_agents
from roundtabled.opencode.port import V1Port
from tests.unit.test_v1_port_start_reads import AGENTS, PROJECT, S1, S2, Answers


async def test_agents_carry_their_description_and_whether_they_are_opencode_s_own() -> None:
    port = V1Port(Answers({("GET", "/agent"): AGENTS}))
    pm, plan, compaction = await port.agents(PROJECT)
    assert (pm.description, pm.native) == ("Product manager seat", False)
    assert (plan.description, plan.native) == ("Plan mode. Disallows all edit tools.", True)
    assert (compaction.description, compaction.native) == (None, True)  # no description
    # what GET /v1/agents and a refused start list: the agents a person may seat
    assert seat_agents([pm, plan, compaction]) == ["plan", "pm"]


async def test_indexed_sessions_are_those_whose_metadata_holds_a_roundtable_s_index() -> None:
    finished = {
        **S2,
        "id": "ses_db053cda1ffe0kD4GlA50Hw1XC",
        "metadata": {"roundtabled": {**S2["metadata"]["roundtabled"], "phase": "concluded"}},
        "time": {"created": 1796633014900},  # no "updated": unknown, listed as 0
    }
    odd_phase = {
        **S2,
        "id": "ses_db053cda1ffe0kD4GlA50Hw1XD",
        "metadata": {"roundtabled": {"v": 1, "phase": 3}},
    }
    not_ours: dict[str, Any] = {**S1, "metadata": {"roundtabled": "not an index"}}
    client = Answers({("GET", "/session"): [S1, S2, finished, odd_phase, not_ours]})
    port = V1Port(client)
    listed = await port.indexed_sessions(PROJECT)
    assert listed == [
        IndexedSession(SessionRef(S2["id"], PROJECT, S1["id"], "rt"), "active", 1796633014878),
        IndexedSession(SessionRef(finished["id"], PROJECT, S1["id"], "rt"), "concluded", 0),
        IndexedSession(SessionRef(odd_phase["id"], PROJECT, S1["id"], "rt"), None, 1796633014878),
    ]
    ((method, path, params, _),) = client.asked
    assert (method, path, params["directory"]) == ("GET", "/session", PROJECT)
    # the server's own directory: no directory parameter
    await port.indexed_sessions(None)
    assert "directory" not in client.asked[-1][2]
