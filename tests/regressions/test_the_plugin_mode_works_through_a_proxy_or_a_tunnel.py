"""Field failure (found with the real OpenCode 1.18.33): a daemon that reaches OpenCode through a
reverse proxy or an SSH tunnel — its ``server_url`` on another port or host than the server's
own — refused every report of the roundtable plugin ("the plugin runs in another OpenCode
server than the daemon's"): the report's ``serverUrl`` is the URL the server gives its plugins,
which is not the one the daemon knows it by. Every turn paid the hiding PATCH again and
``context: "recent"`` was refused, with the plugin running in the very server the daemon drove.

The exact input: the plugin installed in the project; the daemon restarted with ``server_url``
pointing at the fault proxy (another port) in front of the same server; then a debate with
``context: "recent"``. Now the server's identity comes from the server: a report is trusted once
the daemon's own connection (through the proxy) reads the plugin's mark in the directory's
configuration (:mod:`roundtabled.engine.plugins`), so the debate runs in the plugin mode.
"""

from __future__ import annotations

from typing import Any

from roundtabled.core.state import MODE_NOTES
from tests.e2e.conftest import RT
from tests.e2e.test_plugin import plugin_reported
from tests.fakes.daemon_proc import earlier_prompts_seen
from tests.fakes.proxy import FaultProxy


async def test_the_daemon_through_a_proxy_on_another_port_uses_the_plugin(
    rt_factory: Any,
) -> None:
    rt: RT = await rt_factory(plugin=True)
    proxy = FaultProxy(rt.server.url)
    await proxy.start()
    try:
        # The plugin's control.ts names this control port: the restarted daemon keeps it.
        port = rt.daemon.settings.control_port
        await rt.restart_daemon(server_url=proxy.url, control_port=port)
        assert proxy.url != rt.server.url
        await plugin_reported(rt)
        status, started = await rt.api(
            "POST",
            "/v1/roundtables",
            {
                "agents": ["pm", "dev"],
                "prompt": "Cache or not?",
                "rounds": 4,
                "context": "recent",
                "directory": rt.directory,
            },
        )
        assert status == 200, started
        s2 = started["sessionID"]
        await rt.result(s2, timeout=120)
        await rt.finalized(s2)
        state = await rt.daemon.engine.load_state(s2)
        assert state.view == "plugin" and MODE_NOTES["plugin"] in state.notes, state.notes
        assert MODE_NOTES["patch"] not in state.notes
        msgs = await rt.messages(s2)
        assert not earlier_prompts_seen(msgs, s2, rt.daemon.engine.shell.signer, rt.llm)
    finally:
        await proxy.stop()
