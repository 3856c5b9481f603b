"""``kill -9`` of the daemon inside an independent opening round (docs/deliberation.md).

The harness of ``kill_point_harness.py``: a real daemon subprocess with ``ROUNDTABLED_FAULT=
<point>:<n>`` SIGKILLs itself at a crash point of the parallel round (a seat's session created, its
prompt accepted, its answer settled, a record written); a fresh daemon on the same state finishes
the debate. From the server's truth: each seat has one session, prompted once (one model request
in it), one record in the roundtable's session; round 2 gives each seat exactly one turn, the
observer runs once, the result reaches S1 once, nothing raised. Marked ``slow``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.opencode_server import OpenCodeServer
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.opencode.session_metadata import OPENING_KEY
from tests.fakes.daemon_proc import observer_config, signed_markers, turn_markers

from . import kill_point_harness as kp

pytestmark = pytest.mark.slow

AGENTS = ["pm", "dev", "rv"]
ROUNDS = 2
# 3 seats: three sessions created and three prompts in one pass; the answers settle as they come;
# the records are the topic's (1), then the seats' (2-4).
KILL_POINTS: list[tuple[str, int]] = [
    ("opening-session-created", 1),
    ("opening-session-created", 3),
    ("opening-prompted", 1),
    ("opening-prompted", 2),
    ("opening-prompted", 3),
    ("opening-answered", 1),
    ("opening-answered", 3),
    ("opening-recorded", 1),
    ("opening-recorded", 2),
    ("opening-recorded", 4),
]
# In the plugin modes (kill_point_harness.Mode): a seat's prompt sent (the restarted daemon adopts
# it), its answer settled, and the records before round 2, whose first turn the restarted daemon
# plans in the mode the instance has.
VIEW_KILL_POINTS: list[tuple[str, int]] = [
    ("opening-prompted", 2),
    ("opening-answered", 3),
    ("opening-recorded", 2),
    ("opening-recorded", 4),
]
BATCH = int(os.environ.get("RT_KP_BATCH", "5"))


async def check_case(
    case: kp.Case, oc: kp.Oc, llm: ScriptedLLM, rounds: int = ROUNDS, independent: int = 1
) -> None:
    """``rounds``: the roundtable's rounds (the opening included); ``independent``: its
    independent rounds in the seats' sessions (council: 2, the answers and the rankings)."""
    f, s2, signer = case.fault, case.s2, case.daemon.signer
    kids = [
        c
        for c in await oc.call("GET", f"/session/{s2}/children")
        if OPENING_KEY in (c.get("metadata") or {})
    ]
    seats = sorted(int(c["metadata"][OPENING_KEY]["seat"]) for c in kids)
    assert seats == [0, 1, 2], f"{f}: seat sessions {seats}"
    for c in kids:
        agent = AGENTS[int(c["metadata"][OPENING_KEY]["seat"])]
        msgs = await oc.call("GET", f"/session/{c['id']}/message")
        prompts = [m for m in msgs if m["info"]["role"] == "user"]
        assert len(prompts) == independent, f"{f}: {agent}'s session holds {len(prompts)} prompts"
        reqs = [r.agent for r in llm.requests_for(session=c["id"], kind="turn")]
        assert reqs == [agent] * independent, f"{f}: model requests in {agent}'s session {reqs}"
    msgs = await oc.call("GET", f"/session/{s2}/message")
    records = [m.seat for m in signed_markers(msgs, s2, signer) if m.kind == "opening"]
    turns, observers = turn_markers(msgs, s2, signer)
    want = sorted([-1, 0, 1, 2] * independent)
    assert sorted(records) == want, f"{f}: opening records {sorted(records)}"
    expected = [(r, s) for r in range(1, rounds) for s in range(len(AGENTS))]
    assert turns == expected, f"{f}: turn prompts in S2 {turns}"
    assert observers == 1, f"{f}: {observers} observer prompts"
    reqs = [r.agent for r in llm.requests_for(session=s2, kind="turn")]
    assert reqs == AGENTS * (rounds - 1) + [OBSERVER_AGENT], f"{f}: model requests {reqs}"
    await kp.assert_result_once(case, oc, llm, msgs)
    await kp.assert_views(case, oc, llm, msgs)
    await kp.assert_clean_exit(case)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", kp.MODES)
