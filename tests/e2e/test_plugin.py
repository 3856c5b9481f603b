"""The roundtable plugin on the real ``opencode serve`` (docs/plugin.md).

With the plugin installed in the project and reporting itself to the daemon, every seat's model
request (recorded by the scripted model) holds the topic's prompt and its own, never the answered
turn prompts of earlier turns, and for ``context: "recent"`` not the replies of the hidden rounds;
its first message is a user message; nothing is written into S2 to hide anything. The plugin
leaves every other session alone, keys on the daemon's markers (not on the latest message), and
an error inside it leaves the request as it was and the turn running.
"""

from __future__ import annotations

import asyncio
import time
from importlib import resources
from typing import Any

import pytest

from roundtabled.core.state import MODE_NOTES, EndReason
from roundtabled.engine.plugins import PLUGIN_VERSION
from roundtabled.offline.scripted_llm import RecordedRequest, content_text
from roundtabled.service import install
from tests.e2e.cli_helpers import cli
from tests.e2e.conftest import RT, roundtable_config
from tests.e2e.edge_helpers import wait_for
from tests.regressions.conftest import LogCapture

AGENTS = ["pm", "dev", "rv"]


async def plugin_reported(rt: RT, timeout: float = 20) -> None:
    """Wait until the daemon has the plugin's report for the project directory."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, health = await rt.api("GET", "/v1/health")
        assert status == 200, health
        dirs = [r["directory"] for r in health["plugin"]["reports"]]
        if rt.directory in dirs:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no plugin report for {rt.directory}; server log:\n{rt.server.log_tail()}")


def _texts(msg: dict[str, Any]) -> str:
    return "\n".join(
        str(p.get("text") or "")
        for p in msg.get("parts") or []
        if p.get("type") == "text" and not p.get("ignored")
    )


def _marker(msg: dict[str, Any]) -> dict[str, Any] | None:
    for p in msg.get("parts") or []:
        md = (p.get("metadata") or {}).get("roundtabled")
        if isinstance(md, dict) and md.get("kind") in ("turn", "observer"):
            return md
    return None


def _request_text(req: RecordedRequest, role: str) -> str:
    return "\n".join(content_text(m.get("content")) for m in req.messages if m.get("role") == role)


async def _debate(rt: RT, s2: str) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """S2's turn prompts (with their marker) and the reply texts by 0-indexed round."""
    msgs = await rt.messages(s2)
    prompts = [m for m in msgs if m["info"]["role"] == "user" and _marker(m)]
    rounds: dict[str, int] = {
        m["info"]["id"]: int(_marker(m)["round"])  # type: ignore[index]
        for m in prompts
        if _marker(m)["kind"] == "turn"  # type: ignore[index]
    }
    replies: dict[str, list[str]] = {}
    for m in msgs:
        parent = m["info"].get("parentID")
        if m["info"]["role"] == "assistant" and parent in rounds and _texts(m):
            replies.setdefault(str(rounds[parent]), []).append(_texts(m))
    return prompts, replies


