"""Roundtables written by an earlier release still load, resume and extend.

The sessions in ``tests/fixtures/state_v1/roundtables.json`` (what that file's README says) are
loaded into a fresh fake server a day later; the current engine, with the key that signed them,
reads every state block and marker, resumes the killed debate where it stopped (dev's answered
turn adopted, never prompted again) and extends the concluded one. Docs: docs/design.md, "State
inside S2".
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from roundtabled.core.state import Phase, Signer, decode_state, read_marker
from roundtabled.engine.settings import Settings
from roundtabled.opencode.v1_wire import is_state_part
from tests.fakes.fake_opencode import EPOCH0_MS, FakeClock, FakeOpenCode, FakeSession

from .conftest import Booted, Harness

FIXTURE = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "state_v1" / "roundtables.json").read_text()
)
SIGNER = Signer(bytes.fromhex(FIXTURE["key"]))
DAY_MS = 24 * 3600 * 1000
OBSERVER = "roundtable-observer"


def _parts(session_id: str) -> list[dict[str, Any]]:
    return [p for m in FIXTURE["sessions"][session_id]["messages"] for p in m["parts"]]


@pytest.fixture
async def loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[[], Awaitable[Harness]]]:
    """``await loaded()`` → a booted engine over a fake server holding the fixture's sessions."""
    booted = Booted(FakeClock(start_ms=EPOCH0_MS + DAY_MS), monkeypatch)

    async def make() -> Harness:
        directory = FIXTURE["directory"]
        fake = FakeOpenCode(directory, clock=booted.clock)
        for sid, s in FIXTURE["sessions"].items():
            fake.sessions[sid] = FakeSession(
                info=copy.deepcopy(s["info"]), messages=copy.deepcopy(s["messages"])
            )
        settings = Settings(state_dir=tmp_path / "state", directories=(directory,))
        return await booted.boot(fake, directory, settings, SIGNER)

    yield make
    await booted.close()


def test_every_state_block_and_marker_of_the_fixture_still_verifies() -> None:
    phases = {}
    for key in ("active", "concluded"):
        sid = FIXTURE[key]
        blocks = [p for p in _parts(sid) if is_state_part(p)]
        assert len(blocks) == 1
        state = decode_state(blocks[0]["text"], blocks[0]["metadata"], sid, SIGNER)
        assert state.parent_session_id == FIXTURE["parent"]
        phases[key] = state.phase
    assert phases == {"active": Phase.ACTIVE, "concluded": Phase.DONE}
    for sid in FIXTURE["sessions"]:
        stamped = [
            p
            for p in _parts(sid)
            if isinstance(p.get("metadata"), dict)
            and p["metadata"].get("roundtabled", {}).get("kind") not in (None, "state")
        ]
        assert stamped
        assert all(read_marker(p["metadata"], sid, SIGNER) is not None for p in stamped)


async def test_the_killed_debate_resumes_after_dev_s_answered_turn(
    loaded: Callable[[], Awaitable[Harness]],
) -> None:
    h = await loaded()
    a = FIXTURE["active"]
    result = await h.result(a)
    assert result["endReason"] == "completed"
    assert h.prompted_agents(a) == ["rv", "pm", "dev", "rv", OBSERVER]
    entries = h.entries(a)
    assert [e.agent for e in entries] == ["pm", "dev", "rv", "pm", "dev", "rv", OBSERVER]
    assert entries[1].response.startswith("DEV: the shared schema makes a split risky.")


async def test_the_concluded_debate_extends_by_a_round(
    loaded: Callable[[], Awaitable[Harness]],
) -> None:
    h = await loaded()
    b = FIXTURE["concluded"]
    await h.extend(b, rounds=1, prompt="Continue: what would change our minds?")
    result = await h.result(b)
    assert result["result"]["status"]["roundsCompleted"] == 2
    assert h.prompted_agents(b) == ["pm", "dev", OBSERVER]
    assert [e.agent for e in h.entries(b)] == ["pm", "dev", OBSERVER, "pm", "dev", OBSERVER]
