"""What a roundtable does beyond a plain debate, on the real OpenCode 2.1.2 server, run by the 2.x
shell (engine/v2run.py): context 'recent', extend, until and budgets, the dry run, list, the
progress feed and export. Only the model is scripted. The server loads the roundtabled plugin as
``install-tool --opencode 2`` writes it (the ``env`` fixture of test_v2_roundtable.py). What the
shell does and why: docs/design.md, "The 2.x shell".
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Collection
from typing import Any

import aiohttp
import pytest

from bench.env import control_call
from roundtabled.core.state import MODE_NOTES, OBSERVER_AGENT
from roundtabled.core.validation import parse_request
from roundtabled.errors import ValidationFailed
from roundtabled.offline.scripted_actions import Text, ToolCall, ToolCalls
from roundtabled.offline.scripted_llm import content_text
from roundtabled.service import doctor, plan
from roundtabled.service.config import load_settings
from tests.e2e.test_v2_roundtable import Env, env
from tests.fakes.daemon_proc import DaemonProc

__all__ = ["env"]  # the fixture, imported: one 2.x server for this module too

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]

WORDS = {
    "pm": ["customers", "marketing", "pricing", "roadmap", "churn"],
    "dev": ["flags", "ledger", "latency", "rollback", "schema"],
}
"""Each seat's word per round: replies that share few words, so loop detection never ends the
debate early."""


def reply(seat: str, rnd: int) -> str:
    """Seat ``seat``'s scripted reply in 1-based round ``rnd`` (its first line is unique)."""
    word = WORDS[seat][rnd - 1]
    return f"{seat} r{rnd}: {word} {word}-{rnd} matter most.\nPosition: flag — ship behind a flag"


def said(request: Any, role: str) -> list[str]:
    """The texts of ``request``'s messages of ``role``, in order."""
    return [content_text(m.get("content")) for m in request.messages if m.get("role") == role]


async def run_debate(
    env: Env,
    body: dict[str, Any],
    seats: list[str],
    rounds: int,
    *,
    skip: Collection[tuple[str, int]] = (),
) -> Any:
    """Script ``rounds`` rounds of ``seats`` (but the ``(seat, round)`` in ``skip``, scripted by
    the caller) and the observer, start ``body`` and return the state, the result and the model
    requests of the debate (seat turns and the observer's; not a tool call's follow-up)."""
    s1 = await env.parent()
    since = len(env.llm.requests)
    for rnd in range(1, rounds + 1):
        for seat in seats:
            if (seat, rnd) not in skip:
                env.llm.script(Text(text=reply(seat, rnd)), agent=seat)
    env.llm.script(Text(text="SUMMARY: ship behind a flag."), agent=OBSERVER_AGENT)
    req = parse_request({"agents": seats, "parentSessionID": s1, **body})
    state = await env.runner.start(req)
    result = await env.runner.wait_result(state.session_id, 150)
    assert result is not None, "no result within 150 s"
    requests = [r for r in env.llm.requests[since:] if r.kind == "turn"]
    return state, result, requests


