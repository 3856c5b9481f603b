"""The offline demo (``python -m roundtabled.demo``, what ``scripts/demo`` runs) as a new
user runs it: the transcript it names still exists after the demo, and ``--serve`` leaves a server,
the offline model and the daemon up for trying the CLI by hand with the variables it prints."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from . import cli_helpers

PY = sys.executable
RT_BIN = str(cli_helpers.RT_BIN)  # as the demo prints it


def _env(tmp_path: Path) -> dict[str, str]:
    env = cli_helpers.user_shell_env()
    env["TMPDIR"] = str(tmp_path)  # the demo's temporary directory and its transcript
    return env


async def _demo(tmp_path: Path, *flags: str) -> asyncio.subprocess.Process:
    """``python -m roundtabled.demo FLAGS`` started, its stderr into its stdout (piped)."""
    return await asyncio.create_subprocess_exec(
        PY,
        "-m",
        "roundtabled.demo",
        *flags,
        env=_env(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


ROOT = Path(__file__).resolve().parents[2]
V2_VERSION = json.loads((ROOT / "opencode-v2" / "package.json").read_text())["dependencies"][
    "@opencode/cli"
]
V1_VERSION = json.loads((ROOT / "package.json").read_text())["dependencies"]["opencode-ai"]
TOUR = [
    "list",
    "status",
    "export",
    "start --dry-run",
    "extend",
    "start --until converged",
    "start --side",
    "start --context recent",
    "start --opening independent",
]
"""The options the demo shows after its debate (``roundtabled.demo.tour``), in order."""


def _tour_outcome(text: str) -> tuple[list[str], list[str]]:
    """(shown working, not run yet) from the demo's summary lines."""
    worked = re.search(r"^demo: on OpenCode \S+, shown working: (.*)$", text, re.M)
    assert worked, text
    not_yet = re.search(r"^demo: on OpenCode \S+, not run yet \(refused above\): (.*)$", text, re.M)
    return worked.group(1).split(", "), not_yet.group(1).split(", ") if not_yet else []


async def test_the_demo_runs_on_opencode_2_by_default_and_shows_every_option_working(
    tmp_path: Path,
) -> None:
    """``scripts/demo`` with no flag: OpenCode 2.x, its version printed, the debate concluded,
    and every option of the tour shown working on 2.x (none refused as not on OpenCode 2 yet),
    exit 0."""
    proc = await _demo(tmp_path)
    out, _ = await asyncio.wait_for(proc.communicate(), 240)
    text = out.decode()
    assert proc.returncode == 0, text
    assert f"demo: running on OpenCode {V2_VERSION} (major 2; " in text, text
    assert re.search(rf"OpenCode {re.escape(V2_VERSION)}, exit 0$", text, re.M), text
    assert "Status: completed, 2/2 rounds" in text and "── verdict ──" in text
    assert "decision: keep a modular monolith" in text
    assert _tour_outcome(text) == (["start", *TOUR], []), text
    assert "not on OpenCode 2 yet" not in text, text
    transcript = re.search(r"demo: transcript written to (\S+)", text)
    assert transcript is not None and Path(transcript.group(1)).is_file(), text
    assert "Traceback" not in text


async def test_the_demo_on_opencode_1_keeps_the_transcript_it_names(tmp_path: Path) -> None:
    """``--opencode 1``: the 1.x path, its version printed, every option of the tour shown
    working, and the transcript it names still exists after the demo."""
    proc = await _demo(tmp_path, "--opencode", "1")
    out, _ = await asyncio.wait_for(proc.communicate(), 240)
    text = out.decode()
    assert proc.returncode == 0, text
    assert f"demo: running on OpenCode {V1_VERSION} (major 1; " in text, text
    assert _tour_outcome(text) == (["start", *TOUR], []), text
    m = re.search(r"demo: transcript written to (\S+)", text)
    assert m, text
    transcript = Path(m.group(1))
    assert transcript.is_file(), text  # still there after the demo removed its work directory
    md = transcript.read_text()
    assert "### pm · round 1" in md and "Executive summary" in md
    work = [p for p in tmp_path.iterdir() if p.is_dir() and p.name.startswith("roundtabled-demo-")]
    assert work == [], work  # the rest was removed, as it says


