"""Field failure (found by the kill-point suite across a mode switch, OpenCode 1.18.33): the
roundtable plugin removed from the project and the directory's instance disposed (a config
reload; the same after a restart of the daemon), the plugin loaded by the disposed instance goes
on reporting itself every 5 s: OpenCode keeps its timer and never shows its hooks the disposal.
The daemon trusted that heartbeat, went back to the plugin mode, and sent the seats' models every
earlier turn prompt (nothing hid them: no PATCH in the plugin mode, no plugin in the instance).

The exact input: the plugin installed in the project, reported; its file deleted and
``POST /instance/dispose?directory=<project>``; then a 2 × 2 debate. Now a directory's first
report after a drop is trusted only once ``GET /config`` of its current instance lists the
plugin file (:mod:`roundtabled.engine.plugins`), so the debate runs in the PATCH mode and says
so, and no seat sees an earlier prompt.
"""

from __future__ import annotations

from typing import Any

from roundtabled.core.state import MODE_NOTES
from roundtabled.engine.plugins import PLUGIN_FILE
from roundtabled.service import install
from tests.e2e.conftest import RT
from tests.e2e.edge_helpers import wait_for
from tests.e2e.test_plugin import plugin_reported
from tests.fakes.daemon_proc import earlier_prompts_seen
from tests.regressions.conftest import LogCapture

REFUSED = "has not loaded the plugin"


async def test_the_heartbeat_of_a_disposed_instance_s_plugin_is_not_trusted(
    rt_factory: Any,
) -> None:
    rt: RT = await rt_factory(plugin=True)
    await plugin_reported(rt)
    plugins = rt.daemon.engine.shell.plugins
    (rt.server.project_dir / ".opencode" / install.PLUGIN_DIR / PLUGIN_FILE).unlink()
    with LogCapture() as logs:
        assert await rt.oc("POST", "/instance/dispose", params={"directory": rt.directory})
        await wait_for(lambda: plugins.version_for(rt.directory) is None, 10, "the report dropped")
        # The disposed instance's next heartbeat: refused, or (the fault) trusted again.
        await wait_for(
            lambda: (
                any(REFUSED in line for line in logs.lines())
                or plugins.version_for(rt.directory) is not None
            ),
            15,
            "the disposed instance's heartbeat",
        )
        await plugins.checked()
        assert plugins.version_for(rt.directory) is None, "a disposed instance's report trusted"
    s2 = await rt.start(agents=["pm", "dev"], prompt="Cache or not?", rounds=2)
    await rt.result(s2)
    await rt.finalized(s2)
    state = await rt.daemon.engine.load_state(s2)
    assert state.view == "patch" and MODE_NOTES["patch"] in state.notes, state.notes
    seen = earlier_prompts_seen(await rt.messages(s2), s2, rt.daemon.engine.shell.signer, rt.llm)
    assert not seen, seen