async def test_context_recent_leaves_the_middle_rounds_out_of_a_seat_s_request(env: Env) -> None:
    """context 'recent', two seats, four rounds: a seat in round 4 sees the opening round and
    round 3 in full and the digest of round 2, never round 2's replies (the plugin's context hook
    drops what S2's metadata lists), nor the tool call pm made in round 2 and its result (a
    provider refuses a tool result without its call); rounds 1 to 3 see every reply; the
    observer sees all."""
    call = ToolCall(name="available_agents", arguments={}, id="call_round2")
    env.llm.script(Text(text=reply("pm", 1)), ToolCalls(calls=[call]), agent="pm")
    state, result, requests = await run_debate(
        env,
        {"rounds": 4, "until": "rounds", "context": "recent", "prompt": "Ship behind a flag?"},
        ["pm", "dev"],
        4,
        skip={("pm", 1)},
    )
    assert result["endReason"] == "completed", result
    assert state.options.context == "recent"
    assert [r.agent for r in requests] == ["pm", "dev"] * 4 + [OBSERVER_AGENT]

    def replies_seen(r: Any) -> list[str]:
        return [t.strip().splitlines()[0] for t in said(r, "assistant") if t.strip()]

    def first_line(seat: str, rnd: int) -> str:
        return reply(seat, rnd).splitlines()[0]

    everything = [first_line(s, rnd) for rnd in (1, 2, 3, 4) for s in ("pm", "dev")]
    # rounds 1 to 3: every earlier reply (nothing is hidden before round 4)
    for i in range(6):
        assert replies_seen(requests[i]) == everything[:i], i
        assert "[Digest of round" not in said(requests[i], "user")[-1]
    # round 4: round 1 and round 3 in full (and pm's round 4 for dev), round 2 left out
    kept = [first_line(s, rnd) for rnd in (1, 3) for s in ("pm", "dev")]
    assert replies_seen(requests[6]) == kept
    assert replies_seen(requests[7]) == [*kept, first_line("pm", 4)]
    for r in requests[6:8]:
        own = said(r, "user")[-1]
        assert "[Digest of round(s) 2:" in own, own
        assert "Ship behind a flag?" in said(r, "user")[0]  # the opening prompt stays
        for seat in ("pm", "dev"):
            assert first_line(seat, 2) not in "\n".join(said(r, "assistant"))

    # pm's round 2 tool call and its result: in view until round 2 is hidden, then both gone
    def tools(r: Any) -> list[str]:
        return [m["role"] for m in r.messages if m.get("role") == "tool" or m.get("tool_calls")]

    assert [tools(r) for r in requests[:3]] == [[], [], []]
    assert all(tools(r) == ["assistant", "tool"] for r in requests[3:6]), requests[3:6]
    assert [tools(r) for r in requests[6:8]] == [[], []]
    # the observer reads the whole debate
    assert replies_seen(requests[8]) == everything
    assert tools(requests[8]) == ["assistant", "tool"]


async def test_context_recent_without_the_plugin_is_refused_naming_install_tool(
    env: Env,
) -> None:
    """A project whose OpenCode 2.x instance does not load the roundtabled plugin: context
    'recent' is refused in one line naming the field and `roundtabled install-tool`."""
    bare = await env.server.add_project("bare")
    s1 = await env.port.client.create_session(directory=str(bare), title="S1")
    req = parse_request(
        {"agents": ["pm", "dev"], "prompt": "Q?", "parentSessionID": s1.id, "context": "recent"}
    )
    with pytest.raises(ValidationFailed) as caught:
        await env.runner.start(req)
    assert caught.value.field == "context"
    line = str(caught.value)
    assert line.startswith("Error: context:") and "\n" not in line
    assert "roundtabled install-tool --opencode 2" in line and str(bare) in line


async def test_extend_continues_a_concluded_roundtable_whose_seats_do_not_see_the_verdict(
    env: Env,
) -> None:
    """extend on 2.x: a concluded roundtable gets one more round under the new prompt (the
    1.x rules: same agents, its own call options), the observer runs again, the result counts
    both rounds; the extension's seats never see the first verdict, its observer does. A second
    extend while the first runs is refused naming it; a USD budget is refused (2.x lists no
    price)."""
    state, result, _ = await run_debate(
        env, {"rounds": 1, "until": "rounds", "prompt": "Ship behind a flag?"}, ["pm", "dev"], 1
    )
    assert result["endReason"] == "completed"
    s2 = state.session_id
    assert await env.runner.finalized(s2, 30)
    since = len(env.llm.requests)
    for seat in ("pm", "dev"):
        env.llm.script(Text(text=reply(seat, 2), first_byte_delay=1.0), agent=seat)
    env.llm.script(Text(text="SUMMARY: still a flag, with a date."), agent=OBSERVER_AGENT)
    usd = parse_request(
        {"sessionID": s2, "prompt": "Now the costs.", "rounds": 1, "budget": {"usd": 1.0}}
    )
    with pytest.raises(ValidationFailed) as caught:
        await env.runner.start(usd)
    assert caught.value.field == "budget.usd"
    req = parse_request({"sessionID": s2, "prompt": "Now the costs.", "rounds": 1})
    extended = await env.runner.start(req)
    assert extended.phase.value == "active" and extended.total_rounds == 2
    with pytest.raises(ValidationFailed) as again:
        await env.runner.start(req)
    assert again.value.field == "sessionID" and "still active" in str(again.value)
    result = await env.runner.wait_result(s2, 120)
    assert result is not None and result["endReason"] == "completed", result
    contract = result["result"]
    assert contract["status"]["roundsCompleted"] == 2
    assert "SUMMARY: still a flag, with a date." in result["summary"]
    requests = [r for r in env.llm.requests[since:] if r.kind == "turn"]
    assert [r.agent for r in requests] == ["pm", "dev", OBSERVER_AGENT]
    verdict = "SUMMARY: ship behind a flag."
    for r in requests[:2]:
        assert verdict not in "\n".join(said(r, "assistant")), r.agent
        assert "Now the costs." in said(r, "user")[-1]
    assert verdict in "\n".join(said(requests[2], "assistant"))
    assert await env.runner.finalized(s2, 30)
    info = await env.port.client.get_session(s2)
    assert info.title is not None and info.title.count("CONCLUDED") == 1


