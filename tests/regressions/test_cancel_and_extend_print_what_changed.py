"""Reported by a newcomer's trial: plain ``cancel`` printed the whole partial transcript (about
90 lines for 8 rounds), and ``extend`` printed the whole earlier debate again and never its own
prompt. ``cancel`` now prints what it did (the round it stopped in, the turns kept, where the
whole debate is) and the result's head; ``extend`` prints its prompt and mode, then only the new
turns and the new result."""

from __future__ import annotations

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Hang, Text
from roundtabled.offline.scripted_llm import default_text
from tests.e2e.cli_helpers import cli
from tests.e2e.conftest import RT


async def test_cancel_prints_its_effect_and_the_result_head_not_the_transcript(rt: RT) -> None:
    said: dict[tuple[str, int], str] = {}
    for r in (1, 2):
        for a in ("pm", "dev"):
            # Dissimilar texts (the filler), so that no repetition stop ends the debate first.
            said[a, r] = default_text(a, "cancel", r)
            rt.llm.script(Text(text=said[a, r]), agent=a)
    rt.llm.script(Hang(), agent="pm")
    s2 = await rt.start(agents=["pm", "dev"], prompt="Cancel me mid-debate", rounds=8)
    await rt.llm.wait_for_requests(5, 60, agent=None, session=s2)
    run = await cli(rt, "cancel", s2)
    assert run.code == 0, run
    lines = run.out.splitlines()
    assert lines[0] == (
        f"Cancelled roundtable {s2} in round 3 of 8; 5 turn(s) kept "
        f"(the whole debate: roundtabled export {s2})."
    ), run.out
    assert lines[1].startswith(f"Roundtable {s2} — "), run.out
    # Round 1 is in no line: the result's head quotes at most each seat's last words.
    assert said["pm", 1][:40] not in run.out and said["dev", 1][:40] not in run.out
    assert "partial history" not in run.out.lower()
    assert "── pm · round" not in run.out
    assert len(lines) <= 12, run.out


async def test_extend_prints_its_prompt_and_only_the_new_turns(rt: RT) -> None:
    rt.llm.script(Text(text="PM round 1: the first debate."), agent="pm")
    rt.llm.script(Text(text="DEV round 1: the first debate."), agent="dev")
    rt.llm.script(Text(text="SUMMARY 1: monolith."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Monolith?")
    await rt.result(s2)
    rt.llm.script(Text(text="PM on costs."), agent="pm")
    rt.llm.script(Text(text="DEV on costs."), agent="dev")
    rt.llm.script(Text(text="SUMMARY 2: costs agreed."), agent=OBSERVER_AGENT)
    run = await cli(rt, "extend", s2, "--rounds", "1", "Continue: what about costs?")
    assert run.code == 0, run
    assert run.err.startswith(
        f"Extending {s2} by 1 more round (continuation):\n  Continue: what about costs?\n"
    ), run.err
    assert "── pm · round 2 ──" in run.out and "── dev · round 2 ──" in run.out
    assert "PM on costs." in run.out and "SUMMARY 2: costs agreed." in run.out
    assert "the first debate" not in run.out
    assert "round 1 ──" not in run.out
