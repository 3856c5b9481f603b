"""Engine unit tests: the real :class:`roundtabled.engine.registry.Engine` over the in-memory fake
OpenCode (``tests/fakes/fake_opencode.py``, pinned by ``tests/contract``) in virtual time.

Every test here runs under ``looptime``: the event loop's clock is virtual, so a 300 s turn
timeout or a 130 s tool grace passes in microseconds, and the fake clock (epoch ms) follows the
loop's clock. Build engines inside the test body (``await harness(...)``), not in an async
fixture: looptime only compresses the test's own time.

:class:`Harness` wires one engine to the fake as the daemon does (events to ``on_event``, the
start-up scan, ``on_connect``) and has the helpers the tests share.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from roundtabled.core.state import Options, Signer
from roundtabled.core.validation import parse_request
from roundtabled.engine.registry import Engine
from roundtabled.engine.settings import Settings
from tests.fakes.fake_opencode import FakeClock, FakeOpenCode

KEY = b"engine-unit-tests-key-0123456789"
VIRTUAL_END_S = 24 * 3600.0
"""A test whose virtual time passes a day has hung: looptime fails it."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.looptime(end=VIRTUAL_END_S))
            item.add_marker(pytest.mark.timeout(30))


@dataclass
class Harness:
    """One engine (or several, across "restarts") over one fake server."""

    fake: FakeOpenCode
    clock: FakeClock
    directory: str
    settings: Settings
    signer: Signer
    engine: Engine = field(init=False)
    engines: list[Engine] = field(default_factory=list)

    # -- lifecycle ------------------------------------------------------------------------------

    def make_engine(self) -> Engine:
        kwargs: dict[str, Any] = {}
        if "clock" in inspect.signature(Engine).parameters:
            kwargs["clock"] = self.clock.now_ms
        engine = Engine(self.fake, self.signer, self.settings, **kwargs)  # type: ignore[arg-type]
        self.engines.append(engine)
        return engine

    async def boot(self) -> Engine:
        """A daemon start: subscribe, ``server.connected``, the start-up scan, ``on_connect``."""
        self.engine = self.make_engine()
        self.fake.subscribe(self.engine.on_event)
        self.fake.connect()
        await self.fake.settle()
        await self.engine.recover()
        self.engine.ready.set()
        await self.engine.on_connect()
        return self.engine

    async def kill(self) -> None:
        """kill -9 of the daemon: every task of the engine is cancelled, nothing is flushed."""
        engine = self.engine
        self.fake.unsubscribe(engine.on_event)
        tasks = [t for t in asyncio.all_tasks() if t.get_name().startswith("rt-")]
        for t in tasks:
            t.cancel()
        bg = getattr(engine, "_bg", None) or getattr(
            getattr(engine, "shell", None), "background", set()
        )
        for b in list(bg):
            b.cancel()
        await asyncio.gather(*tasks, *bg, return_exceptions=True)

    async def stop(self) -> None:
        """A graceful stop (``Engine.close``)."""
        self.fake.unsubscribe(self.engine.on_event)
        await self.engine.close(window=2.0)

    async def restart(self, *, graceful: bool = True) -> Engine:
        """Stop this engine and boot a new one over the same server."""
        await (self.stop() if graceful else self.kill())
        return await self.boot()

    async def reconnect(self) -> None:
        """The event stream dropped and came back (events in between are lost)."""
        self.fake.connect()
        await self.fake.settle()
        await self.engine.on_connect()

    # -- driving --------------------------------------------------------------------------------

    async def parent(self, title: str = "S1 main session") -> str:
        info = await self.fake.create_session(directory=self.directory, title=title)
        return str(info["id"])

    async def start(self, **body: Any) -> str:
        """Start a roundtable (control-API body, defaults: pm+dev, 1 round); returns S2's id."""
        body.setdefault("agents", ["pm", "dev"])
        body.setdefault("prompt", "Should we ship the feature?")
        body.setdefault("rounds", 1)
        body.setdefault("directory", self.directory)
        state = await self.engine.start(parse_request(body))
        return state.session_id

    async def extend(self, s2: str, **body: Any) -> str:
        body.setdefault("prompt", "Go on")
        body.setdefault("rounds", 1)
        body["sessionID"] = s2
        state = await self.engine.start(parse_request(body))
        return state.session_id

    async def result(self, s2: str, within: float = 3600.0) -> dict[str, Any]:
        """The result of ``s2`` once released (virtual seconds)."""
        got = await self.engine.wait_result(s2, within)
        assert got is not None, f"no result for {s2} within {within} s; status {self.status(s2)}"
        return got

    def status(self, s2: str) -> dict[str, Any] | None:
        return self.engine.status(s2)

    async def until(
        self, predicate: Callable[[], Any], within: float = 600.0, step: float = 0.05
    ) -> Any:
        """Advance virtual time in ``step`` s until ``predicate()`` is truthy."""
        waited = 0.0
        while True:
            value = predicate()
            if value:
                return value
            if waited >= within:
                raise AssertionError(f"condition not met within {within} virtual s")
            await self.clock.advance(step)
            waited += step

    async def finalized(self, s2: str, within: float = 600.0) -> dict[str, Any]:
        """Status of ``s2`` once phase 4 (delimiter, title, toast) is complete."""
        status: dict[str, Any] = await self.until(
            lambda: (st := self.status(s2)) is not None and st["finalized"] and st, within
        )
        return status

    async def idle(self, within: float = 600.0) -> None:
        """Until no session of the fake is busy."""
        await self.until(lambda: all(s.status is None for s in self.fake.sessions.values()), within)

    def fake_id(self) -> str:
        """A fresh ascending ``msg_…`` id (what a person's client would choose)."""
        from roundtabled import ids

        return ids.message_id()

    # -- reading the fake -----------------------------------------------------------------------

    def handoffs(self) -> tuple[int, int]:
        """``(fast, from a read)`` handoffs of the current engine so far."""
        for holder in (
            self.engine,
            getattr(self.engine, "metrics", None),
            getattr(getattr(self.engine, "shell", None), "metrics", None),
        ):
            if holder is not None and hasattr(holder, "fast_handoffs"):
                return int(holder.fast_handoffs), int(holder.read_handoffs)
        raise AssertionError("the engine exposes no handoff counters")

    def entries(self, s2: str) -> list[Any]:
        """History entries of ``s2``'s roundtable (seat turns and the observer), in order."""
        table = self.engine.tables.get(s2) or self.engine.recent.get(s2)
        assert table is not None, s2
        return list(table.state.history)

    def errors(self, s2: str) -> list[str]:
        st = self.status(s2)
        assert st is not None
        return list(st["errors"])

    def prompts(self, s2: str) -> list[dict[str, Any]]:
        """Bodies of every ``prompt_async`` to ``s2``, in order."""
        return [args[1] for args in self.fake.calls_of("prompt_async", s2)]

    def prompted_agents(self, s2: str) -> list[str]:
        return [str(b["agent"]) for b in self.prompts(s2)]

    def replies_by(self, s2: str) -> list[str]:
        """Agents of the model requests made in ``s2``, in order (one per step)."""
        return [r.agent for r in self.fake.requests_for(session=s2)]

    async def messages(self, session_id: str) -> list[dict[str, Any]]:
        msgs, _ = await self.fake.messages(session_id)
        return msgs

    async def no_reply_texts(self, session_id: str) -> list[str]:
        """Visible texts of the user messages of ``session_id`` (noReply deliveries in S1)."""
        out = []
        for m in await self.messages(session_id):
            if m["info"]["role"] != "user":
                continue
            texts = [
                p["text"] for p in m["parts"] if p.get("type") == "text" and not p.get("ignored")
            ]
            out.append("\n".join(texts))
        return out


