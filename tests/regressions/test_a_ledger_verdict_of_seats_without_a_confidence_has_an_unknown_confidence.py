"""Field failure (a real local model, Qwen2.5-Coder 0.5B on llama.cpp, `python -m
bench.eval_local --debate "$DIR"/project … -- --agents seat-a,seat-b,seat-c --rounds 4
--until converged "Our team of three developers runs one Django monolith …"`, S2
``ses_db71331adffe02TpR2ozfCiTxL``): every seat closed with ``Position: 9 — This argument is
based on the team's experience.`` (no confidence), the observer timed out, and the verdict built
from the seats' positions read "consensus unanimous · decision: 9 · confidence 0.5": the 0.5 was
the tally's stand-in weight for a label stated without a confidence, shown as if measured. Now
such a verdict's confidence is unknown (``null``), and the text names none.
"""

from __future__ import annotations

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from tests.e2e.conftest import RT

AGENTS = ["pm", "dev", "rv"]
LINE = "Position: 9 — This argument is based on the team's experience."
"""seat-b's and seat-c's whole reply in round 1, as the server stored it."""


async def test_no_stated_confidence_gives_no_verdict_confidence(rt: RT) -> None:
    for agent in AGENTS:
        rt.llm.script(Text(text=LINE), agent=agent)
    # The observer writes no verdict JSON (twice: the repair too): the ledger decides.
    rt.llm.script(Text(text="No verdict."), Text(text="Still none."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=AGENTS, prompt="Split the monolith or make it modular?", rounds=1)
    payload = await rt.result(s2)
    verdict = payload["result"]["verdict"]
    assert verdict["source"] == "ledger" and verdict["consensus"] == "unanimous"
    assert verdict["decision"] == "9"
    assert verdict["confidence"] is None
    assert all(p["confidence"] is None for p in verdict["positions"])
    assert "decision: 9" in payload["text"] and "confidence 0.5" not in payload["text"]


async def test_a_stated_confidence_still_gives_one(rt: RT) -> None:
    for agent in AGENTS:
        rt.llm.script(Text(text=f"Because.\n{LINE} (confidence 8/10)"), agent=agent)
    rt.llm.script(Text(text="No verdict."), Text(text="Still none."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=AGENTS, prompt="Split the monolith or make it modular?", rounds=1)
    verdict = (await rt.result(s2))["result"]["verdict"]
    assert verdict["source"] == "ledger" and verdict["confidence"] == 0.8
