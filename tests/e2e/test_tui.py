"""The roundtable in a real OpenCode TUI (slow suite): ``opencode attach`` to the test server
inside tmux, the orchestrator (``build``, scripted) calls the ``roundtable`` tool, then the keys
of the pinned OpenCode open the child session (``ctrl+x`` then ``↓``; docs/opencode-server.md).
Asserted from ``tmux capture-pane``: the state card (no JSON, its first line saying the
roundtable is over), one header line per turn above each seat's reply (not the instructions the
model reads), each reply under its name and the delimiter are on screen, the TUI names the keys
to move between sessions, and ``↑`` returns to the parent.

On OpenCode 2.x (the second test): the 2.x TUI (``opencode --server URL --session S1``; 2.x has no
``attach``) on a 2.x server with the roundtabled plugin and the daemon driving it through the 2.x
shell. The orchestrator's ``roundtable`` tool call (the 2.x plugin's) returns the result into
the TUI; then the V2 subagent picker (``↓``; ``ctrl+a`` lists the finished subagents too;
``enter`` shows the one picked) shows the roundtable's child session, each seat's reply in order
and the observer's summary, and ``esc`` returns to the parent.

tmux is installed by ``scripts/setup`` where missing; without it the test is skipped (reason
given).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
import uuid
from pathlib import Path

import aiohttp
import pytest
from pydantic import SecretStr

from roundtabled.core.card import CARD_FOOTER, CARD_HEADER
from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.opencode_server import OpenCodeServer, agent_prompts_of, free_port
from roundtabled.offline.scripted_actions import Text, tool_call
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.opencode.v2 import V2Client
from roundtabled.service import install
from roundtabled.service.config import load_settings
from roundtabled.service.daemon import Daemon

from .conftest import RT, roundtable_config
from .edge_helpers import ask_build

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("tmux") is None,
        reason="tmux is not installed (scripts/setup installs it with apt-get when run as root)",
    ),
]

WIDTH, HEIGHT = 160, 200


async def tmux(socket: str, *args: str, env: dict[str, str] | None = None) -> str:
    """``tmux -L socket ARGS``: a private tmux server per test, started with ``env`` (a shared
    server would give the TUI its own environment instead)."""
    proc = await asyncio.create_subprocess_exec(
        "tmux",
        "-L",
        socket,
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 10)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def screen(name: str) -> str:
    return await tmux(name, "capture-pane", "-p", "-t", name)


async def wait_screen(name: str, needle: str, timeout: float, *more: str) -> str:
    """The screen once ``needle`` and every one of ``more`` are on it (the TUI draws a
    session's messages over several frames: the last one can come before an earlier reply)."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = await screen(name)
        if all(n in text for n in (needle, *more)):
            return text
        await asyncio.sleep(0.3)
    raise AssertionError(f"{(needle, *more)!r} not on screen after {timeout} s:\n{text}")


def tui_env(server: OpenCodeServer) -> dict[str, str]:
    """The TUI's environment: the server's own XDG directories and home, nothing of ours."""
    xdg = server.xdg_dir
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE_", "XDG_"))},
        "HOME": str(server.home_dir),
        "XDG_CONFIG_HOME": str(xdg / "config"),
        "XDG_DATA_HOME": str(xdg / "data"),
        "XDG_CACHE_HOME": str(xdg / "cache"),
        "XDG_STATE_HOME": str(xdg / "state"),
        "TERM": "xterm-256color",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
    }


