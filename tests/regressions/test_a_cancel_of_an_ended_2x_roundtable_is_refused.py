"""On OpenCode 2.x ``roundtabled cancel S2`` of a roundtable that had already ended (a second
cancel, or one of a debate that completed) answered exit 0 and printed the result again as if it
had cancelled it; the 2.x shell took the cancel of any roundtable it knew. On 1.x the same
command is refused in one line naming the session, exit 2 (nothing is active to cancel). Now the
2.x shell refuses it the same way."""

from __future__ import annotations

import pytest

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from tests.e2e.cli_helpers import assert_clean_error, cli
from tests.e2e.conftest import RT

pytestmark = pytest.mark.both_majors


@pytest.fixture
def opencode_major() -> int:
    """This fault is OpenCode 2.x's, whatever major the run's other servers are."""
    return 2


async def test_a_second_cancel_is_refused_naming_the_session(rt: RT) -> None:
    assert rt.major == 2
    for seat in ("pm", "dev"):
        rt.llm.script(Text(text=f"{seat}: ship it behind a flag."), agent=seat)
    rt.llm.script(Text(text="SUMMARY: a flag."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Flag?")
    result = await rt.result(s2)
    assert result["endReason"] == "completed", result
    await rt.settled(s2)
    assert_clean_error(await cli(rt, "cancel", s2), 2, s2, "already ended", "nothing to cancel")
