"""the daemon is level-triggered and survives stream, server and state faults.

Real ``opencode serve`` + scripted LLM; stream faults go through :class:`FaultProxy`
(tests/fakes/proxy.py) placed between the daemon and the real server. Each scenario passes only if
every seat was prompted exactly once per round (signed turn markers in S2 and one model request per
turn), the observer once, the result reached S1 exactly once, and no exception escaped into the
daemon's log:

- every wake-up event dropped → the periodic resync drives the debate (a missed event costs at
  most one resync period, never a hang);
- ``session.idle`` duplicated late and stale ones injected → no second prompt;
- the stream cut exactly when a ``session.idle`` passes → reconnect + resync;
- half-open stream (socket open, no bytes) → the debate goes on by resync and the stream is
  declared dead and reconnected after two missed heartbeats (slow);
- unknown event types, malformed and 8 MB events → tolerated;
- the OpenCode server SIGKILLed mid-turn and restarted on the same data directory;
- SIGTERM of a daemon subprocess mid-round → exit 0 within 10 s, trusted state in S2, a restart
  resumes and finishes exactly once;
- one roundtable with a corrupt and one with an unknown-version (validly signed) state block →
  each reported and skipped, the other roundtable keeps running.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roundtabled.core.state import (
    END_SUFFIXES,
    META_FOOTER,
    META_HEADER,
    META_KEY,
    STATE_VERSION,
    decode_state,
)
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import ScriptedLLM
from tests.fakes.daemon_proc import (
    DaemonProc,
    assert_each_turn_once,
    observer_config,
    text_of,
    turn_markers,
)
from tests.fakes.proxy import FaultProxy, event_type

AGENTS = ["pm", "dev", "rv"]
WAKES = ("session.idle", "session.status", "session.error", "message.updated")


@pytest.fixture
async def proxied(rt_factory: Any) -> AsyncIterator[tuple[Any, FaultProxy]]:
    """``(rt, proxy)``: the default environment with the daemon talking through the proxy."""
    rt = await rt_factory()
    proxy = FaultProxy(rt.server.url)
    await proxy.start()
    await rt.restart_daemon(server_url=proxy.url)
    try:
        yield rt, proxy
    finally:
        await proxy.stop()


def no_escaped_exceptions(caplog: pytest.LogCaptureFixture) -> None:
    """No record with a traceback and no unretrieved task exception."""
    bad = [
        r
        for r in caplog.records
        if r.exc_info or "Traceback" in r.getMessage() or "never retrieved" in r.getMessage()
    ]
    assert not bad, [f"{r.name}: {r.getMessage()}" for r in bad]


async def debate_once(
    rt: Any, *, rounds: int = 2, label: str = "", timeout: float = 150, **body: Any
) -> tuple[str, str]:
    """Run a 3-seat debate under the current faults; assert the exactly-once criteria."""
    s1 = await rt.new_parent()
    s2 = await rt.start(
        agents=AGENTS, prompt=f"{label}: pick a queue", rounds=rounds, parentSessionID=s1, **body
    )
    result = await rt.result(s2, timeout=timeout)
    await settle(rt, s2)
    msgs = await rt.messages(s2)
    assert_each_turn_once(msgs, s2, rt.daemon.signer, rt.llm, AGENTS, rounds, label=label)
    s1_msgs = await rt.messages(s1)
    assert len(s1_msgs) == 1, [text_of(m) for m in s1_msgs]
    assert result["summary"] in text_of(s1_msgs[0])
    return s1, s2


async def debate_while(
    rt: Any, label: str, inject: Callable[[], Awaitable[None]], *, every: float
) -> None:
    """:func:`debate_once` while ``inject()`` runs again and again, ``every`` s apart, until the
    debate is over (the run in progress then finishes before this returns)."""
    stop = asyncio.Event()

    async def repeat() -> None:
        while not stop.is_set():
            await inject()
            await asyncio.sleep(every)

    task = asyncio.create_task(repeat())
    try:
        await debate_once(rt, label=label)
    finally:
        stop.set()
        await task


async def settle(rt: Any, s2: str, timeout: float = 60) -> None:
    """Wait until S2 is finalized on the server (title + index) and the daemon can change
    nothing more (``RT.settled``): a duplicate would have been made by then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = await rt.session(s2)
        idx = (info.get("metadata") or {}).get(META_KEY) or {}
        # the title ends with the end's word (a scripted debate may end by repetition: ENDED)
        if idx.get("finalized") and str(info.get("title", "")).endswith(END_SUFFIXES):
            await rt.settled(s2, timeout)
            return
        await asyncio.sleep(0.3)
    raise AssertionError(f"{s2} not finalized in {timeout} s")