async def test_the_debate_in_the_tui_child_session_shows_the_card_seats_and_delimiter(
    rt: RT, tmp_path: Path
) -> None:
    s1 = await rt.new_parent("TUI main session")
    rt.llm.script(Text(text="PM-SEAT says: ship the small scope first."), agent="pm")
    rt.llm.script(Text(text="DEV-SEAT says: agreed, behind a flag."), agent="dev")
    rt.llm.script(Text(text="SUMMARY: small scope first, behind a flag."), agent=OBSERVER_AGENT)
    rt.llm.script(
        tool_call(
            "roundtable",
            {"agents": ["pm", "dev"], "prompt": "Ship the small scope first?", "rounds": 1},
        ),
        Text(text="ORCHESTRATOR: the panel agreed."),
        agent="build",
    )
    name = f"rt-tui-{uuid.uuid4().hex[:8]}"
    env = tui_env(rt.server)
    cmd = [
        str(rt.server.binary),
        "attach",
        rt.server.url,
        "--dir",
        rt.directory,
        "--session",
        s1,
    ]
    await tmux(
        name, "new-session", "-d", "-s", name, "-x", str(WIDTH), "-y", str(HEIGHT), *cmd, env=env
    )
    try:
        await wait_screen(name, "TUI main session", 60)
        await ask_build(rt, s1, "Convene a roundtable of pm and dev.")
        await wait_screen(name, "ORCHESTRATOR: the panel agreed.", 90)
        s2 = str(next(r for r in rt.llm.requests if r.agent == "pm").session_id)
        await rt.finalized(s2)
        # Open the first child session: ctrl+x, then ↓.
        await tmux(name, "send-keys", "-t", name, "C-x")
        await asyncio.sleep(0.3)
        await tmux(name, "send-keys", "-t", name, "Down")
        text = await wait_screen(
            name, "━━━ Roundtable Concluded ━━━", 30, "PM-SEAT says", "DEV-SEAT says"
        )
        (tmp_path / "child-screen.txt").write_text(text)
        # The state block reads as a card (no JSON), before the first turn.
        # Its first line says whether it runs (here: over), before the title.
        card_at = text.find(f"{CARD_HEADER} · CONCLUDED · Ship the small scope first?")
        assert card_at >= 0, text
        assert "Seats in order: 1. pm (scripted/debater-1), 2. dev (scripted/debater-2)" in text
        assert CARD_FOOTER in text and "Phase: done (completed)" in text
        # What deliberation changed, as the CLI's verdict says it: one round, none.
        assert "Deliberation: none (one round)" in text
        assert '"currentAgentIndex"' not in text and "ROUNDTABLE META" not in text
        # Each seat's reply under its own agent's name, in speaking order, then the delimiter.
        pm_at, dev_at = text.find("▣  Pm · "), text.find("▣  Dev · ")
        assert card_at < pm_at < dev_at < text.index("━━━ Roundtable Concluded ━━━"), text
        assert "PM-SEAT says" in text[:pm_at] and "DEV-SEAT says" in text[pm_at:dev_at]
        assert "── roundtable concluded ──" in text
        # One header line per turn: the seat prompt's instructions are a synthetic part, which
        # the pinned TUI does not show in a user message, so the label (an ignored part) stands
        # alone above each reply; the model still gets the instructions.
        rows = [row.strip(" ┃") for row in text.splitlines()]
        pm_head = rows.index("── pm · round 1 ──")
        first_after = next(r for r in rows[pm_head + 1 :] if r)
        assert first_after == "PM-SEAT says: ship the small scope first."
        assert "── dev · round 1 ──" in rows and "── observer · roundtable-observer ──" in rows
        assert "[System]" not in text and "You are participating" not in text
        assert "Position: <short label>" not in text
        pm_req = next(r for r in rt.llm.requests if r.agent == "pm")
        assert pm_req.last_user_text.startswith(
            "[System] You are participating in a roundtable debate."
        )
        assert "── pm · round 1 ──" not in pm_req.last_user_text  # the label stays out
        # The keys the README names, as the pinned TUI itself shows them in the child session.
        assert "Parent up" in text and "Prev left" in text and "Next right" in text
        # ↑ goes back to the parent session.
        await tmux(name, "send-keys", "-t", name, "Up")
        back = await wait_screen(name, "ORCHESTRATOR: the panel agreed.", 30)
        assert "━━━ Roundtable Concluded ━━━" not in back
    finally:
        with contextlib.suppress(AssertionError):
            await tmux(name, "kill-server")


