"""``kill -9`` of the daemon at ≥ 20 points of a 3-agent × 3-round debate.

The daemon runs as a real subprocess (``python -m roundtabled serve``) with
``ROUNDTABLED_FAULT=<point>:<n>``, which SIGKILLs it the n-th time it passes that crash point
(:mod:`roundtabled.faults`): between persisting a turn's intent and prompting, between prompting
and recording, between finishing and delivering, and so on. After each kill a fresh daemon without
the fault is started on the same configuration (same signing key, same state in S2) and the test
proves, from the server's truth:

- every (round, seat) was prompted exactly once (signed turn markers on S2's user messages, and
  exactly one model request per turn at the scripted LLM), and the observer exactly once;
- the result reached S1 exactly once; S2 ends with one delimiter and the CONCLUDED title;
- no traceback in either daemon's log, and the restarted daemon exits 0 on SIGTERM.

Several kill points run at once: one real server, one project directory and one daemon per kill
point (a daemon only resumes roundtables of its own directories), so the whole file fits the CI
budget on 2 cores. Marked ``slow``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.opencode_server import OpenCodeServer
from roundtabled.offline.scripted_llm import ScriptedLLM
from tests.fakes.daemon_proc import observer_config, turn_markers

from . import kill_point_harness as kp

pytestmark = pytest.mark.slow

AGENTS = ["pm", "dev", "rv"]
ROUNDS = 3
# (point, n): the n-th pass of that point kills the daemon. 3 × 3 debate = 9 seat turns, then the
# observer. "prompted" passes once per seat prompt (the observer's is "observer-prompted"),
# "turn-recorded" once per finished turn (the observer's answer is the 10th). With the scripted
# model answering at once, every handoff after turn 1 is a fast one (roundtabled.engine.mirror): the
# prompt goes out first and the state write is deferred, so "intent-persisted" passes only for
# turn 1 and for the handoff to the observer (a phase change, written right after the prompt). A
# kill at "prompted":n ≥ 2 therefore leaves the stored state several turns behind S2: the
# restarted daemon must walk the signed markers forward and adopt the prompt already sent
# (machine invariant 4), never send it again.
# Turn 1's prompt carries the state block (docs/design.md, "State format"): "state-created",
# "intent-persisted":1 and "prompted":1 all pass right after that one POST, so only the first is
# listed. A kill there leaves S2 with the block (turn 1's intent in it) and turn 1's prompt
# together: the restarted daemon finds the prompt pending and waits for its reply. (Before the
# block moved into the prompt, "state-created" came before turn 1 was sent, and the restarted
# daemon sent it under its id.) A kill before that POST, after S2 was created, has no crash
# point: S2 then holds its index and no block, and the start-up scan reports and skips it, as it
# did when a kill came before the block's own POST.
KILL_POINTS: list[tuple[str, int]] = [
    ("state-created", 1),
    ("intent-persisted", 2),
    ("prompted", 1),
    ("prompted", 2),
    ("prompted", 3),
    ("prompted", 4),
    ("prompted", 5),
    ("prompted", 6),
    ("prompted", 7),
    ("prompted", 8),
    ("prompted", 9),
    ("turn-recorded", 1),
    ("turn-recorded", 3),
    ("turn-recorded", 5),
    ("turn-recorded", 6),
    ("turn-recorded", 9),
    ("turn-recorded", 10),
    ("observer-prompted", 1),
    ("final-persisted", 1),
    ("delivered", 1),
    ("delimiter-posted", 1),
    ("title-set", 1),
]
# The plugin modes (kill_point_harness.Mode) pass every kill point too: where the mode seems not
# to matter (the end, the delimiter, the title) a kill still meets a plugin report to re-check or
# a switch of mode to carry across the restart.
VIEW_KILL_POINTS: list[tuple[str, int]] = KILL_POINTS
TOOL_KILL_POINTS: list[tuple[str, int]] = [("result-taken", 1)]
"""Passed only with the tool call waiting: its poll took the result, the answer not yet sent
(the restarted daemon must answer it again: S1 does not hold the result). With it, "delivered"
passes where phase 4 sees the result in the tool call's part, before recording it."""
BATCH = int(os.environ.get("RT_KP_BATCH", "6"))
"""Kill points run at once (one daemon each, one shared server)."""


async def check_case(case: kp.Case, oc: kp.Oc, llm: ScriptedLLM) -> None:
    """The pass criteria of the fault-injection suite, from the server's and the model's truth."""
    f, s2, signer = case.fault, case.s2, case.daemon.signer
    msgs = await oc.call("GET", f"/session/{s2}/message")
    turns, observers = turn_markers(msgs, s2, signer)
    expected = [(r, s) for r in range(ROUNDS) for s in range(len(AGENTS))]
    assert turns == expected, f"{f}: turn prompts in S2 {turns}"
    assert observers == 1, f"{f}: {observers} observer prompts"
    reqs = [r.agent for r in llm.requests_for(session=s2, kind="turn")]
    assert reqs == AGENTS * ROUNDS + [OBSERVER_AGENT], f"{f}: model requests {reqs}"
    answers = [m["info"].get("agent") for m in msgs if m["info"]["role"] == "assistant"]
    assert answers == AGENTS * ROUNDS + [OBSERVER_AGENT], f"{f}: answers {answers}"
    summary = await kp.assert_result_once(case, oc, llm, msgs)
    assert summary
    await kp.assert_views(case, oc, llm, msgs)
    if case.caller == "none":
        assert not llm.requests_for(session=case.s1), f"{f}: a model ran in S1"
    log = await kp.assert_clean_exit(case)
    assert case.daemon.token not in log, f"{f}: the control token is in the daemon log"


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("caller", kp.CALLERS)
@pytest.mark.parametrize("mode", kp.MODES)
async def test_kill_9_at_every_crash_point_each_turn_once_result_once(
    tmp_path: Path,
    scripted_llm: ScriptedLLM,
    opencode_factory: Any,
    mode: kp.Mode,
    caller: kp.Caller,
) -> None:
    """Every kill point of a 3 × 3 debate (:data:`KILL_POINTS`, in each view mode), with
    nobody waiting for the result or with the real tool shim waiting across the kill: after
    each kill and a restart, every seat spoke exactly once per round and saw no earlier turn
    prompt, the observer once, the result reached S1 exactly once (through the waiting tool
    call, or as the fallback message), and nothing raised."""
    server: OpenCodeServer = await opencode_factory(observer_config(scripted_llm))
    points = VIEW_KILL_POINTS if mode != "patch" else KILL_POINTS
    if caller == "tool":
        points = points + TOOL_KILL_POINTS
    cases, failures = await kp.run_kill_points(
        kp.selected(points),
        server=server,
        llm=scripted_llm,
        root=tmp_path,
        project="kp",
        debate={"agents": AGENTS, "rounds": ROUNDS},
        check=check_case,
        batch=BATCH,
        label="kill points",
        mode=mode,
        caller=caller,
    )
    assert os.environ.get("RT_KP_ONLY") or len(cases) >= len(KILL_POINTS)
    assert not failures, "\n".join(failures)
    assert sum(c.killed for c in cases) == len(cases)