async def test_until_converged_stops_once_the_seats_hold_their_positions(env: Env) -> None:
    """until 'converged' on 2.x: both seats hold 'flag' in rounds 1 and 2 of 4: the debate
    stops after round 2 with end reason converged and the observer runs."""
    _, result, requests = await run_debate(
        env, {"rounds": 4, "until": "converged", "prompt": "Flag?"}, ["pm", "dev"], 2
    )
    assert result["endReason"] == "converged", result
    assert [r.agent for r in requests] == ["pm", "dev", "pm", "dev", OBSERVER_AGENT]
    assert result["result"]["status"]["roundsCompleted"] == 2


async def test_a_token_budget_stops_the_debate_before_a_turn_would_pass_it(env: Env) -> None:
    """budget.tokens on 2.x: the tokens the server records for each reply are counted; once
    the next turn would pass the budget (the observer's reserve kept), the debate stops with
    end reason budget and the observer still runs."""
    _, result, requests = await run_debate(
        env,
        {"rounds": 4, "until": "rounds", "prompt": "Flag?", "budget": {"tokens": 500}},
        ["pm", "dev"],
        4,
    )
    assert result["endReason"] == "budget", result["result"]["status"]
    agents = [r.agent for r in requests]
    assert agents[-1] == OBSERVER_AGENT and 1 <= len(agents) - 1 < 8, agents
    assert result["result"]["usage"]["input"] > 0  # counted from what the server recorded
    # the seats' scripted replies the stop left unused: not for the next test
    env.llm.reset()


async def test_a_dry_run_on_2x_answers_the_plan_and_creates_no_session(env: Env) -> None:
    """dryRun on 2.x: the seats and the observer with their models as a start reads them, the
    estimates, every price unknown (2.x lists none: null, never 0), no session created; an
    unknown agent and a USD budget are refused as a start refuses them."""
    s1 = await env.parent()
    body = {"agents": ["pm", "dev"], "prompt": "Flag?", "rounds": 3, "parentSessionID": s1}
    answer = await plan.dry_run_v2(env.runner, parse_request({**body, "dryRun": True}))
    assert answer["dryRun"] is True
    seats = answer["plan"]["seats"]
    assert [(s["agent"], s["model"]) for s in seats] == [
        ("pm", "scripted/debater-1"),
        ("dev", "scripted/debater-2"),
    ]
    assert all(s["price"] is None for s in seats)
    assert answer["plan"]["rounds"] == 3
    assert answer["plan"]["estimates"]["full"]["costUsd"] is None
    assert answer["text"].startswith("Dry run")
    assert await env.port.client.children(s1) == []
    with pytest.raises(ValidationFailed) as unknown:
        await plan.dry_run_v2(
            env.runner, parse_request({**body, "agents": ["pm", "nobody"], "dryRun": True})
        )
    assert unknown.value.field == "agents"
    with pytest.raises(ValidationFailed) as usd:
        await plan.dry_run_v2(
            env.runner, parse_request({**body, "dryRun": True, "budget": {"usd": 2}})
        )
    assert usd.value.field == "budget.usd"