async def test_with_the_plugin_seats_see_no_earlier_prompt_nor_hidden_rounds(
    rt_factory: Any,
) -> None:
    rt: RT = await rt_factory(plugin=True)
    await plugin_reported(rt)
    status, started = await rt.api(
        "POST",
        "/v1/roundtables",
        {
            "agents": AGENTS,
            "prompt": "Should we split the monolith?",
            "rounds": 5,
            "context": "recent",
            "directory": rt.directory,
        },
    )
    assert status == 200, started
    s2 = started["sessionID"]
    await rt.result(s2, timeout=120)
    await rt.finalized(s2)
    state = await rt.daemon.engine.load_state(s2)
    assert state.end_reason == EndReason.COMPLETED and state.view == "plugin"
    assert MODE_NOTES["plugin"] in state.notes and MODE_NOTES["patch"] not in state.notes
    assert MODE_NOTES["plugin"] in started["notes"]  # the start answer says the mode

    prompts, replies = await _debate(rt, s2)
    turn_prompts = [p for p in prompts if _marker(p)["kind"] == "turn"]  # type: ignore[index]
    assert len(turn_prompts) == 15
    # Nothing was hidden by a write: every turn prompt's text is still visible in S2.
    assert all(_texts(p) for p in turn_prompts)
    opening = _texts(turn_prompts[0])
    seat_requests = [r for r in rt.llm.requests_for(session=s2, kind="turn") if r.agent in AGENTS]
    assert len(seat_requests) == 15
    for n, (req, prompt) in enumerate(zip(seat_requests, turn_prompts, strict=True)):
        rnd = int(_marker(prompt)["round"])  # type: ignore[index]
        users = _request_text(req, "user")
        answers = _request_text(req, "assistant")
        roles = [m.get("role") for m in req.messages if m.get("role") != "system"]
        assert roles and roles[0] == "user", (n, roles)
        assert opening in users and _texts(prompt) in users
        for other in turn_prompts[1:n]:
            assert _texts(other) not in users, f"turn {n} saw an earlier prompt"
        for hidden in range(1, rnd - 1):  # 0-indexed rounds between the opening and the last
            for text in replies[str(hidden)]:
                assert text[:80] not in answers, (
                    f"turn {n} (round {rnd + 1}) saw round {hidden + 1}"
                )
        for kept in {0, rnd - 1} if rnd > 0 else set():
            for text in replies[str(kept)]:
                assert text[:80] in answers, f"turn {n} lacks round {kept + 1}"
        if rnd >= 3:
            assert "[Digest of round(s)" in _texts(prompt)
    # The observer sees the whole debate.
    observer = [r for r in rt.llm.requests_for(session=s2, kind="turn") if r.agent not in AGENTS]
    seen = _request_text(observer[-1], "assistant")
    assert all(t[:80] in seen for ts in replies.values() for t in ts)
    assert MODE_NOTES["plugin"] not in observer[-1].last_user_text  # not a thing gone wrong

    # A person's note as S2's latest message: the earlier prompts stay out of its request.
    before = len(rt.llm.requests)
    await rt.oc(
        "POST",
        f"/session/{s2}/message",
        {"agent": "pm", "parts": [{"type": "text", "text": "A person's note: one more thing."}]},
    )
    note_req = [r for r in rt.llm.requests[before:] if r.kind == "turn"][-1]
    users = _request_text(note_req, "user")
    assert "A person's note" in users and opening in users
    assert not any(_texts(p) in users for p in turn_prompts[1:])

    # Compaction of S2 still works with the plugin in the loop.
    before = len(rt.llm.requests)
    done = await rt.oc(
        "POST", f"/session/{s2}/summarize", {"providerID": "scripted", "modelID": "debater-1"}
    )
    assert done is True
    assert any(r.kind == "compaction" for r in rt.llm.requests[before:]), [
        (r.kind, r.agent, r.system[:60]) for r in rt.llm.requests[before:]
    ]


async def test_with_the_plugin_an_extensions_seats_do_not_see_the_verdict_before_it(
    rt_factory: Any,
) -> None:
    rt: RT = await rt_factory(plugin=True)
    await plugin_reported(rt)
    status, started = await rt.api(
        "POST",
        "/v1/roundtables",
        {"agents": AGENTS, "prompt": "Split the monolith?", "rounds": 1, "directory": rt.directory},
    )
    assert status == 200, started
    s2 = started["sessionID"]
    await rt.result(s2, timeout=120)
    await rt.finalized(s2)
    msgs = await rt.messages(s2)
    observer_prompt = next(m for m in msgs if (_marker(m) or {}).get("kind") == "observer")
    verdict = next(
        _texts(m) for m in msgs if m["info"].get("parentID") == observer_prompt["info"]["id"]
    )
    assert verdict
    before = len(rt.llm.requests)
    status, data = await rt.api(
        "POST", "/v1/roundtables", {"sessionID": s2, "prompt": "Continue: and costs?", "rounds": 1}
    )
    assert status == 200, data
    await rt.result(s2, timeout=120)
    turns = [r for r in rt.llm.requests[before:] if r.session_id == s2 and r.kind == "turn"]
    seats = [r for r in turns if r.agent in AGENTS]
    assert len(seats) == 3
    for req in seats:
        assert verdict[:80] not in _request_text(req, "assistant"), f"{req.agent} saw the verdict"
        assert _texts(observer_prompt)[:80] not in _request_text(req, "user")
        roles = [m.get("role") for m in req.messages if m.get("role") != "system"]
        assert roles[0] == "user"
    # The extension's observer still sees the whole debate, its earlier verdict included.
    observer = [r for r in turns if r.agent not in AGENTS]
    assert observer and verdict[:80] in _request_text(observer[-1], "assistant")


async def test_without_the_plugin_recent_context_is_refused_naming_it(rt: RT) -> None:
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {
            "agents": AGENTS,
            "prompt": "x",
            "rounds": 4,
            "context": "recent",
            "directory": rt.directory,
        },
    )
    assert status == 400 and data["field"] == "context", data
    assert data["error"].startswith("Error:")
    assert "roundtable plugin" in data["error"] and "roundtabled install-tool" in data["error"]


