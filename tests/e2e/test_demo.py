"""The offline demo (``python -m roundtabled.service.demo``, what ``scripts/demo`` runs) as a new
user runs it: the transcript it names still exists after the demo, and ``--serve`` leaves a server,
the offline model and the daemon up for trying the CLI by hand with the variables it prints."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

PY = sys.executable
RT_BIN = str(Path(sys.executable).parent / "roundtabled")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ROUNDTABLED_", "OPENCODE_")) and k != "PYTHONUNBUFFERED"
    }
    env["TMPDIR"] = str(tmp_path)  # the demo's temporary directory and its transcript
    env["PYTHONIOENCODING"] = "utf-8"
    return env


async def test_the_demo_keeps_the_transcript_it_names(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        PY,
        "-m",
        "roundtabled.service.demo",
        env=_env(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 240)
    text = out.decode()
    assert proc.returncode == 0, text
    m = re.search(r"demo: transcript written to (\S+)", text)
    assert m, text
    transcript = Path(m.group(1))
    assert transcript.is_file(), text  # still there after the demo removed its work directory
    md = transcript.read_text()
    assert "### pm · round 1" in md and "Executive summary" in md
    work = [p for p in tmp_path.iterdir() if p.is_dir() and p.name.startswith("roundtabled-demo-")]
    assert work == [], work  # the rest was removed, as it says


async def test_demo_serve_lets_a_user_drive_the_cli_by_hand(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        PY,
        "-m",
        "roundtabled.service.demo",
        "--serve",
        env=_env(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        while not any("Ctrl-C here stops everything" in line for line in lines):
            raw = await asyncio.wait_for(proc.stdout.readline(), 120)
            if not raw:
                pytest.fail("demo --serve ended early:\n" + "".join(lines))
            lines.append(raw.decode())
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
        assert b"\xe2\x94\x80\xe2\x94\x80 rv \xc2\xb7 round 2" in out  # "── rv · round 2"
        assert b"Executive summary" in out
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


async def test_the_demo_runs_on_a_local_openai_compatible_server(tmp_path: Path) -> None:
    """``--base-url URL --model NAME``: the demo writes the provider configuration and every
    model request of the debate reaches that server under that model name (here the scripted
    model stands in for llama.cpp's server)."""
    from roundtabled.offline.scripted_llm import ScriptedLLM

    llm = ScriptedLLM()
    await llm.start()
    try:
        proc = await asyncio.create_subprocess_exec(
            PY,
            "-m",
            "roundtabled.service.demo",
            "--base-url",
            llm.url,  # no /v1: the demo adds it
            "--model",
            "my-local",
            env=_env(tmp_path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
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


def test_a_bad_demo_base_url_is_one_error_line(tmp_path: Path) -> None:
    import subprocess

    proc = subprocess.run(
        [PY, "-m", "roundtabled.service.demo", "--base-url", "ftp://x", "--model", "m"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "Error: --base-url = 'ftp://x'; expected http://host:port/v1 (an OpenAI-compatible server)"
    ]
