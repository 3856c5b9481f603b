"""Field failure (a new user's demo with a mistyped port): ``scripts/demo --base-url
http://127.0.0.1:1/v1 --model local --turn-timeout 5`` started the OpenCode server and the
daemon, and every seat read ``[cut off: timed out after 5 s]`` before an all-failed result
(exit 3) that never said the model server was not there; at the default 300 s a turn, fifteen
minutes. The demo now asks the server for its models first: nothing answering is one line naming
``--base-url``, exit 2, before anything starts."""

from __future__ import annotations

import asyncio
import sys

from roundtabled.offline.opencode_server import free_port
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.service import provider


async def test_nothing_listening_at_the_base_url_is_one_line_before_anything_starts() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "roundtabled.demo",
        "--base-url",
        url,
        "--model",
        "local",
        "--turn-timeout",
        "5",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 2, (out, err)
    assert len(lines) == 1 and lines[0].startswith(
        f"Error: --base-url {url}: no OpenAI-compatible server answers there ("
    ), lines
    assert b"opencode" not in out.lower(), out  # nothing was started


async def test_a_server_that_answers_passes_and_a_model_it_does_not_list_is_only_said() -> None:
    llm = ScriptedLLM()
    await llm.start()
    try:
        base = llm.url if llm.url.endswith("/v1") else llm.url.rstrip("/") + "/v1"
        note = await provider.probe(base, "local")
        assert note is None or "not 'local'" in note
    finally:
        await llm.stop()