async def cli(dp: DaemonProc, *args: str) -> tuple[int, str, str]:
    """``roundtabled ARGS`` against the daemon of ``dp``: exit code, stdout, stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "roundtabled",
        *args,
        env=dp.env(None),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_feed_list_export_extend_and_watch_of_the_cli_on_2x(
    env: Env, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Through a daemon on 2.x: the progress feed gives each turn as it is recorded, then the
    end and the result (`done` last); `roundtabled list` lists the roundtable, `export` gives
    the whole debate (Markdown and JSON), `extend` runs one more round showing its turns, and
    `watch` of the concluded roundtable prints its verdict; none answers 501 any more. A daemon
    started again lists, shows, exports and extends it from S2's metadata."""
    dp = DaemonProc(
        tmp_path_factory.mktemp("v2feat"),
        env.server.url,
        env.directory,
        password=str(env.server.password),
    )
    s1 = await env.parent()
    for seat in ("pm", "dev"):
        # pm's turn is slow: the feed is open before the first turn is recorded
        delay = 2.0 if seat == "pm" else 0.0
        env.llm.script(Text(text=reply(seat, 1), first_byte_delay=delay), agent=seat)
    env.llm.script(Text(text="SUMMARY: ship behind a flag."), agent=OBSERVER_AGENT)
    items: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as http:
        try:
            await dp.start(http)
            status, made = await control_call(
                http,
                dp.url,
                dp.token,
                "POST",
                "/v1/roundtables",
                {"agents": ["pm", "dev"], "rounds": 1, "prompt": "Flag?", "parentSessionID": s1},
                timeout=60,
            )
            assert status == 200, made
            s2 = made["sessionID"]
            async with http.get(
                f"{dp.url}/v1/roundtables/{s2}/events",
                headers={"Authorization": f"Bearer {dp.token}"},
                timeout=aiohttp.ClientTimeout(total=120),
            ) as resp:
                assert resp.status == 200, await resp.text()
                async for line in resp.content:
                    if line.startswith(b"data: "):
                        items.append(json.loads(line[6:]))
                        if items[-1]["type"] == "done":
                            break
            turns = [i["entry"]["agent"] for i in items if i["type"] == "turn"]
            assert turns == ["pm", "dev", OBSERVER_AGENT], items
            assert [i["type"] for i in items][-2:] == ["phase", "done"], items
            assert items[-1]["endReason"] == "completed"

            rc, out, err = await cli(dp, "list")
            assert rc == 0, err
            assert s2 in out and "completed" in out, out
            rc, out, err = await cli(dp, "export", s2, "--format", "md")
            assert rc == 0, err
            for seat in ("pm", "dev"):
                assert reply(seat, 1).splitlines()[0] in out, out
            rc, out, err = await cli(dp, "export", s2, "--format", "json")
            assert rc == 0, err
            data = json.loads(out)
            assert [t["agent"] for t in data["turns"]] == ["pm", "dev", OBSERVER_AGENT]

            for seat in ("pm", "dev"):
                env.llm.script(Text(text=reply(seat, 2)), agent=seat)
            env.llm.script(Text(text="SUMMARY: a flag and a date."), agent=OBSERVER_AGENT)
            rc, out, err = await cli(dp, "extend", s2, "--rounds", "1", "Now the costs.")
            assert rc == 0, (out, err, dp.log()[-3000:])
            assert "Status: completed, 2/2 rounds" in out, out
            for seat in ("pm", "dev"):
                assert reply(seat, 2).splitlines()[0] in out, out
                assert reply(seat, 1).splitlines()[0] not in out, out  # printed before
            rc, out, err = await cli(dp, "watch", s2)
            assert rc == 0, err
            assert "── verdict ──" in out and "does not stream" not in err, (out, err)

            # a new daemon knows the roundtable only from S2's metadata
            assert await dp.terminate() == 0
            await dp.start(http)
            rc, out, err = await cli(dp, "list")
            assert rc == 0 and s2 in out and "completed" in out, (out, err)
            rc, out, err = await cli(dp, "status", s2)
            assert rc == 0 and "completed" in out, (out, err)
            rc, out, err = await cli(dp, "export", s2, "--format", "json")
            assert rc == 0, err
            turns = json.loads(out)["turns"]
            assert [t["agent"] for t in turns] == ["pm", "dev", OBSERVER_AGENT] * 2
            assert turns[3]["response"].strip() == reply("pm", 2)  # in full, from S2
            for seat in ("pm", "dev"):
                env.llm.script(Text(text=reply(seat, 3)), agent=seat)
            env.llm.script(Text(text="SUMMARY: a flag, a date, a budget."), agent=OBSERVER_AGENT)
            rc, out, err = await cli(dp, "extend", s2, "--rounds", "1", "And the risks?")
            assert rc == 0, (out, err, dp.log()[-3000:])
            assert "Status: completed, 3/3 rounds" in out, out
        finally:
            dp.kill_all()