async def test_a_second_server_in_the_same_directory_never_gives_the_plugin_mode(
    rt_factory: Any, opencode_factory: Any
) -> None:
    """The daemon's server lists the project's plugin file but runs no plugin (``--pure``); a
    second server (a TUI's own) in the same directory runs it, and its plugin reports itself to
    the daemon. Neither the report's directory nor the listed file makes it the daemon's server:
    the report is refused and ``context: "recent"`` with it."""
    rt: RT = await rt_factory(plugin=True)
    await plugin_reported(rt)  # the daemon's server runs the plugin: trusted, as it should be
    plugins = rt.daemon.engine.shell.plugins
    rt.server.extra_env["OPENCODE_PURE"] = "1"
    await rt.server.restart()  # now it lists the file and runs nothing; the reports are dropped
    await wait_for(lambda: plugins.version_for(rt.directory) is None, 30, "the report dropped")
    # The report checked again on the reconnect finds the file listed but no plugin running.
    await plugins.checked()
    assert plugins.version_for(rt.directory) is None, "a listed plugin that does not run trusted"
    listed = await rt.oc("GET", "/config", params={"directory": rt.directory})
    assert any("roundtable-plugin.ts" in str(p) for p in listed["plugin"]), listed["plugin"]
    second = await opencode_factory(roundtable_config(rt.llm), name="second-server")
    with LogCapture() as logs:
        async with rt.http.get(
            f"{second.url}/config", params={"directory": rt.directory}
        ) as resp:  # the second server's instance of the project: its plugin loads and reports
            assert resp.status == 200
        await wait_for(
            lambda: (
                any(
                    f"plugin report from {rt.directory} (server {second.url}" in line
                    and "refused" in line
                    for line in logs.lines()
                )
                or plugins.version_for(rt.directory) is not None
            ),
            30,
            "the second server's plugin report",
        )
        await plugins.checked()
    assert plugins.version_for(rt.directory) is None, "a plugin the daemon's server runs not"
    status, data = await rt.api(
        "POST",
        "/v1/roundtables",
        {
            "agents": AGENTS,
            "prompt": "x",
            "rounds": 4,
            "context": "recent",
            "directory": rt.directory,
        },
    )
    assert status == 400 and data["field"] == "context", data


def _label(session: str, rnd: int, seat: int, **extra: Any) -> dict[str, Any]:
    """A text part carrying a turn marker like the daemon's (the plugin cannot check the MAC)."""
    md = {"kind": "turn", "round": rnd, "seat": seat, "agent": "pm", "roundtable": session, **extra}
    return {"type": "text", "text": "label", "ignored": True, "metadata": {"roundtabled": md}}


async def _say(rt: RT, session: str, text: str, *labels: dict[str, Any]) -> list[RecordedRequest]:
    before = len(rt.llm.requests)
    body = {"agent": "pm", "parts": [{"type": "text", "text": text}, *labels]}
    reply = await rt.oc("POST", f"/session/{session}/message", body)
    assert reply["info"].get("error") is None, reply["info"]
    return [r for r in rt.llm.requests[before:] if r.session_id == session and r.kind == "turn"]


async def test_the_plugin_acts_on_roundtable_markers_only_and_an_error_changes_nothing(
    rt_factory: Any,
) -> None:
    # A second copy of the plugin (as when installed in the project and globally): both run.
    # Its own control module, which calls nowhere, in a folder below plugins/ (not loaded there).
    shipped = resources.files("roundtabled") / "tools"
    copy = (shipped / "roundtable-plugin.ts").read_text()
    assert install.CONTROL_IMPORT in copy
    control = install.render_tool(
        (shipped / install.CONTROL_FILE).read_text(),
        control_url="http://127.0.0.1:9",
        token_file="/nonexistent",
    )
    files = {
        ".opencode/plugins/second-copy.ts": copy.replace(
            install.CONTROL_IMPORT, "./second-copy/control.ts"
        ),
        ".opencode/plugins/second-copy/control.ts": control,
    }
    rt: RT = await rt_factory(plugin=True, files=files)
    await plugin_reported(rt)
    where = {"directory": rt.directory}

    async def session(parent: str | None = None) -> str:
        body = {"title": "plain", **({"parentID": parent} if parent else {})}
        return str((await rt.oc("POST", "/session", body, params=where))["id"])

    # A roundtable-like session: the prompts of earlier turns leave the request, the first stays.
    s = await session()
    await _say(rt, s, "PROMPT-A topic", _label(s, 0, 0))
    await _say(rt, s, "PROMPT-B second seat", _label(s, 0, 1))
    [req] = await _say(rt, s, "PROMPT-C next", _label(s, 1, 0, view="plugin"))
    users = _request_text(req, "user")
    assert "PROMPT-A" in users and "PROMPT-C" in users and "PROMPT-B" not in users

    # Without roundtable metadata: untouched.
    plain = await session()
    await _say(rt, plain, "PLAIN-1")
    [req] = await _say(rt, plain, "PLAIN-2")
    assert "PLAIN-1" in _request_text(req, "user")

    # A seat's sub-task (markers naming another session, its roundtable): untouched.
    child = await session(parent=s)
    await _say(rt, child, "CHILD-1", _label(s, 0, 1))
    [req] = await _say(rt, child, "CHILD-2", _label(s, 1, 0, view="plugin"))
    assert "CHILD-1" in _request_text(req, "user")

    # An error inside the plugin (leaving the first prompt out would start the request with an
    # assistant message): the list stays as it was and the turn runs.
    odd = await session()
    await _say(rt, odd, "ODD-1", _label(odd, 1, 1))
    [req] = await _say(rt, odd, "ODD-2", _label(odd, 1, 2, view="plugin"))
    assert "ODD-1" in _request_text(req, "user")
    assert "left the request as it was" in rt.server.log_tail(400)


