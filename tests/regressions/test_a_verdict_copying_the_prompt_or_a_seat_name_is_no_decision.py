"""Regression: "Decision: Dev", unanimous — and a decision copied from the observer's prompt.

Field failure (a real local model): seats closed with ``Position: PM — …`` and ``Position: Dev
— …`` (their own names as labels), and the verdict read "Decision: Dev", unanimous; the observer
copied the example value in its prompt (``"decision": "keep the monolith, split billing next
quarter"``) into its verdict.

Proves, on the real ``opencode serve`` with the scripted model: the observer's prompt carries no
example value (every value of its verdict shape is a ``<placeholder>``); a verdict that repeats
the placeholder is unusable (one repair, then the ledger); a seat's name as its label is no
position (``noStance``), so no decision names a seat.
"""

from __future__ import annotations

import json
import re

from roundtabled.core.observer_verdict import VERDICT_EXAMPLE
from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from tests.e2e.conftest import RT

AGENTS = ["pm", "dev", "rv"]
COPIED = (
    VERDICT_EXAMPLE.replace("<0.0 to 1.0>", "0.9")
    .replace("<unanimous | majority | split | none>", "unanimous")
    .replace("<merge | split>", "merge")
    .replace('"<seat name>"', '"rv"')
)


async def test_seat_names_and_a_copied_placeholder_give_no_false_decision(rt: RT) -> None:
    """Exact failing input: pm closes with "Position: PM — …", dev with "Position: Dev — …",
    rv with a real label; 1 round; the observer (and its repair) copies its prompt's shape."""
    rt.llm.script(Text(text="We keep it.\nPosition: PM — I think we keep it"), agent="pm")
    rt.llm.script(Text(text="Same.\nPosition: Dev — keep the monolith"), agent="dev")
    rt.llm.script(Text(text="Yes.\nPosition: keep the monolith — fewer parts (8/10)"), agent="rv")
    rt.llm.script(
        Text(text=f"1. **Executive summary** fine.\n```json\n{COPIED}\n```"),
        Text(text=COPIED),
        agent=OBSERVER_AGENT,
    )
    s2 = await rt.start(agents=AGENTS, prompt="Split the monolith?", rounds=1)
    result = (await rt.result(s2))["result"]
    await rt.finalized(s2)
    verdict = result["verdict"]
    assert verdict["decision"] != "Dev" and verdict["consensus"] != "unanimous"
    assert not (verdict["decision"] or "").startswith("<")
    assert result["status"]["observer"] == "fallback" and verdict["source"] == "ledger"
    got = {p["agent"]: (p.get("stance"), p.get("noStance")) for p in verdict["positions"]}
    assert got["pm"] == (None, "the seat's name") and got["dev"] == (None, "the seat's name")
    # The observer's prompt: its verdict shape has placeholders only.
    [obs] = rt.llm.requests_for(session=s2, agent=OBSERVER_AGENT, kind="turn")[:1]
    block = re.search(r"```json\n(\{.*?\})\n```", obs.last_user_text, re.DOTALL)
    assert block is not None
    shape = json.loads(block.group(1).replace("<0.0 to 1.0>", "0.5"))
    assert shape["decision"].startswith("<") and "keep the monolith" not in block.group(1)
