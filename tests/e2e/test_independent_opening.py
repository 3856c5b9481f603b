"""``opening: "independent"`` on the real server with the scripted LLM (docs/deliberation.md):
round 1 runs in parallel, each seat in a child session of the roundtable's session seeing only
the topic; the openings are recorded in the roundtable's session and round 2 sees them all."""

from __future__ import annotations

import json
from typing import Any

from roundtabled.core.state import OBSERVER_AGENT, EndReason, RoundtableState, read_marker
from roundtabled.offline.scripted_actions import Hang, HttpError, Text
from roundtabled.offline.scripted_llm import default_text

from .conftest import RT

AGENTS = ["pm", "dev", "rv"]


def secret(agent: str) -> str:
    return f"OPENING-SECRET-OF-{agent.upper()}"


def opening_reply(agent: str, label: str) -> Text:
    return Text(
        text=f"{secret(agent)} {default_text(agent, label, 1)}\n"
        f"Position: {label} — {agent}'s opening (confidence 6/10)"
    )


def later_reply(agent: str, rnd: int, label: str) -> Text:
    return Text(
        text=default_text(agent, label, rnd) + f"\nPosition: {label} — {agent} (confidence 7/10)"
    )


async def children(rt: RT, s2: str) -> list[dict[str, Any]]:
    return list(await rt.oc("GET", f"/session/{s2}/children"))


def seat_of(child: dict[str, Any]) -> int:
    return int(child["metadata"]["roundtabledOpening"]["seat"])


def request_text(req: Any) -> str:
    return json.dumps(req.messages)


async def final_state(rt: RT, s2: str) -> RoundtableState:
    await rt.finalized(s2)
    return await rt.daemon.engine.load_state(s2)


async def test_round_one_in_parallel_child_sessions_round_two_sees_every_opening(rt: RT) -> None:
    for a in AGENTS:
        rt.llm.script(opening_reply(a, f"{a} first"), later_reply(a, 2, f"{a} second"), agent=a)
    s1 = await rt.new_parent()
    s2 = await rt.start(
        agents=AGENTS,
        prompt="Split the monolith?",
        rounds=2,
        opening="independent",
        parentSessionID=s1,
    )
    await rt.result(s2)
    state = await final_state(rt, s2)
    kids = await children(rt, s2)
    assert sorted(seat_of(c) for c in kids) == [0, 1, 2]  # one session per seat, once
    for child in kids:
        seat = seat_of(child)
        agent = AGENTS[seat]
        [req] = rt.llm.requests_for(session=child["id"], kind="turn")
        assert req.agent == agent
        text = request_text(req)
        assert "Split the monolith?" in text
        for other in AGENTS:
            if other != agent:
                assert secret(other) not in text, f"{agent}'s opening saw {other}'s"
    # Round 2 and the observer ran in the roundtable's session, each seat once, in order.
    s2_reqs = rt.llm.requests_for(session=s2, kind="turn")
    assert [r.agent for r in s2_reqs] == [*AGENTS, OBSERVER_AGENT]
    for r in s2_reqs:
        for a in AGENTS:
            assert secret(a) in request_text(r), f"{r.agent} did not see {a}'s opening"
    # The openings are recorded once each in S2, attributed, never answered by a model.
    msgs = await rt.messages(s2)
    signer = rt.daemon.engine.shell.signer
    records = [
        (m, mk)
        for m in msgs
        for p in m.get("parts") or []
        if (mk := read_marker(p.get("metadata"), s2, signer)) is not None and mk.kind == "opening"
    ]
    assert sorted(mk.seat for _, mk in records) == [-1, 0, 1, 2]
    for m, mk in records:
        assert not any(a["info"].get("parentID") == m["info"]["id"] for a in msgs)
        if mk.seat >= 0:
            visible = "".join(
                p["text"] for p in m["parts"] if p.get("type") == "text" and not p.get("ignored")
            )
            assert visible.startswith(f"── {AGENTS[mk.seat]} · round 1")
            assert secret(AGENTS[mk.seat]) in visible
    # The ledger: round 1 holds each seat's opening position.
    r1 = [e for e in state.history if e.kind == "turn" and e.round == 1]
    assert [e.seat for e in r1] == [0, 1, 2]
    assert [e.position.label if e.position else None for e in r1] == [f"{a} first" for a in AGENTS]
    assert state.end_reason == EndReason.COMPLETED