# -- event stream faults ----------------------------------------------------------------------


async def test_every_wake_event_lost_the_resync_finishes_the_debate(
    proxied: tuple[Any, FaultProxy], caplog: pytest.LogCaptureFixture
) -> None:
    """No idle/status/message event reaches the daemon: the 2 s resync alone drives all turns."""
    rt, proxy = proxied
    proxy.drop = lambda p: event_type(p) in WAKES
    await debate_once(rt, label="lost events")
    assert proxy.dropped.count("session.idle") >= 6
    no_escaped_exceptions(caplog)


async def test_duplicated_and_stale_idle_events_never_prompt_twice(
    proxied: tuple[Any, FaultProxy], caplog: pytest.LogCaptureFixture
) -> None:
    """Every ``session.idle`` arrives twice (0.4 s apart) and stale idles for S2 are injected
    every 0.2 s while its seats are busy: each turn is still prompted once."""
    rt, proxy = proxied
    proxy.duplicate_after = 0.4
    for agent in AGENTS:
        rt.llm.script(
            *[Text(text=f"{agent} speaks slowly " * 8, chunk_delay=0.05)] * 2, agent=agent
        )

    async def spam() -> None:
        for ses in list(rt.daemon.engine.tables):
            await proxy.inject(
                {
                    "directory": rt.directory,
                    "payload": {"type": "session.idle", "properties": {"sessionID": ses}},
                }
            )
            await proxy.inject(
                {
                    "directory": rt.directory,
                    "payload": {
                        "type": "session.status",
                        "properties": {"sessionID": ses, "status": {"type": "idle"}},
                    },
                }
            )

    await debate_while(rt, "duplicates", spam, every=0.2)
    assert proxy.forwarded.count("session.idle") >= 12
    no_escaped_exceptions(caplog)


async def test_stream_cut_exactly_when_session_idle_is_sent(
    proxied: tuple[Any, FaultProxy], caplog: pytest.LogCaptureFixture
) -> None:
    """The next 3 ``session.idle`` events are swallowed and their stream closed at that moment:
    the daemon reconnects, resyncs, and finishes exactly once."""
    rt, proxy = proxied
    before = proxy.stream_connections
    proxy.cut_on_idle = 3
    await debate_once(rt, label="cut on idle")
    assert proxy.cuts == 3
    assert proxy.stream_connections >= before + 3
    no_escaped_exceptions(caplog)


@pytest.mark.slow
async def test_half_open_stream_debate_continues_and_stream_is_replaced(
    proxied: tuple[Any, FaultProxy], caplog: pytest.LogCaptureFixture
) -> None:
    """Socket open, no bytes at all: the debate completes by periodic resync (no hang), and the
    silent stream is declared dead after two missed heartbeats and reconnected."""
    rt, proxy = proxied
    connections = proxy.stream_connections
    proxy.half_open()
    t0 = time.monotonic()
    # The debate completes on the periodic resync whether or not the silent stream has been
    # replaced yet; the replacement itself is checked below.
    await debate_once(rt, label="half-open")
    proxy.heal()
    deadline = t0 + 90
    while proxy.stream_connections <= connections or not rt.daemon.stream.connected:
        assert time.monotonic() < deadline, "the half-open stream was never replaced"
        await asyncio.sleep(0.5)
    # 25 s of silence (two heartbeats of 10 s + margin) plus a capped backoff.
    assert time.monotonic() - t0 < 60
    no_escaped_exceptions(caplog)