class Booted:
    """The harnesses one test booted over ``clock`` (installed as the engine modules' clock):
    :meth:`close`, after the test, kills each, closes its fake and checks that ``on_event``
    never raised."""

    def __init__(self, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
        clock.install(monkeypatch)
        self.clock = clock
        self.made: list[Harness] = []

    async def boot(
        self, fake: FakeOpenCode, directory: str, settings: Settings, signer: Signer
    ) -> Harness:
        """A booted :class:`Harness` of one engine over ``fake`` (see :meth:`Harness.boot`)."""
        h = Harness(
            fake=fake, clock=self.clock, directory=directory, settings=settings, signer=signer
        )
        self.made.append(h)
        await h.boot()
        return h

    async def close(self) -> None:
        """Kill every harness booted, close its fake; fails if an event handler ever raised."""
        for h in self.made:
            await h.kill()
            await h.fake.close()
            assert h.fake.subscriber_errors == []


@pytest.fixture
async def harness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[..., Awaitable[Harness]]]:
    """``await harness(**settings)`` → a booted :class:`Harness` (settings: engine
    :class:`Settings` fields, e.g. ``resync_period=15``, or :class:`Options` fields for the
    roundtables' defaults, e.g. ``turn_timeout=30``). The engine modules' clocks are pointed
    at the loop's clock. After the test: every engine task is cancelled and ``on_event`` must
    never have raised."""
    booted = Booted(FakeClock(), monkeypatch)

    async def make(**settings: Any) -> Harness:
        directory = tmp_path / "project"
        directory.mkdir(exist_ok=True)
        settings.setdefault("state_dir", tmp_path / "state")
        settings.setdefault("directories", (str(directory),))
        defaults = {k: settings.pop(k) for k in list(settings) if k in Options.model_fields}
        fake = FakeOpenCode(str(directory), clock=booted.clock)
        engine_settings = Settings(roundtable=Options(**defaults), **settings)
        return await booted.boot(fake, str(directory), engine_settings, Signer(KEY))

    yield make
    await booted.close()