async def test_on_opencode_2_the_subagent_picker_shows_the_roundtable_s_turns(
    tmp_path: Path,
) -> None:
    """OpenCode 2.x: the orchestrator in the 2.x TUI calls the 2.x plugin's ``roundtable`` tool,
    its relay of the result shows in the TUI, and the subagent picker opens the roundtable's
    child session with each seat's reply in speaking order and the observer's summary."""
    llm = ScriptedLLM()
    await llm.start(port=0)
    config = roundtable_config(llm)
    llm.agent_prompts.update(agent_prompts_of(config))
    server = OpenCodeServer(tmp_path, config, major=2)
    control_port = free_port()
    home = tmp_path / "rt-home"
    settings = load_settings(
        {"server_url": "http://127.0.0.1:9", "control_port": control_port, "resync_period": 2.0},
        env={
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / "cfg"),
            "XDG_STATE_HOME": str(home / "state"),
        },
    )
    install.install_tools(
        server.project_dir / ".opencode",
        control_url=f"http://127.0.0.1:{control_port}",
        token_file=settings.token_file,
        major=2,
    )
    await server.start()
    settings = settings.model_copy(
        update={
            "server_url": server.url,
            "server_password": SecretStr(str(server.password)),
            "directories": (str(server.project_dir),),
        }
    )
    daemon = Daemon(settings)
    task = asyncio.create_task(daemon.run())
    client = V2Client(server.url, password=server.password)
    name = f"rt-tui2-{uuid.uuid4().hex[:8]}"
    try:
        await asyncio.wait_for(daemon.engine.ready.wait(), 60)
        assert daemon.v2 is not None, "the daemon does not drive the server as OpenCode 2.x"
        s1 = await client.create_session(
            directory=str(server.project_dir), title="TUI2 main session", agent="build"
        )
        llm.script(Text(text="PM-SEAT says: ship the small scope first."), agent="pm")
        llm.script(Text(text="DEV-SEAT says: agreed, behind a flag."), agent="dev")
        llm.script(Text(text="SUMMARY: small scope first, behind a flag."), agent=OBSERVER_AGENT)
        llm.script(
            tool_call(
                "roundtable",
                {"agents": ["pm", "dev"], "prompt": "Ship the small scope first?", "rounds": 1},
            ),
            Text(text="ORCHESTRATOR: the panel agreed."),
            session=s1.id,
        )
        env = {**tui_env(server), "OPENCODE_SERVER_PASSWORD": str(server.password)}
        cmd = [
            str(server.binary),
            "--server",
            server.url,
            "--session",
            s1.id,
            str(server.project_dir),
        ]
        await tmux(
            name,
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            str(WIDTH),
            "-y",
            str(HEIGHT),
            *cmd,
            env=env,
        )
        await wait_screen(name, "TUI2 main session", 60)
        await client.prompt(s1.id, "Convene a roundtable of pm and dev.")
        await wait_screen(name, "ORCHESTRATOR: the panel agreed.", 90)
        # the tool's result reached the orchestrator's model, as the TUI shows it relayed
        tool_results = [
            str(m.get("content"))
            for r in llm.requests
            if r.session_id == s1.id
            for m in r.messages
            if m.get("role") == "tool"
        ]
        assert any("SUMMARY: small scope first" in t for t in tool_results), tool_results
        (s2,) = [c.id for c in await client.children(s1.id)]
        assert await daemon.v2.finalized(s2, 30)
        # The subagent picker: ↓ opens it; the roundtable is over, so ctrl+a lists the finished
        # ones too; enter shows the child session.
        await tmux(name, "send-keys", "-t", name, "Down")
        picker = await wait_screen(name, "Subagents", 30, "ctrl+a")
        if "show inactive" in picker:
            await tmux(name, "send-keys", "-t", name, "C-a")
        await wait_screen(name, "Ship the small scope first? · CONCLUDED", 30)
        await tmux(name, "send-keys", "-t", name, "Enter")
        text = await wait_screen(
            name, "SUMMARY: small scope first, behind a flag.", 30, "PM-SEAT says", "DEV-SEAT says"
        )
        (tmp_path / "child-screen-v2.txt").write_text(text)
        # each seat's reply in speaking order, the agent switched between them, then the summary
        pm_at, dev_at = text.find("PM-SEAT says"), text.find("DEV-SEAT says")
        assert 0 <= pm_at < dev_at < text.find("SUMMARY: small scope first"), text
        assert "Switched agent" in text[pm_at:dev_at] and "Dev" in text[pm_at:dev_at], text
        assert "Round 1/1 | Current agent: pm" in text[:pm_at], text
        assert "ORCHESTRATOR: the panel agreed." not in text  # the child, not the parent
        # esc closes the picker: the parent session again
        await tmux(name, "send-keys", "-t", name, "Escape")
        back = await wait_screen(name, "ORCHESTRATOR: the panel agreed.", 30)
        assert "PM-SEAT says" not in back
    finally:
        with contextlib.suppress(AssertionError):
            await tmux(name, "kill-server")
        daemon.request_stop()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(task, 30)
        await client.close()
        await server.stop()
        await llm.stop()


