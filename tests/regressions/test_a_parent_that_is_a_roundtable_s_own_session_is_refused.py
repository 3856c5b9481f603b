"""Regression: ``--parent`` naming a roundtable's own session (S2), or a seat's session of an
independent opening, was accepted: the nested result landed in that debate as an ordinary part
and was fed to its seats on a later extend.

Proves, on the in-memory fake server in virtual time (the engine's rule; the control API maps
the refusal to a 400 ``Error:`` naming ``parentSessionID``, the CLI to ``--parent``): a start and
an extend naming either kind of session as the parent are refused, naming the field, and nothing
is prompted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from roundtabled.core.validation import parse_request
from roundtabled.errors import ValidationFailed
from roundtabled.offline.scripted_actions import Hang
from tests.engine.conftest import Harness
from tests.engine.conftest import harness as harness  # the engine tests' fixture

H = Callable[..., Awaitable[Harness]]

pytestmark = [pytest.mark.looptime(end=24 * 3600.0), pytest.mark.timeout(30)]


async def start(h: Harness, **body: Any) -> str:
    body.setdefault("agents", ["pm", "dev"])
    body.setdefault("prompt", "Nested?")
    body.setdefault("rounds", 1)
    body.setdefault("directory", h.directory)
    return (await h.engine.start(parse_request(body))).session_id


async def test_a_roundtable_s_own_session_as_parent_is_refused(harness: H) -> None:
    """Exact input: roundtable A running; ``start --parent A_S2``; then, A concluded,
    ``extend A_S2 --parent A_S2``."""
    h = await harness()
    a = await start(h)
    prompted = len(h.fake.calls_of("prompt_async"))
    with pytest.raises(ValidationFailed) as err:
        await start(h, parentSessionID=a)
    assert err.value.field == "parentSessionID"
    assert "a roundtable's own session" in str(err.value)
    assert len(h.fake.calls_of("prompt_async")) == prompted
    await h.finalized(a)
    with pytest.raises(ValidationFailed) as err:
        await h.extend(a, parentSessionID=a)
    assert err.value.field == "parentSessionID"


async def test_a_seat_session_of_an_independent_opening_as_parent_is_refused(harness: H) -> None:
    """Exact input: roundtable A with ``opening: independent`` (pm's opening hangs); ``start
    --parent`` pm's opening session."""
    h = await harness()
    h.fake.script(Hang(max_seconds=3600), agent="pm")
    a = await start(h, opening="independent")
    table = h.engine.tables[a]
    seat_sid = await h.until(
        lambda: (rnd := table.state.openings) is not None and rnd.seats[0].session_id
    )
    with pytest.raises(ValidationFailed) as err:
        await start(h, parentSessionID=seat_sid)
    assert err.value.field == "parentSessionID"
    assert "independent opening" in str(err.value) and a in str(err.value)
