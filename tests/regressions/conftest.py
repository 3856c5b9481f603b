"""Shared helpers for the regression cases: failures seen in the field, replayed on the
real ``opencode serve`` with the scripted model.

Offers the end-to-end fixtures (``rt_factory``, ``rt``) to every regression file (pytest finds
fixtures through a conftest), so each gets the same environment as ``tests/e2e`` (whose
``cli_helpers.cli`` and ``edge_helpers.wait_for`` the regression files import). Helpers:

- ``cli_without_daemon`` (a fixture) runs the CLI in this process with no daemon to reach.
- :class:`LogCapture` collects the daemon's log records (the in-process daemon logs through
  :mod:`logging`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from roundtabled.cli import main
from roundtabled.offline.opencode_server import free_port
from tests.e2e import conftest as e2e_conftest
from tests.e2e.conftest import RT
from tests.fakes.proxy import STREAM_PATHS, FaultProxy, decode_frame, event_type

# The end-to-end fixtures, offered to every regression file (pytest looks for them here).
rt_factory = e2e_conftest.rt_factory
rt = e2e_conftest.rt


@pytest.fixture
def cli_without_daemon(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., tuple[int, str]]:
    """``run(*argv)``: ``roundtabled ARGV`` in this process (:func:`roundtabled.cli.main`) with no
    daemon to reach, its exit code and its stderr (stripped). The control port is an unused one,
    so a refusal that reaches this stderr came before any call."""
    monkeypatch.setenv("ROUNDTABLED_CONTROL_PORT", "9")

    def run(*argv: str) -> tuple[int, str]:
        code = main(list(argv))
        return code, capsys.readouterr().err.strip()

    return run


class LogCapture(logging.Handler):
    """Collects formatted ``roundtabled`` log records (use as a context manager)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._logger = logging.getLogger("roundtabled")
        self._level = self._logger.level

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> LogCapture:
        self._logger.addHandler(self)
        self._logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)

    def lines(self, min_level: int = logging.DEBUG) -> list[str]:
        """``LEVEL message`` of every record at or above ``min_level``."""
        return [f"{r.levelname} {r.getMessage()}" for r in self.records if r.levelno >= min_level]


def seat_turns(rt: RT, s2: str) -> list[str | None]:
    """Agents of the ``turn`` requests made for S2 (one per prompt), in order."""
    return [r.agent for r in rt.llm.requests_for(session=s2, kind="turn")]


# -- proxied environments (cases 1, 2, 15: part B) --------------------------------------------


class RegressionProxy(FaultProxy):
    """:class:`FaultProxy` plus two faults seen in the field.

    - ``on_prompt``: called with S2's id once a ``POST /session/{id}/prompt_async`` has been
      answered by the real server (e.g. to inject a stale idle ~20 ms later);
    - ``jitter_duplicates``: every ``session.idle`` and ``session.status`` event is forwarded a
      second time after a random 0–``jitter_duplicates`` s delay.

    ``prompts`` counts the ``prompt_async`` calls per session; ``requests_to`` counts every
    request per session id found in the path (to prove "no requests after a deletion").
    """

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.on_prompt: Callable[[str], Any] | None = None
        self.jitter_duplicates: float | None = None
        self.prompts: dict[str, int] = {}
        self.requests_to: list[tuple[float, str, str]] = []
        """``(monotonic s, method, path)`` of every non-stream request, in arrival order."""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path not in STREAM_PATHS:
            self.requests_to.append((time.monotonic(), request.method, path))
        resp = await super()._handle(request)
        parts = path.strip("/").split("/")
        if (
            request.method == "POST"
            and len(parts) == 3
            and parts[0] == "session"
            and parts[2] == "prompt_async"
        ):
            self.prompts[parts[1]] = self.prompts.get(parts[1], 0) + 1
            if self.on_prompt is not None:
                self.on_prompt(parts[1])
        return resp

    def after_session(self, session: str, since: float) -> list[str]:
        """``METHOD path`` of requests naming ``session`` received after ``since`` (monotonic)."""
        return [f"{m} {p}" for t, m, p in self.requests_to if t > since and session in p]

    async def _relay(self, request: web.Request, resp: web.StreamResponse, frame: bytes) -> bool:
        ok = await super()._relay(request, resp, frame)
        jitter = self.jitter_duplicates
        if not ok or jitter is None:
            return ok
        payload = decode_frame(frame)
        etype = event_type(payload) if payload is not None else ""
        if etype in ("session.idle", "session.status"):
            self._relay_again(resp, frame, etype, random.uniform(0.0, jitter))
        return ok