async def test_on_opencode_2_the_plugin_s_tui_part_shows_the_roundtable_s_toasts(
    tmp_path: Path,
) -> None:
    """OpenCode 2.x has no HTTP toast: the daemon keeps the roundtable's toasts and the 2.x
    plugin's TUI part (``plugins/roundtabled/tui.ts``) long-polls ``GET /v1/notices`` and shows
    them in the TUI: "Roundtable started: …" and, after the observer, "Roundtable concluded: …"
    (docs/plugin.md, "Toasts on 2.x")."""
    llm = ScriptedLLM()
    await llm.start(port=0)
    config = roundtable_config(llm)
    llm.agent_prompts.update(agent_prompts_of(config))
    server = OpenCodeServer(tmp_path, config, major=2)
    control_port = free_port()
    home = tmp_path / "rt-home"
    settings = load_settings(
        {"server_url": "http://127.0.0.1:9", "control_port": control_port, "resync_period": 2.0},
        env={
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / "cfg"),
            "XDG_STATE_HOME": str(home / "state"),
        },
    )
    install.install_tools(
        server.project_dir / ".opencode",
        control_url=f"http://127.0.0.1:{control_port}",
        token_file=settings.token_file,
        major=2,
    )
    await server.start()
    settings = settings.model_copy(
        update={
            "server_url": server.url,
            "server_password": SecretStr(str(server.password)),
            "directories": (str(server.project_dir),),
            # only the start and the end: a turn's progress toast would cover them
            "progress_toasts": False,
        }
    )
    daemon = Daemon(settings)
    task = asyncio.create_task(daemon.run())
    client = V2Client(server.url, password=server.password)
    name = f"rt-toast2-{uuid.uuid4().hex[:8]}"
    try:
        await asyncio.wait_for(daemon.engine.ready.wait(), 60)
        assert daemon.v2 is not None, "the daemon does not drive the server as OpenCode 2.x"
        s1 = await client.create_session(
            directory=str(server.project_dir), title="TOAST2 main session", agent="build"
        )
        env = {**tui_env(server), "OPENCODE_SERVER_PASSWORD": str(server.password)}
        cmd = [str(server.binary), "--server", server.url, "--session", s1.id]
        await tmux(
            name, "new-session", "-d", "-s", name, "-x", "160", "-y", "50", *cmd,
            str(server.project_dir), env=env,
        )  # fmt: skip
        await wait_screen(name, "TOAST2 main session", 60)
        # the TUI part has asked where to start: the notices from now on are its own
        deadline = time.monotonic() + 60
        while daemon.api.notices.polls < 2:
            assert time.monotonic() < deadline, "the plugin's TUI part never polled /v1/notices"
            await asyncio.sleep(0.2)
        # pm answers after a pause: the start toast is raised when turn 1 reaches the model, and
        # a debate that ends a second later would let the concluded toast cover it on screen
        llm.script(
            Text(text="PM-SEAT says: ship the small scope first.", first_byte_delay=4.0),
            agent="pm",
        )
        llm.script(Text(text="DEV-SEAT says: agreed, behind a flag."), agent="dev")
        llm.script(Text(text="SUMMARY: small scope first."), agent=OBSERVER_AGENT)
        assert daemon.control_address is not None
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                daemon.control_address + "/v1/roundtables",
                json={
                    "agents": ["pm", "dev"],
                    "rounds": 1,
                    "prompt": "Ship the small scope first?",
                    "parentSessionID": s1.id,
                    "directory": str(server.project_dir),
                },
                headers={"Authorization": f"Bearer {daemon.token}"},
            ) as resp,
        ):
            assert resp.status == 200, await resp.text()
        await wait_screen(name, "Roundtable started", 60)
        await wait_screen(name, "Roundtable concluded", 90)
    finally:
        with contextlib.suppress(Exception):
            await tmux(name, "kill-server")
        daemon.request_stop()
        await asyncio.wait_for(task, 30)
        await client.close()
        await server.stop()
        await llm.stop()
