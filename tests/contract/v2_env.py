"""One real OpenCode 2.x server for the 2.x contract tests (``test_v2_*.py``).

A module-scoped :class:`V2Env` is: the scripted model, a private 2.x server
(:class:`~roundtabled.offline.opencode_server.OpenCodeServer` ``major=2``, the offline config in
the 1.x format, which 2.x reads) whose project holds the V2 test plugin :data:`PLUGIN`, a
:class:`~roundtabled.opencode.v2.V2Client` and a recorder of ``GET /api/event`` through
:func:`~roundtabled.opencode.v2.v2_event_stream`. Each test works in sessions of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from roundtabled.offline.opencode_server import OpenCodeServer, agent_prompts_of, offline_config
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.opencode.events import Event
from roundtabled.opencode.stream import EventStream
from roundtabled.opencode.v2 import V2Client, v2_event_stream

PLUGIN_ID = "roundtabled.contract"
PLUGIN = """
import { Plugin } from "@opencode/plugin"

// Drops from the model request what roundtabled hides, in the two ways a V2 plugin can know it:
// - a user message whose own metadata says {"roundtabled": {"hidden": true}};
// - any message (assistant replies too) whose id the session's metadata lists under
//   {"roundtabled": {"hidden": [ids]}} (read with ctx.session.get).
export default Plugin.define({
  id: "PLUGIN_ID",
  async setup(ctx) {
    await ctx.session.hook("context", async (event) => {
      try {
        const info = await ctx.session.get({ sessionID: event.sessionID })
        const listed = new Set(info?.metadata?.roundtabled?.hidden ?? [])
        event.messages = event.messages.filter(
          (m) =>
            !listed.has(m.id) && !(m.role === "user" && m.metadata?.roundtabled?.hidden === true),
        )
      } catch (_) {
        // a throwing context hook fails the execution: never throw
      }
    })
  },
})
""".replace("PLUGIN_ID", PLUGIN_ID)


@dataclass
class V2Env:
    server: OpenCodeServer
    llm: ScriptedLLM
    client: V2Client
    events: list[Event] = field(default_factory=list)
    stream: EventStream | None = None
    task: asyncio.Task[None] | None = None
    connected: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def directory(self) -> str:
        return str(self.server.project_dir)

    async def wait_event(
        self, match: Callable[[Event], bool], *, since: int = 0, within: float = 30.0
    ) -> Event:
        """The first recorded event from index ``since`` on that ``match``es (waits for it)."""
        deadline = time.monotonic() + within
        while True:
            for ev in self.events[since:]:
                if match(ev):
                    return ev
            if time.monotonic() > deadline:
                raise TimeoutError(f"no matching event within {within} s")
            await asyncio.sleep(0.02)


async def start_v2_env(root: Path) -> V2Env:
    llm = ScriptedLLM()
    await llm.start(port=0)
    config = offline_config(llm.base_url)
    llm.agent_prompts.update(agent_prompts_of(config))
    server = OpenCodeServer(root, config, major=2)
    plugin = root / server.directory_name / ".opencode" / "plugins" / "contract" / "index.ts"
    plugin.parent.mkdir(parents=True, exist_ok=True)
    plugin.write_text(PLUGIN)
    await server.start()
    env = V2Env(server=server, llm=llm, client=V2Client(server.url, password=server.password))

    def on_event(ev: Event) -> None:
        if ev.type == "server.connected":
            env.connected.set()
        env.events.append(ev)

    env.stream = v2_event_stream(server.url, on_event, password=server.password)
    env.task = asyncio.create_task(env.stream.run())
    await asyncio.wait_for(env.connected.wait(), 15)
    return env


async def stop_v2_env(env: V2Env) -> None:
    if env.task is not None:
        env.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await env.task
    await env.client.close()
    await env.server.stop()
    await env.llm.stop()
