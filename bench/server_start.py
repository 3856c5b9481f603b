"""What a fresh private ``opencode serve`` costs a test: its start and its first model call.

Usage (from the repository root)::

    .venv/bin/python -m bench.server_start [--pairs N]

For each of ``--pairs`` (default 5) interleaved pairs, two fresh servers
(:class:`roundtabled.offline.opencode_server.OpenCodeServer`, scripted model) are started in new
temporary directories: one with the server's built-in plugins and LSP downloads on (the
variables that the harness sets removed again), one as the harness starts it. Per server, in
seconds: ``start`` (spawn → ``/global/health`` answers), ``first_call`` (``prompt_async`` of the
first prompt in a new session → the scripted model receives the request; the server loads the
directory's instance, its plugins and tools in between), ``stop`` (SIGTERM → exit). Prints one
JSON document: every sample and the median per variant. docs/testing.md quotes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from roundtabled.offline.opencode_server import OpenCodeServer, agent_prompts_of, offline_config
from roundtabled.offline.scripted_llm import ScriptedLLM

HARNESS_FLAGS = ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "OPENCODE_DISABLE_LSP_DOWNLOAD")


class _WithDefaults(OpenCodeServer):
    """The harness's server with the built-in plugins and LSP downloads left on."""

    def _environment(self) -> dict[str, str]:
        env = super()._environment()
        for key in HARNESS_FLAGS:
            env.pop(key, None)
        return env


async def _one(server_class: type[OpenCodeServer]) -> dict[str, float]:
    llm = ScriptedLLM()
    await llm.start(port=0)
    cfg = offline_config(llm.base_url)
    llm.agent_prompts.update(agent_prompts_of(cfg))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            server = server_class(Path(tmp), cfg)
            t0 = time.monotonic()
            await server.start()
            started = time.monotonic() - t0
            async with server.client() as http:
                async with http.post("/session", json={}) as resp:
                    sid = (await resp.json())["id"]
                body = {"agent": "pm", "parts": [{"type": "text", "text": "hello"}]}
                t1 = time.monotonic()
                async with http.post(f"/session/{sid}/prompt_async", json=body):
                    pass
                await llm.wait_for_requests(1, within=60)
                first_call = time.monotonic() - t1
            t2 = time.monotonic()
            await server.stop()
            return {"start": started, "first_call": first_call, "stop": time.monotonic() - t2}
    finally:
        await llm.stop()


async def _main(pairs: int) -> dict[str, Any]:
    samples: dict[str, list[dict[str, float]]] = {"defaults_on": [], "harness": []}
    for _ in range(pairs):
        samples["defaults_on"].append(await _one(_WithDefaults))
        samples["harness"].append(await _one(OpenCodeServer))
    medians = {
        variant: {k: round(statistics.median(s[k] for s in rows), 3) for k in rows[0]}
        for variant, rows in samples.items()
    }
    return {"pairs": pairs, "median_s": medians, "samples_s": samples}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.server_start")
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(_main(args.pairs)), indent=2))


if __name__ == "__main__":
    main()