@pytest.mark.parametrize("value", ["3", "junk", ""])
def test_a_bad_opencode_major_is_one_error_line(tmp_path: Path, value: str) -> None:
    import subprocess

    proc = subprocess.run(
        [PY, "-m", "roundtabled.demo", "--opencode", value],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"Error: --opencode = {value!r}; expected 1 or 2 (the OpenCode major to run the demo "
        "on: 2 is @opencode/cli, the default; 1 is opencode-ai 1.x)"
    ]
    assert proc.stdout == ""


async def test_demo_serve_lets_a_user_drive_the_cli_by_hand(tmp_path: Path) -> None:
    proc, lines = await _serve_ready(tmp_path, keep=False)
    try:
        export = next(line for line in lines if line.strip().startswith("export "))
        env = _env(tmp_path)
        for assignment in shlex.split(export.strip())[1:]:
            key, _, value = assignment.partition("=")
            env[key] = value
        start = next(line for line in lines if " start --agents pm,dev,rv" in line)
        args = shlex.split(start.strip())
        assert args[0] == RT_BIN
        run = await asyncio.create_subprocess_exec(
            *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(run.communicate(), 120)
        assert run.returncode == 0, (out, err)
        # OpenCode 2.x (the default): the start waits for the result it cannot stream
        assert "Status: completed, 2/2 rounds" in out.decode(), (out, err)
        assert "── verdict ──" in out.decode()
        assert "--parent ses_" in start, start  # 2.x runs a roundtable under a session
        # The eval line runs on 2.x as printed (once it was "not on OpenCode 2 yet"); one
        # question of one protocol keeps it short.
        printed = next(line for line in lines if " eval --agents pm,dev,rv" in line)
        assert "not on OpenCode 2 yet" not in "".join(lines)
        out_dir = tmp_path / "eval"
        run = await asyncio.create_subprocess_exec(
            *shlex.split(printed.strip()),
            *("--limit", "1", "--protocols", "single", "--out", str(out_dir)),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(run.communicate(), 180)
        assert run.returncode == 0, (out, err)
        report = (out_dir / "report.md").read_text()
        assert re.search(r"^- OpenCode 2\.", report, re.M), report
        assert re.search(r"^\| single:pm \| [01]/1 = ", report, re.M), report
    finally:
        if proc.returncode is None:
            # SIGTERM (a `kill`, a timeout) cleans up like Ctrl-C does
            proc.send_signal(signal.SIGTERM)
            rest, _ = await asyncio.wait_for(proc.communicate(), 30)
            lines.append(rest.decode())
    assert proc.returncode == 0, "".join(lines)
    assert "Traceback" not in "".join(lines)
    server = re.search(r"demo: OpenCode (http://\S+)", "".join(lines))
    assert server, lines
    with pytest.raises(aiohttp.ClientConnectionError):  # the demo's server was stopped
        async with aiohttp.ClientSession() as http, http.get(server.group(1) + "/global/health"):
            pass


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Stop a demo a failed assertion left running (SIGTERM: its own clean-up)."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), 30)


async def _serve_ready(
    tmp_path: Path, *flags: str, keep: bool = True
) -> tuple[asyncio.subprocess.Process, list[str]]:
    """``demo --serve FLAGS`` (with ``--keep`` unless told otherwise) started and ready (its
    instructions printed): the process and its lines. A demo that never gets ready is stopped."""
    proc = await _demo(tmp_path, "--serve", *flags, *(["--keep"] if keep else []))
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        while not any("Ctrl-C here stops everything" in line for line in lines):
            raw = await asyncio.wait_for(proc.stdout.readline(), 120)
            if not raw:
                pytest.fail("demo --serve ended early:\n" + "".join(lines))
            lines.append(raw.decode())
    except BaseException:
        await _stop(proc)
        raise
    return proc, lines


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie child of init counts as gone only once reaped; /proc says which.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z")


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (read from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().split(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


async def _server_down(url: str) -> None:
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as http, http.get(url + "/global/health"):
            pass


async def test_the_export_line_makes_config_and_presets_describe_the_demo_daemon(
    tmp_path: Path,
) -> None:
    """``roundtabled config`` and ``presets`` under the demo's ``export`` line described
    ``~/.config/roundtabled/config.toml`` and port 4747, not the daemon the demo runs."""
    proc, lines = await _serve_ready(tmp_path)
    try:
        export = next(line for line in lines if line.strip().startswith("export "))
        env = _env(tmp_path)
        env["HOME"] = str(tmp_path / "home")  # a user config, if any, must not be what is read
        for assignment in shlex.split(export.strip())[1:]:
            key, _, value = assignment.partition("=")
            env[key] = value
        assert list(env).count("ROUNDTABLED_CONFIG") == 1
        server = re.search(r"demo: OpenCode (http://\S+)", "".join(lines))
        control = re.search(r"control API http://127\.0\.0\.1:(\d+)", "".join(lines))
        assert server and control, lines

        async def run(*argv: str) -> str:
            p = await asyncio.create_subprocess_exec(
                RT_BIN, *argv, env=env, stdout=asyncio.subprocess.PIPE
            )
            out, _ = await asyncio.wait_for(p.communicate(), 60)
            assert p.returncode == 0, out
            return out.decode()

        import json

        config = json.loads(await run("config"))
        assert config["control_port"] == int(control.group(1))
        assert config["server_url"] == server.group(1)
        assert await run("presets") == "demo: agents=pm,dev,rv rounds=2\n"
        assert "pm" in await run("agents")  # the same shell reaches the daemon itself
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), 30)


async def test_demo_serve_stops_everything_on_a_hang_up(tmp_path: Path) -> None:
    """SIGHUP (the terminal closed) left ``opencode serve`` running with parent 1."""
    proc, lines = await _serve_ready(tmp_path)
    children = _children(proc.pid)
    assert children, "the demo started no processes"
    proc.send_signal(signal.SIGHUP)
    try:
        rest, _ = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        await _stop(proc)
    text = "".join(lines) + rest.decode()
    assert proc.returncode == 0, text
    assert "demo: SIGHUP (the terminal closed): stopping OpenCode and roundtabled" in text
    assert "Traceback" not in text
    assert all(_pid_gone(pid) for pid in children), (children, text)
    server = re.search(r"demo: OpenCode (http://\S+)", text)
    assert server, text
    await _server_down(server.group(1))


async def test_demo_serve_says_when_its_daemon_dies_and_stops_the_rest(tmp_path: Path) -> None:
    """``--serve`` did not notice its own daemon's death and went on waiting."""
    proc, lines = await _serve_ready(tmp_path)
    text = "".join(lines)
    daemon = re.search(r"roundtabled serve is up \(pid (\d+),", text)
    try:
        assert daemon, text
        os.kill(int(daemon.group(1)), signal.SIGKILL)
        rest, _ = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        await _stop(proc)
    text += rest.decode()
    assert proc.returncode == 1, text
    assert "demo: roundtabled serve exited on its own (exit code -9); stopping the rest." in text
    assert "Traceback" not in text
    server = re.search(r"demo: OpenCode (http://\S+)", text)
    assert server, text
    await _server_down(server.group(1))


async def test_demo_serve_build_convenes_a_roundtable_when_asked(tmp_path: Path) -> None:
    """The offline ``build`` agent answered "convene a roundtable with pm, dev and rv about …"
    with filler, so the TUI path could not be tried offline. Asked as a person asks in the TUI
    (a prompt to ``build`` on the demo's real server), it calls the ``roundtable`` tool, the
    daemon runs the debate, and ``build`` relays the result."""
    proc, lines = await _serve_ready(tmp_path, "--opencode", "1")  # 1.x's HTTP API below
    try:
        text = "".join(lines)
        server = re.search(r"demo: OpenCode (http://\S+)", text)
        project = re.search(r"\(project (\S+)\)", text)
        assert server and project, text
        assert "In the TUI ask: convene a roundtable with pm, dev and rv about" in text
        base = server.group(1)
        async with aiohttp.ClientSession() as http:
            q = {"directory": project.group(1)}
            async with http.post(base + "/session", params=q, json={}) as r:
                s1 = (await r.json())["id"]
            ask = "convene a roundtable with pm, dev and rv about splitting the payments monolith"
            async with http.post(
                f"{base}/session/{s1}/prompt_async",
                params=q,
                json={"agent": "build", "parts": [{"type": "text", "text": ask}]},
            ) as r:
                assert r.status < 300, await r.text()

            async def replies() -> list[dict[str, object]]:
                async with http.get(f"{base}/session/{s1}/message", params=q) as r:
                    return [
                        p
                        for m in await r.json()
                        if m["info"]["role"] == "assistant"
                        for p in m["parts"]
                    ]

            deadline = asyncio.get_running_loop().time() + 180
            relay = ""
            while not relay:
                assert asyncio.get_running_loop().time() < deadline, await replies()
                parts = await replies()
                relay = next(
                    (
                        str(p["text"])
                        for p in parts
                        if p["type"] == "text" and "The roundtable concluded" in str(p["text"])
                    ),
                    "",
                )
                await asyncio.sleep(0.5)
        calls = [p for p in parts if p["type"] == "tool" and p.get("tool") == "roundtable"]
        assert len(calls) == 1, parts
        state = calls[0]["state"]
        assert isinstance(state, dict) and state["status"] == "completed", state
        assert state["input"] == {
            "agents": ["pm", "dev", "rv"],
            "prompt": "splitting the payments monolith",
            "rounds": 2,
        }
        # The offline panel's decision on this topic (its seats agree in their own words).
        assert relay.startswith(
            "The roundtable concluded: keep what works and fix the worst part."
        ), relay
        assert "Consensus: unanimous." in relay
    finally:
        await _stop(proc)


async def test_the_demo_runs_on_a_local_openai_compatible_server(tmp_path: Path) -> None:
    """``--base-url URL --model NAME``: the demo writes the provider configuration and every
    model request of the debate reaches that server under that model name (here the scripted
    model stands in for llama.cpp's server)."""
    from roundtabled.offline.scripted_llm import ScriptedLLM

    llm = ScriptedLLM()
    await llm.start()
    try:
        # no /v1 in the URL: the demo adds it
        proc = await _demo(tmp_path, "--base-url", llm.url, "--model", "my-local")
        out, _ = await asyncio.wait_for(proc.communicate(), 240)
    finally:
        await llm.stop()
    text = out.decode()
    assert proc.returncode == 0, text
    assert f"using the local model my-local at {llm.url}/v1" in text
    turns = [r for r in llm.requests if r.kind == "turn"]
    assert len(turns) >= 7, text  # 3 seats × 2 rounds and the observer
    assert turns and all(r.model == "my-local" for r in llm.requests), {
        r.model for r in llm.requests
    }
    # the tour's debates of their own are not run on a real model, and it says so
    skipped = re.search(r"^demo: not run on your model \(.*\): (.*)$", text, re.M)
    assert skipped, text
    assert skipped.group(1).split(", ") == [
        "extend",
        "start --until converged",
        "start --side",
        "start --context recent",
        "start --opening independent",
    ]


def test_a_bad_demo_base_url_is_one_error_line(tmp_path: Path) -> None:
    import subprocess

    proc = subprocess.run(
        [PY, "-m", "roundtabled.demo", "--base-url", "ftp://x", "--model", "m"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "Error: --base-url = 'ftp://x'; expected http://host:port/v1 (an OpenAI-compatible server)"
    ]