async def test_unknown_malformed_and_8_mb_events_are_tolerated(
    proxied: tuple[Any, FaultProxy], caplog: pytest.LogCaptureFixture
) -> None:
    """Events of an unknown type, broken JSON and an 8 MB event arrive mid-debate: nothing
    breaks, the stream stays up."""
    rt, proxy = proxied
    connections = proxy.stream_connections
    huge = {
        "directory": rt.directory,
        "payload": {
            "type": "message.part.updated",
            "properties": {
                "part": {
                    "id": "prt_x",
                    "sessionID": "ses_elsewhere1",
                    "messageID": "msg_x",
                    "type": "text",
                    "text": "x" * (8 * 1024 * 1024),
                }
            },
        },
    }

    async def noise() -> None:
        await proxy.inject({"payload": {"type": "future.event.v9", "properties": {"a": 1}}})
        await proxy.inject(b"{not json at all")
        await proxy.inject({"payload": {"type": "session.idle", "properties": {}}})
        await proxy.inject({"payload": "not an object"})
        await proxy.inject(huge)

    await debate_while(rt, "noise", noise, every=1.0)
    assert proxy.stream_connections == connections  # never reconnected: all tolerated
    no_escaped_exceptions(caplog)


# -- server faults ------------------------------------------------------------------------------


