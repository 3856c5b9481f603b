"""Two control commands at once, interleaved with a turn's events: at most one prompt in flight
and every caller an honest answer (granted and done, or refused in an ``Error:`` naming the
field; never told it worked while its request was dropped or merged into another's).

Every call to the fake server takes :data:`LATENCY_S` virtual seconds, so the second command
arrives while the first is between its awaits; the offsets between the two commands walk
through every await of the first.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from roundtabled.errors import ValidationFailed
from roundtabled.offline.scripted_actions import Hang, Text

from .conftest import Harness

H = Callable[..., Awaitable[Harness]]
LATENCY_S = 0.05
OFFSETS_S = [0.0, 0.01, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0]
LABEL = re.compile(r"── (\S+) · round (\d+)")


def slow_server(h: Harness) -> list[str]:
    """Every coroutine method of the fake takes :data:`LATENCY_S`; a prompt posted while S2 is
    busy (a prompt in flight) is recorded in the returned list."""
    overlaps: list[str] = []
    fake = h.fake
    for name, fn in inspect.getmembers(type(fake), inspect.iscoroutinefunction):
        if name.startswith("_") or name in ("settle", "close"):
            continue
        bound = getattr(fake, name)

        @functools.wraps(fn)
        async def delayed(*args: Any, _bound: Any = bound, _name: str = name, **kw: Any) -> Any:
            await asyncio.sleep(LATENCY_S)
            if _name == "prompt_async":
                s = fake.sessions.get(args[0])
                if s is not None and s.status is not None:
                    overlaps.append(str(args[0]))
            return await _bound(*args, **kw)

        setattr(fake, name, delayed)
    return overlaps


def turn_labels(h: Harness, s2: str) -> list[tuple[str, int]]:
    out = []
    for body in h.prompts(s2):
        for part in body.get("parts") or []:
            m = part.get("ignored") and LABEL.search(str(part.get("text") or ""))
            if m:
                out.append((m.group(1), int(m.group(2))))
    return out


async def after(delay: float, coro: Awaitable[Any]) -> Any:
    await asyncio.sleep(delay)
    return await coro


@pytest.mark.parametrize("offset", OFFSETS_S)
async def test_two_extends_at_once_are_serialised(harness: H, offset: float) -> None:
    """Exact input of the report: a concluded roundtable; ``extend --rounds 1 "Continue A"``
    and ``extend --rounds 3 "Continue B"`` at once. One is applied; the other is refused,
    naming the running extension; no turn is prompted twice."""
    h = await harness()
    s2 = await h.start()
    await h.finalized(s2)
    overlaps = slow_server(h)
    a, b = await asyncio.gather(
        h.extend(s2, rounds=1, prompt="Continue A"),
        after(offset, h.extend(s2, rounds=3, prompt="Continue B")),
        return_exceptions=True,
    )
    outcomes = [a, b]
    granted = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    await h.result(s2)
    table = h.engine.tables.get(s2) or h.engine.recent[s2]
    prompts = [e.prompt for e in table.state.extensions]
    if refused:
        # Met while the other was being applied or running: refused, naming it.
        assert len(granted) == 1, outcomes
        (err,) = refused
        assert isinstance(err, ValidationFailed) and err.field == "sessionID", err
        assert "Continue A" in str(err) or "Continue B" in str(err), err
        rounds = 1 + (1 if isinstance(a, str) else 3)
        assert prompts == (["Continue A"] if isinstance(a, str) else ["Continue B"])
    else:
        # The first had concluded before the second came: both ran, one after the other.
        rounds = 1 + 1 + 3
        assert prompts == ["Continue A", "Continue B"]
    assert table.state.total_rounds == rounds
    labels = turn_labels(h, s2)
    assert len(labels) == len(set(labels)), labels  # no turn prompted twice
    assert len(labels) == 2 * rounds, labels
    assert overlaps == []


@pytest.mark.parametrize("offset", OFFSETS_S)
@pytest.mark.parametrize("first_summarizes", [False, True])
async def test_cancel_and_cancel_summarize_at_once_both_get_honest_answers(
    harness: H, offset: float, first_summarizes: bool
) -> None:
    """Exact input of the report: a running turn; ``cancel`` and ``cancel --summarize`` at
    once. The summarize caller either gets its observer or an ``Error:`` naming
    ``summarize``; one abort; the observer is asked at most once."""
    h = await harness()
    h.fake.script(Hang(max_seconds=3600), agent="pm")
    h.fake.script(Text(text="OBSERVER: the gist so far."), agent="roundtable-observer")
    s2 = await h.start(rounds=2)
    await h.clock.advance(3)
    overlaps = slow_server(h)
    first = h.engine.cancel(s2, summarize=first_summarizes, reason="user")
    second = after(offset, h.engine.cancel(s2, summarize=not first_summarizes, reason="user"))
    outcomes = list(await asyncio.gather(first, second, return_exceptions=True))
    summarize_outcome = outcomes[0] if first_summarizes else outcomes[1]
    plain_outcome = outcomes[1] if first_summarizes else outcomes[0]
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            # Refused, never silently dropped: the first cancel had ended the roundtable
            # already, or a summary came after a plain cancel was taken.
            assert isinstance(outcome, ValidationFailed), outcome
            assert (outcome.field, outcome is summarize_outcome) in (
                ("sessionID", True),
                ("sessionID", False),
                ("summarize", True),
            ), outcome
    if isinstance(plain_outcome, BaseException):
        assert first_summarizes and "no active roundtable" in str(plain_outcome)
    result = await h.result(s2)
    assert result["endReason"] == "cancelled"
    observer_asked = h.prompted_agents(s2).count("roundtable-observer")
    if isinstance(summarize_outcome, BaseException):
        said = str(summarize_outcome)
        assert "observer will not run" in said or "no active roundtable" in said, said
        assert observer_asked == 0
    else:
        assert observer_asked == 1
        assert "OBSERVER: the gist so far." in result["text"]
    assert len(h.fake.times_of("abort", s2)) >= 1
    assert overlaps == []
