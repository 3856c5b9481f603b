"""Field fault (a new user on OpenCode 1.18.33): "In the TUI the observer's reply shows its raw
JSON block." The observer ends its reply with a fenced ```json verdict block for the daemon to
read (docs/result.md, "The observer's verdict"); S2 kept it, so a person reading the roundtable's
session in the TUI saw the raw JSON under the observer's prose.

Now, once the verdict is in the written state, phase 4 edits the observer's text part in S2
(``PATCH …/part/{id}``): the block gives way to one line in words ("Verdict recorded by
roundtabled — decision: …; consensus: …; confidence: …/10."). The result's verdict is intact, a
reply without a block is left as it is, and a ``kill -9`` between the written verdict and the edit
(``delivered``), or between the edit and the state saying so (``verdict-shown``), leaves S2 with
the line exactly once and the verdict whole.

Exact input: pm and dev × 1 round (the scripted model's default replies), the observer's reply
``REPLY`` below: its prose, a "6. **Verdict**" heading and the fenced ```json block of
``VERDICT``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roundtabled.core.state import DELIMITER_TEXT, OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import ScriptedLLM
from tests.conftest import OpenCodeFactory
from tests.e2e import kill_point_harness as kp
from tests.e2e.conftest import RT
from tests.fakes.daemon_proc import observer_config, text_of

VERDICT = {
    "decision": "keep a modular monolith",
    "confidence": 0.8,
    "consensus": "unanimous",
    "agreements": ["one deploy unit for now"],
    "disagreements": [],
    "openQuestions": ["when to split billing"],
    "nextSteps": ["draw module boundaries"],
}
PROSE = "1. **Executive summary** keep it."
REPLY = f"{PROSE}\n\n6. **Verdict**\n```json\n{json.dumps(VERDICT)}\n```\n"
LINE = (
    "Verdict recorded by roundtabled — decision: keep a modular monolith; consensus: unanimous; "
    "confidence: 8/10."
)


def observer_texts(msgs: list[dict[str, Any]]) -> list[str]:
    """The text of each visible text part of the observer's answers in S2, as stored."""
    return [
        str(p.get("text") or "")
        for m in msgs
        if m["info"]["role"] == "assistant" and m["info"].get("agent") == OBSERVER_AGENT
        for p in m["parts"]
        if p.get("type") == "text" and not p.get("ignored") and str(p.get("text") or "").strip()
    ]


async def test_the_observer_s_part_shows_the_verdict_in_words_and_the_result_keeps_it(
    rt: RT,
) -> None:
    rt.llm.script(Text(text=REPLY), agent=OBSERVER_AGENT)
    s1 = await rt.new_parent()
    s2 = await rt.start(parentSessionID=s1, agents=["pm", "dev"], prompt="Split?", rounds=1)
    verdict = (await rt.result(s2, timeout=120))["result"]["verdict"]
    await rt.settled(s2)
    shown = observer_texts(await rt.messages(s2))
    assert shown == [f"{PROSE}\n\n{LINE}"], shown
    assert not any("```" in t or '"consensus"' in t for t in shown)
    # The verdict the daemon read is whole in the result and in the export.
    assert (verdict["decision"], verdict["source"]) == ("keep a modular monolith", "observer")
    status, export = await rt.api("GET", f"/v1/roundtables/{s2}/export", params={"format": "json"})
    assert status == 200, export
    assert export["verdict"] == verdict
    assert export["observerSummary"] == PROSE
    observer_turn = [t for t in export["turns"] if t["kind"] == "observer"]
    assert [t["response"] for t in observer_turn] == [f"{PROSE}\n\n{LINE}"]


async def test_an_observer_reply_without_a_json_block_is_left_as_it_is(rt: RT) -> None:
    rt.llm.script(Text(text="Prose only summary."), agent=OBSERVER_AGENT)
    s1 = await rt.new_parent()
    s2 = await rt.start(parentSessionID=s1, agents=["pm", "dev"], prompt="Lines?", rounds=1)
    await rt.result(s2, timeout=120)
    await rt.settled(s2)
    assert observer_texts(await rt.messages(s2)) == ["Prose only summary."]


KILLS = [("delivered", 1), ("verdict-shown", 1)]
"""``delivered``: the verdict is written, the result in S1, the edit not made yet (the restarted
daemon makes it); ``verdict-shown``: the edit is made, the state saying so is not written (the
restarted daemon finds no block and leaves the part alone)."""


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_kill_between_the_written_verdict_and_the_edit_shows_the_line_once(
    tmp_path: Path, scripted_llm: ScriptedLLM, opencode_factory: OpenCodeFactory
) -> None:
    server = await opencode_factory(observer_config(scripted_llm))
    scripted_llm.script(*(Text(text=REPLY) for _ in KILLS), agent=OBSERVER_AGENT)

    async def check(case: kp.Case, oc: kp.Oc, llm: ScriptedLLM) -> None:
        msgs = await oc.call("GET", f"/session/{case.s2}/message")
        shown = observer_texts(msgs)
        assert shown == [f"{PROSE}\n\n{LINE}"], f"{case.fault}: {shown}"
        verdict = (await kp.daemon_status(case, oc))["result"]["verdict"]
        assert verdict["decision"] == "keep a modular monolith", f"{case.fault}: {verdict}"
        assert verdict["source"] == "observer", f"{case.fault}: {verdict}"
        # The result reached S1 once (nobody waits: the fallback message), S2 has one
        # delimiter.
        s1_msgs = await oc.call("GET", f"/session/{case.s1}/message")
        assert [("Executive summary keep it" in text_of(m)) for m in s1_msgs] == [True]
        assert sum(DELIMITER_TEXT in text_of(m) for m in msgs) == 1, f"{case.fault}: delimiters"
        await kp.assert_clean_exit(case)

    cases, failures = await kp.run_kill_points(
        KILLS,
        server=server,
        llm=scripted_llm,
        root=tmp_path,
        project="tj",
        debate={"agents": ["pm", "dev"], "rounds": 1},
        check=check,
        batch=len(KILLS),
        label="observer's verdict shown",
    )
    assert not failures, "\n".join(failures)
    assert [c.killed for c in cases] == [True, True]
