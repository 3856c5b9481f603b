"""Two backends for the contract tests: the in-memory fake and the real ``opencode serve``.

Each contract test takes the ``backend`` fixture and runs once per backend; the real one (marked
``e2e``) is one private server + scripted LLM per test module (started once, ~3 s), each test
working in sessions of its own so tests cannot see each other's turns.

:class:`Backend` gives a scenario what it needs on both sides: the client (the fake itself, or an
:class:`OpenCodeClient` of the real server), scripting of model replies, the recorded model
requests and the raw event log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from roundtabled.offline.opencode_server import OpenCodeServer, agent_prompts_of
from roundtabled.offline.scripted_llm import ScriptedLLM, content_text
from roundtabled.opencode.client import OpenCodeClient
from tests.e2e.conftest import roundtable_config
from tests.fakes.fake_opencode import FakeOpenCode, status_sequence

ASKER = {
    "mode": "primary",
    "model": "scripted/debater-1",
    "prompt": "You are asker, a seat allowed to ask questions.",
    "permission": {"*": "deny", "question": "allow"},
}
"""An agent that may use the ``question`` tool (the fake's ``question_agents``)."""
BASHER = {
    "mode": "subagent",
    "model": "scripted/debater-1",
    "prompt": "You are basher, a seat whose shell needs permission.",
    "permission": {"*": "deny", "bash": "ask"},
}
"""An agent whose ``bash`` asks for permission (the fake's ``permission_agents``)."""


@dataclass
class RealEnv:
    """One real server, its scripted LLM and a recorder of its ``/event`` stream."""

    server: OpenCodeServer
    llm: ScriptedLLM
    events: list[dict[str, Any]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    connected: asyncio.Event = field(default_factory=asyncio.Event)

    async def listen(self) -> None:
        async with (
            aiohttp.ClientSession() as http,
            http.get(self.server.url + "/event", timeout=aiohttp.ClientTimeout(total=None)) as resp,
        ):
            async for line in resp.content:
                if not line.startswith(b"data:"):
                    continue
                event = json.loads(line[5:])
                if event.get("type") == "server.connected":
                    self.connected.set()
                self.events.append(event)


class LazyRealEnv:
    """Starts the real server on first use, so a run of the fake half alone starts none."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env: RealEnv | None = None

    async def get(self) -> RealEnv:
        if self.env is None:
            llm = ScriptedLLM()
            await llm.start(port=0)
            cfg = roundtable_config(llm, extra_agents={"asker": ASKER, "basher": BASHER})
            cfg["permission"]["bash"] = "ask"
            llm.agent_prompts.update(agent_prompts_of(cfg))
            env = RealEnv(server=OpenCodeServer(self.root, cfg), llm=llm)
            self.env = env
            await env.server.start()
            env.task = asyncio.create_task(env.listen())
            await asyncio.wait_for(env.connected.wait(), 15)
        return self.env

    async def stop(self) -> None:
        env = self.env
        if env is None:
            return
        if env.task is not None:
            env.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await env.task
        await env.server.stop()
        await env.llm.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def real_env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LazyRealEnv]:
    lazy = LazyRealEnv(tmp_path_factory.mktemp("contract"))
    try:
        yield lazy
    finally:
        await lazy.stop()


@dataclass
class Backend:
    """What a contract scenario drives. ``kind`` is ``"fake"`` or ``"real"``."""

    kind: str
    client: Any  # FakeOpenCode | OpenCodeClient: the same methods
    directory: str
    script: Callable[..., None]
    _requests: Callable[..., list[Any]]
    _events: Callable[[], list[dict[str, Any]]]
    straggle: float = 0.5
    """Seconds to wait after an awaited event for later ones (the fake sends a turn's events
    at once, the real server over some milliseconds)."""
    release: str | None = None
    """The real server's version (``None`` for the fake, which models the pinned release): the
    few behaviours that differ between the releases tested are pinned per release."""

    def requests_for(self, **filters: Any) -> list[Any]:
        """Model requests (``.agent``, ``.model``, ``.kind``, ``.messages``)."""
        return self._requests(**filters)

    @property
    def events(self) -> list[dict[str, Any]]:
        return self._events()

    def statuses_of(self, session_id: str) -> list[str]:
        """Status story of one session (see :func:`status_sequence`), repeats collapsed."""
        out: list[str] = []
        for s in status_sequence(self.events, session_id):
            if not out or out[-1] != s:
                out.append(s)
        return out

    def events_of(self, session_id: str, etype: str) -> list[dict[str, Any]]:
        out = []
        for e in self.events:
            props = e.get("properties") or {}
            sid = props.get("sessionID") or (props.get("info") or {}).get("id")
            if e.get("type") == etype and sid == session_id:
                out.append(e)
        return out

    async def wait_for(
        self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition"
    ) -> Any:
        """Poll ``predicate`` every 20 ms until truthy (``timeout`` s, then AssertionError)."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.kind}: {what} not reached in {timeout} s")
            await asyncio.sleep(0.02)

    async def idle_count(self, session_id: str, n: int, timeout: float = 30.0) -> None:
        """Wait for ``n`` ``session.idle`` events of the session, then :attr:`straggle` s
        (events the server sends after an idle must show up in the comparison too)."""
        await self.wait_for(
            lambda: status_sequence(self.events, session_id).count("idle!") >= n,
            timeout,
            f"{n} session.idle of {session_id}",
        )
        await asyncio.sleep(self.straggle)

    async def session(self, title: str = "contract", **kw: Any) -> str:
        info = await self.client.create_session(directory=self.directory, title=title, **kw)
        return str(info["id"])


@pytest_asyncio.fixture(
    params=["fake", pytest.param("real", marks=pytest.mark.e2e)], loop_scope="module"
)
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, real_env: LazyRealEnv
) -> AsyncIterator[Backend]:
    if request.param == "fake":
        fake = FakeOpenCode(directory=str(tmp_path))
        try:
            yield Backend(
                "fake",
                fake,
                str(tmp_path),
                fake.script,
                fake.requests_for,
                lambda: fake.events,
                straggle=0.02,
            )
        finally:
            await fake.close()
        return
    env = await real_env.get()
    env.llm.reset()
    client = OpenCodeClient(env.server.url)
    try:
        yield Backend(
            "real",
            client,
            str(env.server.project_dir),
            env.llm.script,
            env.llm.requests_for,
            lambda: env.events,
            release=env.server.version,
        )
    finally:
        await client.close()


def user_texts(req: Any) -> list[str]:
    """The user messages' texts of a model request, in order."""
    return [content_text(m.get("content")) for m in req.messages if m.get("role") == "user"]


def all_texts(req: Any) -> str:
    """Everything of a model request except the system message, as one string."""
    return "\n".join(
        content_text(m.get("content")) for m in req.messages if m.get("role") != "system"
    )