async def test_kill_9_inside_the_independent_opening_each_seat_once_per_round(
    tmp_path: Path, scripted_llm: ScriptedLLM, opencode_factory: Any, mode: kp.Mode
) -> None:
    """Each crash point of the parallel round (:data:`VIEW_KILL_POINTS` in the plugin modes):
    after the kill and a restart, each seat's session was created once, prompted once and
    recorded once, round 2 ran each seat once and no seat saw an earlier turn prompt, the
    observer once, and the result reached S1 once."""
    server: OpenCodeServer = await opencode_factory(observer_config(scripted_llm))
    cases, failures = await kp.run_kill_points(
        kp.selected(KILL_POINTS if mode == "patch" else VIEW_KILL_POINTS),
        server=server,
        llm=scripted_llm,
        root=tmp_path,
        project="ko",
        debate={"agents": AGENTS, "rounds": ROUNDS, "opening": "independent"},
        check=check_case,
        batch=BATCH,
        label="opening kill points",
        mode=mode,
    )
    assert not failures, "\n".join(failures)
    assert sum(c.killed for c in cases) == len(cases)


# One kill per protocol that runs the opening (docs/deliberation.md, "Protocols"), at the most
# telling point (KILL_AT): for vote and adaptive every record written but the state saying so
# not, so the restarted daemon takes the protocol's decision after the opening itself — the
# observer once for a vote, round 2 for an adaptive roundtable whose seats stated no stance (the
# default replies have no Position line); for council a ranking prompt accepted.
PROTOCOL_KILLS: list[tuple[str, dict[str, Any], int]] = [
    ("vote", {"agents": AGENTS, "protocol": "vote"}, 1),
    ("adaptive", {"agents": AGENTS, "protocol": "adaptive", "rounds": 2}, 2),
    ("council", {"agents": AGENTS, "protocol": "council"}, 1),
]
KILL_AT = {"vote": ("opening-recorded", 4), "adaptive": ("opening-recorded", 4)}
"""council's: its second ranking prompt accepted (the three answers' prompts came first), so
the restarted daemon finds that prompt in the seat's session, already answered or running,
and must not send it again."""
KILL_AT["council"] = ("opening-prompted", 5)


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("name", "body", "rounds"), PROTOCOL_KILLS, ids=[p[0] for p in PROTOCOL_KILLS]
)
async def test_kill_9_after_the_opening_s_records_each_protocol_decides_once(
    tmp_path: Path,
    scripted_llm: ScriptedLLM,
    opencode_factory: Any,
    name: str,
    body: dict[str, Any],
    rounds: int,
) -> None:
    """A ``kill -9`` once the last opening record is in S2 and before the state says so: after
    a restart, each seat was prompted once in its own session, the records are written once, the
    protocol's next turns run once each (``vote``: the observer; ``adaptive``: round 2, then the
    observer) and the result reaches S1 once."""
    server: OpenCodeServer = await opencode_factory(observer_config(scripted_llm))

    async def check(case: kp.Case, oc: kp.Oc, llm: ScriptedLLM) -> None:
        await check_case(case, oc, llm, rounds, 2 if name == "council" else 1)

    cases, failures = await kp.run_kill_points(
        [KILL_AT[name]],
        server=server,
        llm=scripted_llm,
        root=tmp_path,
        project=f"kp{name}",
        debate=body,
        check=check,
        batch=1,
        label=f"{name} kill point",
    )
    assert not failures, "\n".join(failures)
    assert sum(c.killed for c in cases) == len(cases)