@pytest.mark.slow
async def test_opencode_server_killed_mid_turn_and_restarted(
    rt_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """SIGKILL of ``opencode serve`` while dev is answering, restart on the same data directory:
    the cut turn is settled (never prompted again), the debate concludes, result once in S1."""
    rt = await rt_factory()
    rt.llm.script(
        Text(text="dev speaks at length " * 40, chunk_size=8, chunk_delay=0.1), agent="dev"
    )
    s1 = await rt.new_parent()
    s2 = await rt.start(
        agents=AGENTS,
        prompt="Kill the server mid-turn",
        rounds=1,
        parentSessionID=s1,
        turnTimeout=30,
    )
    await rt.llm.wait_for_requests(1, within=60, session=s2, agent="dev")
    await asyncio.sleep(0.5)
    url = rt.server.url
    await rt.server.kill()
    await asyncio.sleep(2.0)  # the daemon sees refused connections meanwhile
    await rt.server.restart()
    if rt.server.url != url:
        await rt.restart_daemon()
    result = await rt.result(s2, timeout=180)
    await settle(rt, s2)
    msgs = await rt.messages(s2)
    turns, observers = turn_markers(msgs, s2, rt.daemon.signer)
    assert turns == [(0, 0), (0, 1), (0, 2)] and observers == 1
    seat_reqs = [r.agent for r in rt.llm.requests_for(session=s2, kind="turn")]
    assert seat_reqs[:3] == AGENTS and len(seat_reqs) == 4, seat_reqs
    s1_msgs = await rt.messages(s1)
    assert len(s1_msgs) == 1 and result["summary"] in text_of(s1_msgs[0])
    no_escaped_exceptions(caplog)


@pytest.mark.timing
async def test_sigterm_mid_round_exits_0_within_10_s_and_restart_resumes(
    tmp_path: Path, scripted_llm: ScriptedLLM, opencode_factory: Any
) -> None:
    """A daemon subprocess gets SIGTERM while dev answers: exit code 0 within 10 s, S2 holds a
    trusted consistent state, and a new daemon finishes the debate exactly once."""
    server = await opencode_factory(observer_config(scripted_llm))
    for agent in AGENTS:
        scripted_llm.script(
            *[Text(text=f"{agent} thinks aloud " * 10, chunk_size=8, chunk_delay=0.05)] * 2,
            agent=agent,
        )
    d = DaemonProc(tmp_path / "daemon", server.url, str(server.project_dir))
    async with aiohttp.ClientSession(headers=server.auth_headers) as http:
        await d.start(http)
        async with http.post(
            f"{server.url}/session", json={"title": "S1"}, params={"directory": d.directory}
        ) as resp:
            s1 = str((await resp.json())["id"])
        async with http.post(
            d.url + "/v1/roundtables",
            json={
                "agents": AGENTS,
                "rounds": 2,
                "prompt": "SIGTERM mid-round",
                "parentSessionID": s1,
                "directory": d.directory,
            },
            headers={"Authorization": f"Bearer {d.token}"},
        ) as resp:
            s2 = str((await resp.json())["sessionID"])
        await scripted_llm.wait_for_requests(1, within=60, session=s2, agent="dev")
        t0 = time.monotonic()
        code = await d.terminate()
        elapsed = time.monotonic() - t0
        assert code == 0 and elapsed < 10, (code, elapsed)
        # The state block in S2 is trusted and consistent with the prompts sent so far.
        async with http.get(f"{server.url}/session/{s2}") as resp:
            idx = (await resp.json())["metadata"][META_KEY]
        async with http.get(f"{server.url}/session/{s2}/message") as resp:
            msgs = await resp.json()
        part = next(
            p
            for m in msgs
            if m["info"]["id"] == idx["stateMessageID"]
            for p in m["parts"]
            if p["id"] == idx["statePartID"]
        )
        state = decode_state(part["text"], part.get("metadata"), s2, d.signer)
        assert state.active
        turns, _ = turn_markers(msgs, s2, d.signer)
        assert turns == [(0, 0), (0, 1)][: len(turns)] and len(turns) >= 1, turns
        assert (state.current_round, state.current_agent_index) in {
            turns[-1],
            (turns[-1][0], turns[-1][1] + 1),
        }
        # Restart: resumes and finishes exactly once.
        await d.start(http)
        deadline = time.monotonic() + 180
        while True:
            async with http.get(f"{server.url}/session/{s2}") as resp:
                info = await resp.json()
            if info["metadata"][META_KEY].get("finalized") and info["title"].endswith(END_SUFFIXES):
                break
            assert time.monotonic() < deadline, "not resumed to the end"
            await asyncio.sleep(0.5)
        await d.settled(http, s2)
        async with http.get(f"{server.url}/session/{s2}/message") as resp:
            msgs = await resp.json()
        assert_each_turn_once(msgs, s2, d.signer, scripted_llm, AGENTS, 2, label="sigterm")
        async with http.get(f"{server.url}/session/{s1}/message") as resp:
            assert len(await resp.json()) == 1
        assert await d.terminate() == 0
    d.kill_all()
    log = d.log()
    assert "Traceback" not in log
    assert log.count("stopping (window") == 2


# -- state faults -------------------------------------------------------------------------------


async def test_corrupt_and_unknown_version_state_blocks_are_reported_and_skipped(
    rt_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Three roundtables are active when the daemon dies; one state block is made unparsable and
    one gets an unknown version (both validly signed). After a restart those two are reported
    and skipped, the third resumes and concludes; the daemon stays healthy."""
    rt = await rt_factory()
    for agent in AGENTS:
        rt.llm.script(
            *[Text(text=f"{agent} is slow " * 10, chunk_size=4, chunk_delay=0.1)] * 3, agent=agent
        )
    s1 = await rt.new_parent()
    tables = [
        await rt.start(agents=AGENTS, prompt=f"Table {i}", rounds=1, parentSessionID=s1)
        for i in range(3)
    ]
    await rt.kill_daemon()
    signer = rt.daemon.signer
    bad = {tables[0]: "corrupt", tables[1]: "version"}
    for s2, how in bad.items():
        info = await rt.session(s2)
        idx = info["metadata"][META_KEY]
        msg = await rt.oc("GET", f"/session/{s2}/message/{idx['stateMessageID']}")
        part = next(p for p in msg["parts"] if p["id"] == idx["statePartID"])
        if how == "corrupt":
            body = b'{"sessionID": "' + s2.encode() + b'", "phase": '
            part["text"] = f"{META_HEADER}\n{body.decode()}\n{META_FOOTER}"
            version = STATE_VERSION
        else:
            # the card form: the signed body is in the metadata
            body = str(part["metadata"][META_KEY]["body"]).encode()
            version = 99
        part["metadata"] = {
            META_KEY: {"kind": "state", "v": version, "mac": signer.mac("state", s2, body)}
        }
        if how == "version":
            part["metadata"][META_KEY]["body"] = body.decode()
        await rt.oc(
            "PATCH", f"/session/{s2}/message/{idx['stateMessageID']}/part/{part['id']}", part
        )
    caplog.clear()
    await rt._launch()
    result = await rt.result(tables[2], timeout=120)
    assert result["done"]
    await settle(rt, tables[2])
    for s2 in bad:
        status, data = await rt.api("GET", f"/v1/roundtables/{s2}")
        assert status == 404, data
        reported = [
            r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.ERROR and s2 in r.getMessage()
        ]
        assert reported, f"{bad[s2]} block of {s2} was not reported"
    status, health = await rt.api("GET", "/v1/health")
    assert status == 200 and health["ready"] and not rt.task.done()
    no_escaped_exceptions(caplog)
