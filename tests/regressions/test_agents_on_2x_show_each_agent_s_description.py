"""``roundtabled agents`` on OpenCode 2.x showed an empty DESCRIPTION column although
``GET /api/agent`` returns each agent's ``description``: the 2.x adapter never read it into the
agent record. Now the record, and so ``GET /v1/agents`` and the CLI's table, carry it, as on 1.x
(the real 2.x server; no model needed).
"""

from __future__ import annotations

from tests.e2e.test_v2_roundtable import Env, env

__all__ = ["env"]  # the 2.x server fixture, imported


async def test_every_agent_record_has_the_server_s_description(env: Env) -> None:
    raw = {a.id: a.description for a in await env.port.client.agents(env.directory)}
    records = {a.id: a.description for a in await env.port.agents(env.directory)}
    assert raw["dev"] == "Developer seat", raw
    assert records == raw