async def test_without_the_plugin_a_start_says_so_in_one_line_and_doctor_names_install_tool(
    env: Env, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """A project whose 2.x instance does not load the roundtabled plugin: a 'full' start runs
    and its notes say in one line that every earlier prompt stays in the requests, naming
    `roundtabled install-tool` (and not that the plugin shaped them); `roundtabled doctor`'s plugin
    check says the same line for that project, and passes for the project that has it."""
    bare = await env.server.add_project("bare-full")
    s1 = await env.port.client.create_session(directory=str(bare), title="S1")
    for seat in ("pm", "dev"):
        env.llm.script(Text(text=reply(seat, 1)), agent=seat)
    env.llm.script(Text(text="SUMMARY: flag."), agent="rv")
    req = parse_request(
        {
            "agents": ["pm", "dev"],
            "observer": "rv",  # the built-in observer is installed with the plugin
            "rounds": 1,
            "prompt": "Q?",
            "parentSessionID": s1.id,
        }
    )
    state = await env.runner.start(req)
    (line,) = [n for n in state.notes if "roundtabled plugin" in n]
    assert line.startswith("the roundtabled plugin is not loaded by OpenCode 2.x for S2's")
    assert "roundtabled install-tool --opencode 2" in line
    result = await env.runner.wait_result(state.session_id, 120)
    assert result is not None and result["endReason"] == "completed", result
    notes = result["result"]["status"]["notes"]
    assert line in notes and MODE_NOTES["plugin"] not in notes, notes

    home = tmp_path_factory.mktemp("v2doctor")
    settings = load_settings(
        {"server_url": env.server.url},
        env={
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / "cfg"),
            "OPENCODE_SERVER_PASSWORD": str(env.server.password),
        },
    )
    denv = {"XDG_CONFIG_HOME": str(home / "cfg"), "HOME": str(home)}
    assert await doctor.run(settings, "http://127.0.0.1:9", env=denv, cwd=bare) == 1
    out = capsys.readouterr().out
    (said,) = [x for x in out.splitlines() if x.split()[1:2] == ["plugin"]]
    assert said.startswith("✗") and line.replace("S2's directory", str(bare)) in said, said
    # the project that has it: the plugin passes (no daemon runs at the control URL given)
    assert (
        await doctor.run(settings, "http://127.0.0.1:9", env=denv, cwd=env.server.project_dir) == 1
    )
    out = capsys.readouterr().out
    (said,) = [x for x in out.splitlines() if x.split()[1:2] == ["plugin"]]
    assert said.startswith("✓"), out
    assert "1 problem(s): daemon" in out


async def test_an_independent_opening_runs_each_seat_in_its_own_session(env: Env) -> None:
    """opening 'independent' on 2.x: round 1 runs in a child session per seat, each seat seeing
    only the topic; the openings are recorded into S2, so round 2's seats see both of them (and
    the topic); the observer runs; the result counts two rounds, the openings as round 1."""
    s1 = await env.parent()
    since = len(env.llm.requests)
    for rnd in (1, 2):
        for seat in ("pm", "dev"):
            env.llm.script(Text(text=reply(seat, rnd)), agent=seat)
    env.llm.script(Text(text="SUMMARY: ship behind a flag."), agent=OBSERVER_AGENT)
    req = parse_request(
        {
            "agents": ["pm", "dev"],
            "rounds": 2,
            "until": "rounds",
            "opening": "independent",
            "prompt": "Ship behind a flag?",
            "parentSessionID": s1,
        }
    )
    state = await env.runner.start(req)
    s2 = state.session_id
    result = await env.runner.wait_result(s2, 150)
    assert result is not None and result["endReason"] == "completed", result
    assert result["result"]["status"]["roundsCompleted"] == 2
    requests = [r for r in env.llm.requests[since:] if r.kind == "turn"]
    assert sorted(r.agent or "" for r in requests[:2]) == ["dev", "pm"]
    assert [r.agent for r in requests[2:]] == ["pm", "dev", OBSERVER_AGENT]
    seat_sessions = {c.id for c in await env.port.client.children(s2)}
    assert len(seat_sessions) == 2
    for r in requests[:2]:
        assert r.session_id in seat_sessions, r.session_id  # its own session
        assert said(r, "assistant") == []  # nobody else's opening
        assert "Ship behind a flag?" in "\n".join(said(r, "user"))
    first_lines = {reply(seat, 1).splitlines()[0] for seat in ("pm", "dev")}
    for r in requests[2:4]:
        assert r.session_id == s2
        seen = "\n".join(said(r, "user") + said(r, "assistant"))
        assert all(line in seen for line in first_lines), seen
    final = env.runner.state_of(s2)
    assert final is not None
    assert [(e.agent, e.round) for e in final.history if e.kind == "turn"] == [
        ("pm", 1),
        ("dev", 1),
        ("pm", 2),
        ("dev", 2),
    ]


