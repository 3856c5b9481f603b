"""``kill PID`` (SIGTERM) of ``python -m bench.eval_local`` in the middle of a measurement ended
that process at once and left its private ``opencode serve``, its ``roundtabled serve`` and
the running ``roundtabled eval`` behind (seen with ``kill`` of a run against llama.cpp's
server). Now a SIGTERM interrupts the eval as Ctrl-C does (it writes its partial report), lets
the roundtables in flight end (a second SIGTERM stops at once), and the daemon and the server
stop as on any other exit. Real server and daemon; the model is a
socket that never answers a model request (it lists its model when asked), so the eval is
mid-question when the signal comes."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from roundtabled.offline.opencode_server import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]


def processes_under(work: Path) -> list[int]:
    """Pids whose environment names ``work`` (the private servers' data: every child of the
    measurement has its XDG directories there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if str(work).encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


async def test_a_terminated_eval_local_leaves_no_server_or_daemon_running(tmp_path: Path) -> None:
    await terminate_mid_question(tmp_path)


async def terminate_mid_question(tmp_path: Path, *, sigint_ignored: bool = False) -> None:
    """Start a measurement of one question whose model never answers, SIGTERM it mid-question,
    check that it waits for the roundtable in flight with its servers up, SIGTERM it again and
    check that nothing of it runs. ``sigint_ignored``: started as a shell's ``cmd &`` starts it
    (SIGINT ignored, which every child inherits)."""
    asked = asyncio.Event()

    async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if (await reader.readline()).startswith(b"GET /v1/models"):
            # The eval's check that a model server runs there, before it starts: it does.
            body = b'{"data": [{"id": "local"}]}'
            head = f"HTTP/1.1 200 OK\r\ncontent-length: {len(body)}\r\n\r\n".encode()
            writer.write(head + body)
            await writer.drain()
            writer.close()
            return
        asked.set()  # a model request: the eval is mid-question
        await reader.read()  # held open until the client goes away
        writer.close()

    llm = await asyncio.start_server(never_answers, "127.0.0.1", free_port())
    port = llm.sockets[0].getsockname()[1]
    work = tmp_path / "servers"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.eval_local",
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
        "--model",
        "local",
        "--tasks",
        "arithmetic",
        "--questions",
        "1",
        "--work",
        str(work),
        "--",
        "--out",
        str(tmp_path / "out"),
        cwd=ROOT,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "HOME": str(tmp_path)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        if sigint_ignored
        else None,
    )
    try:
        await asyncio.wait_for(asked.wait(), 150)
        assert processes_under(work), "the measurement's servers were not found running"
        proc.send_signal(signal.SIGTERM)
        # The roundtable in flight (its model never answers) is let end: the servers keep
        # running and it says so; a second SIGTERM stops at once.
        assert proc.stderr is not None
        said: list[str] = []
        while not any("still running; waiting" in line for line in said):
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            assert line, "eval_local ended without waiting: " + "".join(said)[-2000:]
            said.append(line)
        assert processes_under(work), "the servers stopped under the roundtable in flight"
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode != 0
        assert "bench: logs in" in err.decode()  # the private server was stopped
        assert processes_under(work) == [], err.decode()[-2000:]
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        for pid in processes_under(work):
            os.kill(pid, signal.SIGKILL)
        llm.close()
