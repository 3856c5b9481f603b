"""Field failure (``scripts/demo --base-url http://127.0.0.1:18080/v1 --model local
--turn-timeout 400 --output-limit 512 --keep``, a real Qwen 0.5B through llama.cpp): the
observer used 512 of 512 output tokens (finish ``length``); its summary repeated one line and
ended with a lone ``-``. The result's notes only said "the observer gave no verdict JSON…": a
seat's cut answer was reported, the observer's was not.

Replayed on the real ``opencode serve`` with the scripted model: the observer's reply, and the
verdict repair reply it is asked for, end with finish ``length``. The result says so in words
(the seats' wording, in ``status.notes`` and in the header before the summary), in data
(``status.observerTruncated``), and is degraded (docs/result.md, "degraded").
"""

from __future__ import annotations

import json
from typing import Any

from roundtabled.core.result import HEADER_TITLE
from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from tests.e2e.conftest import RT

CUT = "the observer's reply was cut at the output limit (truncated)"
REPAIR_CUT = "the observer's verdict repair reply was cut at the output limit (truncated)"
LOOPING = "\n".join(["- The seats agree to keep the monolith."] * 15) + "\n-"


async def run(rt: RT, prompt: str) -> dict[str, Any]:
    s1 = await rt.new_parent()
    s2 = await rt.start(parentSessionID=s1, agents=["pm", "dev"], prompt=prompt)
    payload = await rt.result(s2, timeout=120)
    contract: dict[str, Any] = payload["result"]
    assert json.loads(payload["output"]) == contract
    return contract


def said_before_the_summary(contract: dict[str, Any], note: str) -> None:
    status = contract["status"]
    assert note in status["notes"], status["notes"]
    assert status["degraded"] is True
    header = contract["summary"].split("\n\n")[0]
    assert header.startswith(HEADER_TITLE) and f"- {note}" in header, contract["summary"]


async def test_an_observer_reply_cut_at_the_output_limit_is_said(rt: RT) -> None:
    """Exact shape of the field reply: one line repeated 15 times, a lone ``-``, no verdict
    JSON, finish ``length``."""
    rt.llm.script(Text(text="Keep it.\nPosition: keep — one deploy unit"), agent="pm")
    rt.llm.script(Text(text="Keep it too.\nPosition: keep — less to run"), agent="dev")
    rt.llm.script(Text(text=LOOPING, finish_reason="length"), agent=OBSERVER_AGENT)
    c = await run(rt, "Keep the monolith?")
    said_before_the_summary(c, CUT)
    assert c["status"]["observerTruncated"] == 1
    assert REPAIR_CUT not in c["status"]["notes"]


async def test_a_verdict_repair_reply_cut_at_the_output_limit_is_said(rt: RT) -> None:
    """The observer's verdict is invalid, the daemon asks once for the corrected JSON, and that
    reply is cut mid-way."""
    rt.llm.script(Text(text="Keep it.\nPosition: keep — one deploy unit"), agent="pm")
    rt.llm.script(Text(text="Keep it too.\nPosition: keep — less to run"), agent="dev")
    rt.llm.script(
        Text(text='Prose summary.\n```json\n{"decision": "keep", "consensus": "mostly"}\n```'),
        Text(text='{"decision": "keep", "consensus": "unan', finish_reason="length"),
        agent=OBSERVER_AGENT,
    )
    c = await run(rt, "Keep the monolith, repaired?")
    status = c["status"]
    said_before_the_summary(c, REPAIR_CUT)
    assert status["observer"] == "fallback" and status["observerTruncated"] == 1
    assert CUT not in status["notes"]
    assert any(
        "the observer's verdict was unusable (the repair reply was cut at the output limit" in n
        for n in status["notes"]
    ), status["notes"]
    assert c["summary"].endswith("Prose summary.")
