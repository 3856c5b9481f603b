"""The command line across daemon restarts and interrupts, on the real server with the scripted
LLM (``roundtabled`` as a subprocess, helpers of ``test_cli``).

Proves: ``list`` after a daemon restart shows the roundtables that ran before it (read from the
server's sessions, not from memory), with ``--limit``/``--all``; Ctrl-C on a waiting ``start``
says that the roundtable goes on and how to ``watch`` or ``cancel`` it; a ``start`` waiting
while the daemon restarts reattaches by itself and prints every turn once; ``watch`` of a
roundtable that concluded before the restart prints its stored result.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from pathlib import Path
from urllib.parse import urlparse

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.offline.scripted_actions import Hang, Text

from .cli_helpers import Run, cli, spawn
from .conftest import RT
from .test_cli import TerminalWatch, script_debate


def control_port(rt: RT) -> int:
    port = urlparse(rt.control).port
    assert port
    return port


async def test_list_after_a_daemon_restart_reads_the_roundtables_from_the_server(rt: RT) -> None:
    done = []
    for topic in ("First topic", "Second topic", "Third topic"):
        script_debate(rt)
        s2 = await rt.start(agents=["pm", "dev"], prompt=topic)
        await rt.result(s2)
        await rt.finalized(s2)
        done.append(s2)
    await rt.restart_daemon(control_port=control_port(rt))
    engine = rt.daemon.engine
    assert not engine.tables and not engine.recent  # the new daemon holds none of them in memory

    run = await cli(rt, "list")
    assert run.code == 0, run
    rows = [line for line in run.out.splitlines() if line.startswith("ses_")]
    assert [r.split()[0] for r in rows] == done[::-1]  # newest first
    assert all(" completed " in r and "1/1" in r for r in rows), rows
    assert "Third topic" in rows[0] and "First topic" in rows[2]

    run = await cli(rt, "list", "--limit", "2")
    assert [line.split()[0] for line in run.out.splitlines() if line.startswith("ses_")] == (
        done[:0:-1]
    )
    assert "… and 1 older (roundtabled list --all)" in run.out
    run = await cli(rt, "list", "--all", "--limit", "1", "--json")
    assert [r["sessionID"] for r in json.loads(run.out)] == done[::-1]
    bad = await cli(rt, "list", "--limit", "0")
    assert bad.code == 2 and bad.err.startswith("Error: --limit"), bad


async def test_ctrl_c_on_start_says_the_roundtable_goes_on_and_how_to_watch_or_cancel(
    rt: RT,
) -> None:
    rt.llm.script(Text(text="PM finished its turn."), agent="pm")
    rt.llm.script(Hang(), agent="dev")
    proc = await spawn(
        rt, "start", "--agents", "pm,dev", "--directory", rt.directory, "Interrupt me"
    )
    await rt.llm.wait_for_requests(1, 60, agent="dev")
    s2 = str(next(r for r in rt.llm.requests if r.agent == "dev").session_id)
    proc.send_signal(signal.SIGINT)
    _out, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 130
    text = err.decode()
    assert f"the roundtable {s2} goes on" in text, text
    assert f"roundtabled watch {s2}" in text and f"roundtabled cancel {s2}" in text
    assert "Traceback" not in text
    _, st = await rt.api("GET", f"/v1/roundtables/{s2}")
    assert st["phase"] == "active" and st["agent"] == "dev"  # Ctrl-C stopped following only


async def test_a_waiting_start_reattaches_when_the_daemon_restarts(rt: RT) -> None:
    rt.llm.script(Text(text="PM speaks first."), agent="pm")
    rt.llm.script(Text(text="DEV answers after the restart.", first_byte_delay=5.0), agent="dev")
    rt.llm.script(Text(text="SUMMARY: reattached."), agent=OBSERVER_AGENT)
    proc = await spawn(
        rt, "start", "--agents", "pm,dev", "--directory", rt.directory, "Restart under me"
    )
    await rt.llm.wait_for_requests(1, 60, agent="dev")
    await rt.restart_daemon(control_port=control_port(rt))
    assert proc.stdout is not None and proc.stderr is not None
    reads = asyncio.gather(proc.stdout.read(), proc.stderr.read())
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 60)
    if proc.returncode is None:
        proc.kill()  # still waiting after 60 s: fails below with what it printed
    out, err = await reads
    run = Run(await proc.wait(), out.decode(), err.decode())
    assert run.code == 0, run
    assert "reattaching" in run.err and "reattached" in run.err, run.err
    # Turn headers only (the verdict that ends the output has a "── verdict ──" header).
    heads = [ln for ln in run.out.splitlines() if ln.startswith("── ") and " · round " in ln]
    assert heads == ["── pm · round 1 ──", "── dev · round 1 ──"], run.out
    assert run.out.count("DEV answers after the restart.") == 1
    assert run.out.count("SUMMARY: reattached.") == 1


async def test_watch_of_a_roundtable_concluded_before_a_restart_prints_its_result(
    rt: RT,
) -> None:
    script_debate(rt)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Concluded before")
    await rt.result(s2)
    await rt.finalized(s2)
    await rt.restart_daemon(control_port=control_port(rt))
    run = await cli(rt, "watch", s2)
    assert run.code == 0, run
    assert "SUMMARY: the panel agrees." in run.out


async def test_the_progress_line_names_the_observer_without_a_round_past_the_last(
    rt: RT,
) -> None:
    """A 1-round debate's observer read ``round 2/1`` on the progress line."""
    rt.llm.script(Text(text="PM speaks."), agent="pm")
    rt.llm.script(Text(text="DEV speaks."), agent="dev")
    rt.llm.script(Text(text="SUMMARY: slow.", first_byte_delay=4.0), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="One round", rounds=1)
    await rt.llm.wait_for_requests(1, 30, agent="pm")
    async with TerminalWatch(rt, s2) as watch:  # a terminal: the progress line is on
        code = await watch.wait()
    text = watch.text
    assert code == 0, text
    assert "the observer is speaking" in text, text
    assert "round 2/1" not in text