async def test_a_cancel_during_an_independent_opening_stops_every_seat(env: Env) -> None:
    """A cancel while the seats' openings run in their own sessions: each running seat is
    interrupted, round 2 never starts, the result says cancelled."""
    s1 = await env.parent()
    pms = len(env.llm.requests_for(agent="pm"))
    since = len(env.llm.requests)
    env.llm.script(Text(text="pm: slow", first_byte_delay=30.0), agent="pm")
    env.llm.script(Text(text=reply("dev", 1)), agent="dev")
    req = parse_request(
        {
            "agents": ["pm", "dev"],
            "rounds": 2,
            "opening": "independent",
            "prompt": "Flag?",
            "parentSessionID": s1,
        }
    )
    s2 = (await env.runner.start(req)).session_id
    await env.llm.wait_for_requests(pms + 1, 30, agent="pm")
    await env.runner.cancel(s2, summarize=False, reason="cancelled by the user")
    result = await env.runner.wait_result(s2, 60)
    assert result is not None and result["endReason"] == "cancelled", result
    assert await env.runner.finalized(s2, 30)
    agents = sorted(r.agent or "" for r in env.llm.requests[since:] if r.kind == "turn")
    assert agents == ["dev", "pm"], agents  # the two openings, nothing after them
    active = await env.port.client.active()
    assert not {c.id for c in await env.port.client.children(s2)} & set(active)


async def test_a_daemon_killed_during_an_independent_opening_resumes_it_once(
    env: Env, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`kill -9` while a seat's opening runs in its own session: the restarted daemon adopts
    the seats' sessions from S2's children and the round from S2's metadata; no session is
    created twice, no opening is asked twice, round 2 and the observer follow, completed."""
    dp = DaemonProc(
        tmp_path_factory.mktemp("v2openkill"),
        env.server.url,
        env.directory,
        password=str(env.server.password),
    )
    s1 = await env.parent()
    since = len(env.llm.requests)
    pms = len(env.llm.requests_for(agent="pm"))
    env.llm.script(Text(text=reply("pm", 1), first_byte_delay=3.0), agent="pm")
    env.llm.script(Text(text=reply("dev", 1)), agent="dev")
    for seat in ("pm", "dev"):
        env.llm.script(Text(text=reply(seat, 2)), agent=seat)
    env.llm.script(Text(text="SUMMARY: resumed."), agent=OBSERVER_AGENT)
    async with aiohttp.ClientSession() as http:
        try:
            await dp.start(http)

            async def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
                return await control_call(http, dp.url, dp.token, method, path, body, timeout=60)

            status, made = await call(
                "POST",
                "/v1/roundtables",
                {
                    "agents": ["pm", "dev"],
                    "rounds": 2,
                    "until": "rounds",
                    "opening": "independent",
                    "prompt": "Flag?",
                    "parentSessionID": s1,
                },
            )
            assert status == 200, made
            s2 = made["sessionID"]
            await env.llm.wait_for_requests(pms + 1, 30, agent="pm")
            dp.proc.kill()  # SIGKILL while pm's opening runs in its own session
            await dp.proc.wait()
            await dp.start(http)
            result: dict[str, Any] = {}
            for _ in range(6):
                status, result = await call("GET", f"/v1/roundtables/{s2}/result?wait=20")
                assert status == 200, result
                if result.get("done"):
                    break
            assert result.get("done"), (result, dp.log()[-3000:])
            assert result["endReason"] == "completed", result
            assert result["result"]["status"]["roundsCompleted"] == 2
        finally:
            dp.kill_all()
    turns = [r.agent or "" for r in env.llm.requests[since:] if r.kind == "turn"]
    assert sorted(turns[:2]) == ["dev", "pm"] and turns[2:] == ["pm", "dev", OBSERVER_AGENT]
    assert len(await env.port.client.children(s2)) == 2