def idle_events(directory: str, session: str) -> list[dict[str, Any]]:
    """A stale ``session.status`` idle and a ``session.idle`` for ``session`` (global form)."""
    return [
        {
            "directory": directory,
            "payload": {
                "type": "session.status",
                "properties": {"sessionID": session, "status": {"type": "idle"}},
            },
        },
        {
            "directory": directory,
            "payload": {"type": "session.idle", "properties": {"sessionID": session}},
        },
    ]


def inject_after_prompts(
    proxy: RegressionProxy, delay: float, events: Callable[[str], list[dict[str, Any]]]
) -> list[str]:
    """From now on, ``delay`` s after each ``prompt_async`` the real server answered, the proxy
    injects ``events(session)`` (none for an empty list). Returns the prompted sessions, in order
    of the prompts, filled as they come (before ``events`` is called: ``events`` may look at
    it to pick a prompt)."""
    prompted: list[str] = []
    tasks: set[asyncio.Task[None]] = set()

    def on_prompt(session: str) -> None:
        prompted.append(session)
        chosen = events(session)
        if not chosen:
            return

        async def fire() -> None:
            await asyncio.sleep(delay)
            for event in chosen:
                await proxy.inject(event)

        t = asyncio.create_task(fire())
        tasks.add(t)  # the loop keeps only a weak reference to a task
        t.add_done_callback(tasks.discard)

    proxy.on_prompt = on_prompt
    return prompted


async def proxied_rt(factory: Any, **daemon: Any) -> tuple[RT, RegressionProxy]:
    """A default environment (``factory`` = the ``rt_factory`` fixture) whose daemon talks to
    the real server through a :class:`RegressionProxy` (the caller stops it:
    ``await proxy.stop()``); ``daemon`` are setting overrides."""
    env: RT = await factory(daemon=daemon or None)
    proxy = RegressionProxy(env.server.url)
    await proxy.start()
    await env.restart_daemon(server_url=proxy.url, **daemon)
    return env, proxy


class ExternalLLM:
    """The scripted LLM in its own process (``python -m roundtabled.offline.scripted_llm``), so
    that streaming megabytes does not run on the daemon's event loop (timing tests: cases 7, 8).
    Driven through its control routes."""

    def __init__(self, url: str, proc: asyncio.subprocess.Process) -> None:
        self.url = url
        self.base_url = url + "/v1"
        self.proc = proc

    async def _post(self, path: str, body: Any) -> None:
        async with (
            aiohttp.ClientSession() as http,
            http.post(self.url + path, json=body, timeout=aiohttp.ClientTimeout(total=60)) as r,
        ):
            r.raise_for_status()

    async def agent_prompts(self, prompts: dict[str, str]) -> None:
        """Register ``{prompt prefix: agent}`` (see ``ScriptedLLM.agent_prompts``)."""
        await self._post("/agent-prompts", prompts)

    async def script(self, *actions: Any, agent: str | None = None) -> None:
        """Queue ``actions`` (``Text(...)`` etc.) for ``agent``."""
        await self._post("/script", {"actions": [a.model_dump() for a in actions], "agent": agent})

    async def requests(self) -> list[dict[str, Any]]:
        """The recorded requests (``RecordedRequest.to_json()`` dicts)."""
        async with (
            aiohttp.ClientSession() as http,
            http.get(self.url + "/requests", timeout=aiohttp.ClientTimeout(total=60)) as r,
        ):
            return list(await r.json())


@contextlib.asynccontextmanager
async def external_llm() -> AsyncIterator[ExternalLLM]:
    """Start an :class:`ExternalLLM` on a free port; stopped on exit."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "roundtabled.offline.scripted_llm",
        "--port",
        str(port),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    llm = ExternalLLM(f"http://127.0.0.1:{port}", proc)
    try:
        deadline = time.monotonic() + 30
        async with aiohttp.ClientSession() as http:
            while True:
                try:
                    async with http.get(llm.url + "/health") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                assert time.monotonic() < deadline, "external scripted LLM did not start"
                await asyncio.sleep(0.1)
        yield llm
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()