async def test_doctor_says_which_project_it_checked_and_takes_directory(
    rt: RT, tmp_path: Path
) -> None:
    """From another directory doctor said the tools were installed 'neither here nor
    globally' while ``agents`` listed the seats."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = await cli(rt, "doctor", cwd=str(elsewhere))
    assert run.code == 1, run
    assert f"project {elsewhere}" in run.out
    assert f"neither in the project ({elsewhere}/.opencode)" in run.out
    assert f"install-tool --project {elsewhere}" in run.out
    run = await cli(rt, "doctor", "--directory", rt.directory, cwd=str(elsewhere))
    assert run.code == 0, run.out + run.err
    assert f"project {Path(rt.directory).resolve()}" in run.out


async def test_status_after_a_cancel_in_round_1_shows_round_1(rt: RT) -> None:
    """After a cancel during round 1 of 3, ``status`` showed ``round: 2/3``."""
    rt.llm.script(Text(text="PM finished its turn."), agent="pm")
    rt.llm.script(Hang(), agent="dev")
    s2 = await rt.start(agents=["pm", "dev"], prompt="Cancel in round 1", rounds=3)
    await rt.llm.wait_for_requests(1, 30, agent="dev")
    run = await cli(rt, "status", s2)
    assert "round:    1/3" in run.out, run.out
    assert (await cli(rt, "cancel", s2)).code == 0
    run = await cli(rt, "status", s2)
    assert run.code == 0, run
    assert "round:    1/3 (ended; 0 complete)" in run.out, run.out
    st = json.loads((await cli(rt, "status", "--json", s2)).out)
    assert (st["round"], st["totalRounds"]) == (1, 3)