async def test_a_seat_failing_in_the_opening_is_recorded_and_the_others_go_on(rt: RT) -> None:
    rt.llm.script(opening_reply("pm", "pm first"), later_reply("pm", 2, "pm 2"), agent="pm")
    rt.llm.script(HttpError(status=400, message="dev provider exploded"), agent="dev")
    rt.llm.script(later_reply("dev", 2, "dev 2"), agent="dev")
    rt.llm.script(opening_reply("rv", "rv first"), later_reply("rv", 2, "rv 2"), agent="rv")
    s2 = await rt.start(agents=AGENTS, prompt="Split?", rounds=2, opening="independent")
    await rt.result(s2)
    state = await final_state(rt, s2)
    r1 = {e.seat: e for e in state.history if e.kind == "turn" and e.round == 1}
    assert sorted(r1) == [0, 1, 2]
    assert r1[1].has_error and "dev provider exploded" in (r1[1].error or "")
    assert not r1[0].has_error and not r1[2].has_error
    assert any(err.startswith("dev (round 1):") for err in state.errors)
    # Round 2 still gives every seat its turn, and sees the failure said in the record.
    s2_reqs = rt.llm.requests_for(session=s2, kind="turn")
    assert [r.agent for r in s2_reqs] == [*AGENTS, OBSERVER_AGENT]
    assert "(failed:" in request_text(s2_reqs[0])
    assert state.end_reason == EndReason.COMPLETED


async def test_a_unanimous_opening_with_until_converged_goes_to_the_observer(rt: RT) -> None:
    for a in AGENTS:
        rt.llm.script(opening_reply(a, "keep the monolith"), agent=a)
    s2 = await rt.start(
        agents=AGENTS, prompt="Split?", rounds=3, opening="independent", until="converged"
    )
    result = await rt.result(s2)
    state = await final_state(rt, s2)
    assert [r.agent for r in rt.llm.requests_for(session=s2, kind="turn")] == [OBSERVER_AGENT]
    assert state.end_reason == EndReason.CONVERGED
    note = next(n for n in state.notes if n.startswith("converged after round 1 of 3"))
    assert "unanimous" in note
    if result.get("status") is not None:
        assert result["status"]["endReason"] == "converged"


async def test_a_seat_timing_out_in_the_opening_is_cut_off_alone(rt_factory: Any) -> None:
    # 10 s: the first prompts after a server start reach the model seconds late on a loaded box.
    rt: RT = await rt_factory(daemon={"turn_timeout": 10.0})
    rt.llm.script(opening_reply("pm", "pm first"), agent="pm")
    rt.llm.script(Hang(max_seconds=60), agent="dev")
    rt.llm.script(opening_reply("rv", "rv first"), agent="rv")
    s2 = await rt.start(agents=AGENTS, prompt="Split?", rounds=1, opening="independent")
    await rt.result(s2, timeout=90)
    state = await final_state(rt, s2)
    r1 = {e.seat: e for e in state.history if e.kind == "turn" and e.round == 1}
    assert r1[1].cut_off and "timed out after 10 s" in (r1[1].error or "")
    assert not r1[0].has_error and not r1[2].has_error
    assert [r.agent for r in rt.llm.requests_for(session=s2, kind="turn")] == [OBSERVER_AGENT]


async def test_a_cancel_in_the_opening_aborts_every_running_seat(rt: RT) -> None:
    for a in AGENTS:
        rt.llm.script(Text(text="slow " * 60, chunk_size=5, chunk_delay=0.5), agent=a)
    s2 = await rt.start(agents=AGENTS, prompt="Split?", rounds=2, opening="independent")
    await rt.llm.wait_for_requests(3, kind="turn")
    status, _ = await rt.api("POST", f"/v1/roundtables/{s2}/cancel", {"summarize": False})
    assert status == 200
    await rt.result(s2, timeout=30)
    state = await final_state(rt, s2)
    assert state.end_reason == EndReason.CANCELLED
    r1 = [e for e in state.history if e.kind == "turn" and e.round == 1]
    assert [e.seat for e in r1] == [0, 1, 2]
    assert all(e.cut_off and e.error == "cut off by the cancel" for e in r1)
    assert not rt.llm.requests_for(session=s2)  # nothing ran in the roundtable's session
    for child in await children(rt, s2):
        await rt.wait_idle(child["id"])  # aborted, not left running