async def test_doctor_checks_the_plugin_its_version_and_the_daemons_report(
    rt_factory: Any,
) -> None:
    rt: RT = await rt_factory(plugin=True)
    await plugin_reported(rt)
    run = await cli(rt, "doctor")
    assert run.code == 0, run.out + run.err
    [line] = [x for x in run.out.splitlines() if x.split()[1:2] == ["plugin"]]
    assert line.startswith("✓") and f"version {PLUGIN_VERSION}" in line and "loaded for" in line


async def test_doctor_names_the_control_module_the_tools_and_the_plugin_miss(
    rt_factory: Any,
) -> None:
    rt: RT = await rt_factory(plugin=True)
    await plugin_reported(rt)
    control = rt.server.project_dir / ".opencode" / install.CONTROL_DIR / install.CONTROL_FILE
    control.unlink()
    run = await cli(rt, "doctor")
    assert run.code == 1, run.out + run.err
    lines = {x.split()[1]: x for x in run.out.splitlines() if len(x.split()) > 1}
    assert lines["tools"].startswith("✗"), run.out
    assert "the tools import roundtabled/control.ts, which is missing" in lines["tools"]
    assert lines["plugin"].startswith("✗"), run.out
    assert "roundtable-plugin.ts imports roundtabled/control.ts, which is missing" in run.out
    assert "roundtabled install-tool --project" in run.out


@pytest.mark.slow
async def test_a_roundtable_whose_server_loses_the_plugin_hides_its_prompts_before_going_on(
    rt_factory: Any,
) -> None:
    rt: RT = await rt_factory(plugin=True)
    await plugin_reported(rt)
    s2 = await rt.start(agents=AGENTS[:2], prompt="Cache or not?", rounds=2)
    await rt.result(s2)
    await rt.finalized(s2)
    prompts, _ = await _debate(rt, s2)
    assert all(_texts(p) for p in prompts)  # plugin mode: nothing hidden in S2
    seat = [p for p in prompts if _marker(p)["kind"] == "turn"]  # type: ignore[index]
    earlier = {p["info"]["id"]: _texts(p) for p in seat[1:]}  # answered, not the opening
    assert len(earlier) == 3
    # The server restarts without the plugin: the daemon's stream reconnects, the report goes.
    (rt.server.project_dir / ".opencode" / "plugin" / "roundtable-plugin.ts").unlink()
    await rt.server.restart()
    deadline = time.monotonic() + 30
    while rt.daemon.engine.shell.plugins.version_for(rt.directory) is not None:
        assert time.monotonic() < deadline, "the plugin's report outlived the server"
        await asyncio.sleep(0.05)
    before = len(rt.llm.requests)
    status, data = await rt.api(
        "POST", "/v1/roundtables", {"sessionID": s2, "prompt": "And now?", "rounds": 1}
    )
    assert status == 200, data
    await rt.result(s2)
    await rt.finalized(s2)
    state = await rt.daemon.engine.load_state(s2)
    assert state.view == "patch" and MODE_NOTES["patch"] in state.notes
    # Every earlier seat prompt but the opening one was hidden in S2 before the next turn …
    hidden = {m["info"]["id"]: _texts(m) for m in await rt.messages(s2)}
    assert all(hidden[mid] == "" for mid in earlier)
    # … so no later model request carries them.
    later = [r for r in rt.llm.requests[before:] if r.session_id == s2 and r.kind == "turn"]
    assert len(later) >= 2
    for req in later:
        users = _request_text(req, "user")
        assert not any(text in users for text in earlier.values())
