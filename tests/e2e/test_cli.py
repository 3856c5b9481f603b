"""The command line through its real entry point (``.venv/bin/roundtabled`` as a subprocess)
against a running daemon and the real OpenCode server with the scripted LLM.

Proves: ``start`` prints each turn and the summary (exit 0) and a bad agent gives one ``Error:``
line and exit 2; ``agents``; ``list``/``status`` (usage per agent and per round); ``watch`` streams
each turn when it finishes, in the agent's configured colour, with a progress line on a terminal;
``cancel`` aborts the turn in flight within 2 s, sends no further model request and returns the
partial history (``--summarize`` lets the observer consolidate); a waiting ``start`` exits 3 when
its roundtable is cancelled; ``extend``; ``export`` md/json with ``-o`` (also after a daemon
restart, from S2's messages); ``config`` masks the password and names a bad key; ``doctor``;
toasts on start, failure and conclusion.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
from pathlib import Path
from typing import Any

import pytest

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.opencode_server import MODEL_IDS
from roundtabled.offline.scripted_actions import Hang, HttpError, Text
from roundtabled.offline.scripted_llm import ScriptedLLM

from .cli_helpers import RT_BIN, assert_clean_error, cli, cli_env, spawn
from .conftest import RT, roundtable_config
from .edge_helpers import Toasts, record_cancels, wait_for

PM_COLOUR = "\x1b[1;38;2;52;152;219m"  # #3498db
DEV_COLOUR = "\x1b[1;38;2;46;204;113m"  # #2ecc71

pytestmark = pytest.mark.both_majors  # also under --opencode-major 2 (tests/conftest.py)


class TerminalWatch:
    """``roundtabled watch S2`` on a pseudo-terminal (``TERM=xterm``: colours and the progress
    line on) while in its ``async with``; :attr:`buf` collects what it prints as it arrives."""

    def __init__(self, rt: RT, s2: str) -> None:
        self.rt = rt
        self.s2 = s2
        self.buf = bytearray()
        self._master = -1
        self._proc: asyncio.subprocess.Process | None = None

    def _read(self) -> None:
        with contextlib.suppress(OSError):
            self.buf.extend(os.read(self._master, 65536))

    async def __aenter__(self) -> TerminalWatch:
        self._master, slave = pty.openpty()
        self._proc = await asyncio.create_subprocess_exec(
            str(RT_BIN),
            "watch",
            self.s2,
            env=cli_env(self.rt, TERM="xterm"),
            stdout=slave,
            stderr=slave,
            cwd=self.rt.directory,
        )
        os.close(slave)
        os.set_blocking(self._master, False)
        asyncio.get_running_loop().add_reader(self._master, self._read)
        return self

    async def wait(self, timeout: float = 60) -> int:
        """The exit code once ``watch`` ends (within ``timeout`` s), with all it printed read."""
        assert self._proc is not None
        code = await asyncio.wait_for(self._proc.wait(), timeout)
        await asyncio.sleep(0.2)
        self._read()
        return code

    @property
    def text(self) -> str:
        return self.buf.decode(errors="replace")

    async def __aexit__(self, *exc: object) -> None:
        asyncio.get_running_loop().remove_reader(self._master)
        os.close(self._master)
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()


def script_debate(rt: RT, rounds: int = 1, agents: tuple[str, ...] = ("pm", "dev")) -> None:
    for r in range(1, rounds + 1):
        for a in agents:
            rt.llm.script(Text(text=f"{a.upper()} round {r}: my position."), agent=a)
    rt.llm.script(Text(text="SUMMARY: the panel agrees."), agent=OBSERVER_AGENT)


# ------------------------------------------------------------------------------------------------
# start / agents
# ------------------------------------------------------------------------------------------------


async def test_start_prints_each_turn_and_the_summary_and_exits_0(rt: RT) -> None:
    script_debate(rt, rounds=2)
    run = await cli(
        rt,
        "start",
        *(await rt.parent_args()),
        "--agents",
        "pm,dev",
        "--rounds",
        "2",
        "--directory",
        rt.directory,
        "Split the monolith?",
    )
    assert run.code == 0, run
    assert run.err.startswith("Roundtable ses_")
    assert run.err.splitlines()[1].startswith("Project: "), run.err  # which project it used
    heads = [line for line in run.out.splitlines() if line.startswith("── ")]
    assert heads[:4] == [
        "── pm · round 1 ──",
        "── dev · round 1 ──",
        "── pm · round 2 ──",
        "── dev · round 2 ──",
    ]
    assert "DEV round 2: my position." in run.out
    assert "SUMMARY: the panel agrees." in run.out
    assert run.out.count("SUMMARY: the panel agrees.") == 1  # not printed twice


async def test_the_result_carries_a_usage_footer_unless_it_is_turned_off(rt: RT) -> None:
    script_debate(rt)
    run = await cli(
        rt,
        "start",
        *(await rt.parent_args()),
        "--agents",
        "pm,dev",
        "--directory",
        rt.directory,
        "footer",
    )
    assert run.code == 0, run
    footer = [line for line in run.out.splitlines() if line.startswith("Usage — ")]
    assert len(footer) == 1, run.out
    assert "pm: " in footer[0] and "dev: " in footer[0] and "total: " in footer[0]

    await rt.restart_daemon(usage_footer=False)
    script_debate(rt)
    run = await cli(
        rt,
        "start",
        *(await rt.parent_args()),
        "--agents",
        "pm,dev",
        "--directory",
        rt.directory,
        "no footer",
    )
    assert run.code == 0, run
    assert "SUMMARY: the panel agrees." in run.out
    assert not [line for line in run.out.splitlines() if line.startswith("Usage — ")]


async def test_start_reads_a_long_topic_from_a_file(rt: RT, tmp_path: Path) -> None:
    """``@FILE``: a multi-line topic that would not survive a shell argument reaches the seats."""
    script_debate(rt)
    topic = tmp_path / "topic.md"
    topic.write_text("Split the monolith?\n\n- payments first\n- ledger last\n", encoding="utf-8")
    run = await cli(
        rt,
        "start",
        *(await rt.parent_args()),
        "--agents",
        "pm,dev",
        "--directory",
        rt.directory,
        f"@{topic}",
    )
    assert run.code == 0, run
    first = rt.llm.requests_for(kind="turn")[0]
    assert "- payments first\n- ledger last" in first.last_user_text
    missing = await cli(
        rt, "start", *(await rt.parent_args()), "--agents", "pm,dev", f"@{tmp_path / 'none.md'}"
    )
    assert_clean_error(missing, 2, "prompt", "none.md", "@FILE")


async def test_start_with_an_unknown_agent_prints_one_error_and_exits_2(rt: RT) -> None:
    run = await cli(
        rt,
        "start",
        *(await rt.parent_args()),
        "--agents",
        "pm,nobody",
        "--directory",
        rt.directory,
        "topic",
    )
    assert_clean_error(run, 2, "nobody", "Available agents:", "pm")
    assert rt.llm.requests == []


async def test_start_without_a_daemon_says_how_to_start_it(rt: RT) -> None:
    env = cli_env(rt, ROUNDTABLED_URL="http://127.0.0.1:9")
    run = await cli(rt, "start", "--agents", "pm,dev", "topic", env=env)
    assert_clean_error(run, 1, "not running", "roundtabled serve")


async def test_agents_lists_the_seatable_agents_with_colours(rt: RT) -> None:
    run = await cli(rt, "agents", "--directory", rt.directory)
    assert run.code == 0, run
    assert run.out.startswith("Available agents: ")
    names = run.out.splitlines()[0].split(": ", 1)[1].strip().split(", ")
    assert {"pm", "dev", "rv"} <= set(names)
    assert OBSERVER_AGENT not in names  # hidden
    # then one row per agent: debaters (●) before OpenCode's built-ins (○), with mode and model
    rows = [line for line in run.out.splitlines() if line[:1] in ("●", "○")]
    pm = next(r for r in rows if r.split()[1] == "pm")
    assert pm.startswith("● ") and "scripted/" in pm and "#3498db" in pm.lower()
    build = next(r for r in rows if r.split()[1] == "build")
    assert build.startswith("○ ") and "primary" in build
    assert rows.index(pm) < rows.index(build)
    run = await cli(rt, "agents", "--json", "--directory", rt.directory)
    agents = {a["name"]: a for a in json.loads(run.out)}
    assert agents["pm"]["color"].lower() == "#3498db"
    assert set(agents["pm"]) == {"name", "description", "mode", "color", "model", "native"}
    assert agents["pm"]["native"] is False and agents["build"]["native"] is True


# ------------------------------------------------------------------------------------------------
# list / status / export
# ------------------------------------------------------------------------------------------------


async def test_list_status_and_export_show_the_debate_with_usage(
    rt_factory: Any, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    rt: RT = await rt_factory(
        roundtable_config(
            scripted_llm,
            models={m: {"cost": {"input": 3, "output": 15}} for m in MODEL_IDS},
        )
    )
    script_debate(rt, rounds=2)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Split the monolith?", rounds=2)
    await rt.result(s2)

    run = await cli(rt, "list")
    assert run.code == 0, run
    row = next(line for line in run.out.splitlines() if line.startswith(s2))
    # By its end reason and the rounds run in full, as its result says (Status: completed, 2/2).
    assert " completed " in row and "2/2" in row and "Split the monolith?" in row
    rows = json.loads((await cli(rt, "list", "--json")).out)
    assert rows[0]["sessionID"] == s2

    run = await cli(rt, "status", s2)
    assert run.code == 0, run
    assert f"Roundtable {s2}" in run.out
    assert "phase:    done (completed)" in run.out
    assert "pm → dev" in run.out
    usage_lines = [line for line in run.out.splitlines() if line.strip().startswith("usage")]
    labels = [
        line.split()[1] + (" " + line.split()[2] if line.split()[1] == "round" else "")
        for line in usage_lines
    ]
    assert labels == ["pm", "dev", OBSERVER_AGENT, "round 1", "round 2", "total"]
    assert all("$0.0000" not in line for line in usage_lines)  # cost is configured
    st = json.loads((await cli(rt, "status", "--json", s2)).out)
    assert set(st["usage"]["perRound"]) == {"1", "2"}
    # 2.x lists no model price: the cost is unknown there (None), never a 0 that looks measured
    priced = rt.major == 1
    assert st["usage"]["total"]["cost"] > 0 if priced else st["usage"]["total"]["cost"] is None

    md_file = tmp_path / "debate.md"
    run = await cli(rt, "export", s2, "--format", "md", "-o", str(md_file))
    assert run.code == 0, run
    md = md_file.read_text()
    assert md.startswith("# Split the monolith?\n")  # the title as every view shows it
    for head in ("### pm · round 1", "### dev · round 1", "### pm · round 2", "### dev · round 2"):
        assert head in md
    assert "PM round 2: my position." in md and "SUMMARY: the panel agrees." in md
    assert "| **total** |" in md and "| round | input | output | cost (USD) |" in md

    json_file = tmp_path / "debate.json"
    run = await cli(rt, "export", s2, "--format", "json", "-o", str(json_file))
    assert run.code == 0, run
    data = json.loads(json_file.read_text())
    assert data["topic"] == "Split the monolith?"
    assert [(t["agent"], t["round"]) for t in data["turns"] if t["kind"] == "turn"] == [
        ("pm", 1),
        ("dev", 1),
        ("pm", 2),
        ("dev", 2),
    ]
    assert data["summary"]
    assert data["usage"]["total"]["cost"] > 0 if priced else data["usage"]["total"]["cost"] is None

    # to stdout, and after a daemon restart (read back from S2's messages)
    await rt.restart_daemon()
    run = await cli(rt, "export", s2, "--format", "json", env=cli_env(rt))
    assert run.code == 0, run
    again = json.loads(run.out)
    assert [t["response"] for t in again["turns"]] == [t["response"] for t in data["turns"]]


async def test_status_and_export_of_an_unknown_session_exit_2(rt: RT) -> None:
    assert_clean_error(await cli(rt, "status", "ses_doesnotexist"), 2, "ses_doesnotexist")
    assert_clean_error(await cli(rt, "export", "not-a-session"), 2, "SES must be a session id")


# ------------------------------------------------------------------------------------------------
# watch
# ------------------------------------------------------------------------------------------------


async def test_watch_streams_each_turn_when_it_finishes_in_the_agents_colour(rt: RT) -> None:
    rt.llm.script(Text(text="PM speaks first."), agent="pm")
    # dev's turn takes a while: pm's turn must be on screen long before the debate ends
    rt.llm.script(Text(text="DEV answers slowly.", first_byte_delay=4.0), agent="dev")
    rt.llm.script(Text(text="SUMMARY: done."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Watch me")
    await rt.llm.wait_for_requests(1, 30, agent="pm")

    async with TerminalWatch(rt, s2) as watch:  # a terminal: colours and the progress line
        await wait_for(lambda: b"PM speaks first." in watch.buf, 30, "pm's turn in watch")
        # pm's turn is shown while dev is still speaking
        _, st = await rt.api("GET", f"/v1/roundtables/{s2}")
        assert st["phase"] == "active" and st["agent"] == "dev", st
        await wait_for(lambda: b"dev is speaking" in watch.buf, 10, "the progress line")
        code = await watch.wait()
    text = watch.text
    assert code == 0
    assert f"── {PM_COLOUR}pm\x1b[0m · round 1 ──" in text
    assert f"── {DEV_COLOUR}dev\x1b[0m · round 1 ──" in text
    assert "round 1/1 · dev is speaking · " in text
    assert (
        text.index("PM speaks first.")
        < text.index("DEV answers slowly.")
        < text.index("SUMMARY: done.")
    )


async def test_watch_through_a_pipe_streams_each_turn_without_colour_codes(rt: RT) -> None:
    rt.llm.script(Text(text="PM speaks first."), agent="pm")
    rt.llm.script(Text(text="DEV answers slowly.", first_byte_delay=4.0), agent="dev")
    rt.llm.script(Text(text="SUMMARY: done."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Pipe me")
    proc = await spawn(rt, "watch", s2)
    assert proc.stdout is not None and proc.stderr is not None
    seen: list[str] = []
    try:
        while "PM speaks first." not in "".join(seen):
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line, "watch ended before pm's turn"
            seen.append(line.decode())
        # a pipe gets pm's turn while dev is still speaking (no block buffering)
        _, st = await rt.api("GET", f"/v1/roundtables/{s2}")
        assert st["phase"] == "active" and st["agent"] == "dev", st
        rest = await asyncio.wait_for(proc.stdout.read(), 60)
        err = await proc.stderr.read()
        code = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
    out = "".join(seen) + rest.decode()
    assert code == 0
    assert "\x1b[" not in out + err.decode()
    assert "── pm · round 1 ──" in out and "SUMMARY: done." in out


# ------------------------------------------------------------------------------------------------
# cancel / extend
# ------------------------------------------------------------------------------------------------


async def test_cancel_aborts_the_turn_within_2s_without_another_model_request(rt: RT) -> None:
    rt.llm.script(Text(text="PM finished its turn."), agent="pm")
    rt.llm.script(Hang(), agent="dev")
    s2 = await rt.start(agents=["pm", "dev"], prompt="Cancel me", rounds=2)
    await rt.llm.wait_for_requests(1, 30, agent="dev")

    called = record_cancels(rt)
    run = await cli(rt, "cancel", s2)
    assert run.code == 0, run
    dev_req = next(r for r in rt.llm.requests if r.agent == "dev")
    await wait_for(lambda: dev_req.disconnected, 5, "the dev request to be aborted")
    assert dev_req.disconnected_at is not None
    assert dev_req.disconnected_at - called[0] < 2.0  # from the daemon receiving the cancel

    # what the cancel did and the result's head (not the partial history), no observer request
    assert run.out.startswith(f"Cancelled roundtable {s2} in round ")
    assert "── pm · round 1 ──" not in run.out
    await rt.settled(s2)
    assert [r.agent for r in rt.llm.requests_for(session=s2)] == ["pm", "dev"]
    st = json.loads((await cli(rt, "status", "--json", s2)).out)
    assert st["endReason"] == "cancelled"
    # a second cancel: nothing active any more
    assert_clean_error(await cli(rt, "cancel", s2), 2, s2)


async def test_cancel_summarize_lets_the_observer_consolidate(rt: RT) -> None:
    rt.llm.script(Text(text="PM finished its turn."), agent="pm")
    rt.llm.script(Hang(), agent="dev")
    rt.llm.script(Text(text="SUMMARY of the partial debate."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Cancel and summarize", rounds=2)
    await rt.llm.wait_for_requests(1, 30, agent="dev")
    run = await cli(rt, "cancel", "--summarize", s2)
    assert run.code == 0, run
    assert "SUMMARY of the partial debate." in run.out
    agents = [r.agent for r in rt.llm.requests_for(session=s2)]
    assert agents == ["pm", "dev", OBSERVER_AGENT]


async def test_a_waiting_start_exits_3_when_its_roundtable_is_cancelled(rt: RT) -> None:
    rt.llm.script(Text(text="PM finished its turn."), agent="pm")
    rt.llm.script(Hang(), agent="dev")
    start = asyncio.create_task(
        cli(
            rt,
            "start",
            *(await rt.parent_args()),
            "--agents",
            "pm,dev",
            "--directory",
            rt.directory,
            "long one",
        )
    )
    await rt.llm.wait_for_requests(1, 60, agent="dev")
    s2 = str(next(r for r in rt.llm.requests if r.agent == "dev").session_id)
    cancel = await cli(rt, "cancel", s2)
    assert cancel.code == 0, cancel
    run = await asyncio.wait_for(start, 30)
    assert run.code == 3, run
    assert "PM finished its turn." in run.out
    assert "cancel" in run.out.lower()


async def test_extend_continues_a_concluded_roundtable(rt: RT) -> None:
    script_debate(rt)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Monolith?")
    await rt.result(s2)
    rt.llm.script(Text(text="PM on costs."), agent="pm")
    rt.llm.script(Text(text="DEV on costs."), agent="dev")
    rt.llm.script(Text(text="SUMMARY 2: costs agreed."), agent=OBSERVER_AGENT)
    run = await cli(rt, "extend", s2, "--rounds", "1", "Continue: what about costs?")
    assert run.code == 0, run
    assert "── pm · round 2 ──" in run.out and "── dev · round 2 ──" in run.out
    assert "SUMMARY 2: costs agreed." in run.out
    agents = [r.agent for r in rt.llm.requests_for(session=s2)]
    assert agents == ["pm", "dev", OBSERVER_AGENT, "pm", "dev", OBSERVER_AGENT]


# ------------------------------------------------------------------------------------------------
# toasts
# ------------------------------------------------------------------------------------------------


@pytest.mark.only_1x(
    "toasts over HTTP: 2.x has no route that shows a toast (POST /tui/show-toast answers 405) nor"
    " a /global/event stream to read one from"
)
async def test_toasts_on_start_each_failure_and_conclusion(rt: RT) -> None:
    async with Toasts(rt) as listener:
        toasts = listener.items
        rt.llm.script(Text(text="PM ok."), agent="pm")
        rt.llm.script(HttpError(status=400, message="bad request for dev"), agent="dev")
        rt.llm.script(Text(text="SUMMARY with one failure."), agent=OBSERVER_AGENT)
        run = await cli(
            rt,
            "start",
            *(await rt.parent_args()),
            "--agents",
            "pm,dev",
            "--directory",
            rt.directory,
            "toasts",
        )
        assert run.code == 0, run
        await wait_for(
            lambda: any("conclu" in str(t.get("message")).lower() for t in toasts),
            10,
            "the conclusion toast",
        )
    variants = [t.get("variant") for t in toasts]
    messages = " | ".join(str(t.get("message")) for t in toasts)
    assert variants[0] == "info" and "started" in str(toasts[0]["message"]).lower(), toasts
    assert "error" in variants or "warning" in variants, toasts
    assert "dev" in messages.lower()
    assert variants[-1] in ("success", "info") and "conclu" in str(toasts[-1]["message"]).lower()


# ------------------------------------------------------------------------------------------------
# config / doctor
# ------------------------------------------------------------------------------------------------


async def test_config_prints_the_effective_settings_with_the_password_masked(rt: RT) -> None:
    env = cli_env(rt, OPENCODE_SERVER_PASSWORD="s3cret-pass", ROUNDTABLED_TURN_TIMEOUT="42")
    cfg_dir = Path(rt.settings_env["XDG_CONFIG_HOME"]) / "roundtabled"
    (cfg_dir / "config.toml").write_text('loop_threshold = 0.5\nlog_format = "json"\n')
    run = await cli(rt, "config", env=env)
    assert run.code == 0, run
    assert "s3cret-pass" not in run.out + run.err
    data = json.loads(run.out)
    assert data["server_password"] == "********"
    assert data["turn_timeout"] == 42.0  # environment
    assert data["loop_threshold"] == 0.5  # TOML file
    assert data["server_url"] == rt.server.url
    assert data["token_file"] == str(cfg_dir / "token")

    bad = await cli(rt, "config", env=cli_env(rt, ROUNDTABLED_TURN_TIMEOUT="soon"))
    assert_clean_error(bad, 2, "ROUNDTABLED_TURN_TIMEOUT", "'soon'", "1 to 86400")
    (cfg_dir / "config.toml").write_text('permission_policy = "maybe"\n')
    bad = await cli(rt, "config", env=cli_env(rt))
    assert_clean_error(bad, 2, "permission_policy", "'maybe'", "reject, allow-once, ask")


@pytest.mark.only_1x(
    "doctor's checks (server health, events, tools, agents) read the 1.x routes; on 2.x it names"
    " the major and says they were not run"
)
async def test_doctor_passes_every_check_against_a_running_daemon_and_server(rt: RT) -> None:
    run = await cli(rt, "doctor")
    assert run.code == 0, run.out + run.err
    lines = [line for line in run.out.splitlines() if line[:1] in ("✓", "✗", "-")]
    names = [line.split()[1] for line in lines]
    assert names == ["config", "server", "auth", "events", "tools", "agents", "daemon"]
    assert all(line.startswith("✓") for line in lines), run.out
    assert "OpenCode 1." in run.out and "All checks passed." in run.out


@pytest.mark.only_1x(
    "doctor's checks (server health, events, tools, agents) read the 1.x routes; on 2.x it names"
    " the major and says they were not run"
)
async def test_doctor_names_what_is_wrong_with_a_fix(rt: RT) -> None:
    env = cli_env(rt, ROUNDTABLED_URL="http://127.0.0.1:9")
    run = await cli(rt, "doctor", env=env, cwd=str(rt.tmp))
    assert run.code == 1, run
    out = run.out
    assert "✓ server" in out
    assert "✗ daemon" in out and "roundtabled serve" in out
    # outside the project and without a global install, the tools are missing
    assert "✗ tools" in out and "install-tool" in out

    env = cli_env(rt, ROUNDTABLED_SERVER_URL="http://127.0.0.1:9")
    run = await cli(rt, "doctor", env=env)
    assert run.code == 1
    assert "✗ server" in run.out and "opencode serve" in run.out
    assert "- auth" in run.out
    # the daemon is connected to another server than this shell's configuration
    assert "✗ daemon" in run.out and rt.server.url in run.out


async def test_the_cli_reaches_a_daemon_on_a_unix_socket_control_host(rt: RT) -> None:
    # README: control_host = unix:/path; the CLI used to build http://unix:/path:4747 from it.
    sock = rt.tmp / "rt.sock"
    await rt.restart_daemon(control_host=f"unix:{sock}")
    env = cli_env(rt, ROUNDTABLED_CONTROL_HOST=f"unix:{sock}")
    del env["ROUNDTABLED_URL"]
    run = await cli(rt, "list", env=env)
    assert run.code == 0 and "Traceback" not in run.err, run
    run = await cli(rt, "list", env=cli_env(rt, ROUNDTABLED_URL=f"unix:{sock}"))
    assert run.code == 0 and "Traceback" not in run.err, run
