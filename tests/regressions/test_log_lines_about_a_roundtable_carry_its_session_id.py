"""Regression: log lines about a roundtable from the start-up scan and the engine carried its id
only inside the message text, so the README's ``jq 'select(.session_id==…)'`` missed them.

Proves, in process: the pasted-META warning (written on recovery and on extend) and the
"skipped" line of a roundtable whose state block cannot be trusted carry ``session_id`` as a
field of the record (what the JSON log format prints as a key).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from roundtabled.core.state import META_FOOTER, META_HEADER
from roundtabled.engine.recovery import warn_pasted_meta
from roundtabled.opencode.v1_wire import pasted_meta_ids
from tests.engine.conftest import Harness
from tests.engine.conftest import harness as harness  # the engine tests' fixture

H = Callable[..., Awaitable[Harness]]
S2 = "ses_fffffffffffeloglinesfield01"


def test_the_pasted_meta_warning_carries_session_id(caplog: pytest.LogCaptureFixture) -> None:
    """Exact input: a person's message in S2 holding a pasted ``[ROUNDTABLE META]`` block."""
    pasted = {
        "info": {"id": "msg_pasted0001", "role": "user"},
        "parts": [{"type": "text", "text": f"{META_HEADER}\n{{}}\n{META_FOOTER}"}],
    }
    with caplog.at_level("WARNING", logger="roundtabled.engine"):
        warn_pasted_meta(S2, pasted_meta_ids([pasted], None))
    (record,) = caplog.records
    assert getattr(record, "session_id", None) == S2


@pytest.mark.looptime(end=3600.0)
async def test_a_skipped_roundtable_is_logged_with_its_session_id(
    harness: H, caplog: pytest.LogCaptureFixture
) -> None:
    """Exact input: a session whose index metadata names a state block that is not there."""
    h = await harness()
    info = await h.fake.create_session(directory=h.directory, title="(Roundtable) - forged")
    sid = str(info["id"])
    await h.fake.update_session(
        sid,
        metadata={"roundtabled": {"v": 1, "phase": "active", "stateMessageID": "msg_nothere01"}},
    )
    with caplog.at_level("ERROR", logger="roundtabled.engine"):
        outcome = await h.engine.recovery.recover_one(sid)
    assert outcome == "skipped"
    skipped = [r for r in caplog.records if "skipped" in r.getMessage()]
    assert skipped and all(getattr(r, "session_id", None) == sid for r in skipped), skipped
