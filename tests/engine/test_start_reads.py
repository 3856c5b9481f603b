"""The reads a start makes of a directory (agents, configuration, providers) are kept per server
instance (docs/design.md, "Reads kept per server instance"): a second start in the same
directory reads none of them again, a disposal of the instance or a reconnect of the event stream
drops them, and a read that a disposal overtook is not kept. Kept reads that refuse a request
are read again before the refusal, so an agent the server has just loaded is found."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from roundtabled.offline.scripted_actions import Text

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]


def agent_reads(h: Harness) -> int:
    return len(h.fake.calls_of("agents"))


async def started(h: Harness, **body: Any) -> str:
    h.fake.script(Text(text="PM: ship it."), agent="pm")
    h.fake.script(Text(text="DEV: agreed."), agent="dev")
    s2 = await h.start(**body)
    await h.result(s2)
    return s2


async def test_a_second_start_in_the_directory_reads_nothing_again(harness: H) -> None:
    h = await harness()
    await started(h)
    assert agent_reads(h) == 1
    await started(h)
    await started(h, parentSessionID=await h.parent())
    assert agent_reads(h) == 1


async def test_a_disposal_of_the_instance_or_a_reconnect_drops_the_kept_reads(harness: H) -> None:
    h = await harness()
    await started(h)
    h.fake.emit("server.instance.disposed", {"directory": h.directory})
    await h.fake.settle()
    await started(h)
    assert agent_reads(h) == 2
    h.fake.emit("server.instance.disposed", {"directory": "/some/other/project"})
    await h.fake.settle()
    await started(h)
    assert agent_reads(h) == 2, "another directory's disposal keeps this directory's reads"
    await h.reconnect()
    await started(h)
    assert agent_reads(h) == 3


async def test_a_read_overtaken_by_a_disposal_is_used_but_not_kept(harness: H) -> None:
    h = await harness()
    real = h.fake.agents
    overtaken = [True]

    async def agents(directory: str | None = None) -> list[dict[str, Any]]:
        out = await real(directory)
        if overtaken and overtaken.pop():
            h.fake.emit("server.instance.disposed", {"directory": h.directory})
            await h.fake.settle()
        return out

    h.fake.agents = agents  # type: ignore[method-assign]
    await started(h)
    await started(h)
    assert agent_reads(h) == 2


async def test_an_agent_loaded_since_the_reads_were_kept_is_found(harness: H) -> None:
    """The instance reloaded with a new agent ``qa2`` and its disposal not heard yet: the start
    naming ``qa2`` reads again instead of refusing it."""
    h = await harness()
    await started(h)
    h.fake.agent_models["qa2"] = None
    h.fake.script(Text(text="QA2: fine."), agent="qa2")
    h.fake.script(Text(text="PM: ship it."), agent="pm")
    s2 = await h.start(agents=["pm", "qa2"])
    await h.result(s2)
    assert agent_reads(h) == 2
    assert h.prompted_agents(s2)[:2] == ["pm", "qa2"]
