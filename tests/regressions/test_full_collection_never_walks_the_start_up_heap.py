"""Regression: a full garbage collection in the middle of a handoff.

Field failure (CI of 6fa3324, regression "huge events under load"): one of the other
roundtables' handoffs took 99.9 ms of daemon-side time, p99 bound 20 ms. The daemon runs inside
the test process there, which by then held ~100,000–146,000 long-lived objects; CPython 3.11's
full (generation 2) collection walks every one of them on the event loop, and such collections
were measured at 40–199 ms in that process (``gc.callbacks``; 5–10 ms in the daemon's own
process). Any collection that fell inside a handoff was daemon-side handoff time.

Proves: once ``Daemon.run`` is serving, every object alive before it started (here 200,000
lists, the exact input: more than the failing process held) is out of reach of later
collections (``gc.freeze``), and a debate still runs to its result afterwards.
"""

from __future__ import annotations

import gc
from typing import Any

from tests.e2e.conftest import RT

LONG_LIVED = 200_000


def in_generation_2(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects(generation=2))


async def test_objects_alive_at_start_up_are_never_walked_again(rt_factory: Any) -> None:
    heap = [[i] for i in range(LONG_LIVED)]  # lists: always tracked by the collector
    gc.collect()
    assert in_generation_2(heap), "precondition: the list is tracked in generation 2"
    rt: RT = await rt_factory()
    assert not in_generation_2(heap), "the start-up heap is still walked by full collections"
    assert gc.get_freeze_count() >= LONG_LIVED
    s1 = await rt.new_parent()
    s2 = await rt.start(agents=["pm", "dev"], prompt="Freeze or not?", parentSessionID=s1)
    result = await rt.result(s2)
    assert result["done"] and "Freeze or not?" in str(result), result
    del heap
