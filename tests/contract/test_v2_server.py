"""Contract: what the V2 adapter (roundtabled/opencode/v2.py) relies on, against the real
OpenCode 2.x binary pinned in opencode-v2/ (docs/opencode-server.md, "2.x"). One server per module;
each test works in sessions of its own. Only the model is scripted."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from roundtabled.errors import AuthFailed
from roundtabled.offline.opencode_server import OpenCodeServer, offline_config
from roundtabled.offline.scripted_actions import Hang, Text
from roundtabled.opencode.detect import detect_server
from roundtabled.opencode.v2 import (
    AssistantRecord,
    IdleRecord,
    ModelRef,
    UserRecord,
    V2Client,
    V2Error,
    V2NotFound,
    reply_of,
    turn_end,
)
from tests.contract.v2_env import PLUGIN, PLUGIN_ID, V2Env, start_v2_env, stop_v2_env

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def v2(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[V2Env]:
    env = await start_v2_env(tmp_path_factory.mktemp("v2"))
    try:
        yield env
    finally:
        await stop_v2_env(env)


def msg_id() -> str:
    return "msg_" + secrets.token_hex(13)


async def run_turn(
    v2: V2Env, session_id: str, text: str, **prompt: Any
) -> tuple[str, list[AssistantRecord], IdleRecord]:
    """Prompt ``session_id`` and wait for the end-of-turn event; returns the prompt id, its
    reply and the idle record."""
    since = len(v2.events)
    mid = msg_id()
    await v2.client.prompt(session_id, text, message_id=mid, **prompt)
    await v2.wait_event(
        lambda e: turn_end(e) is not None and e.session_id == session_id, since=since
    )
    reply, idle = reply_of(await v2.client.all_messages(session_id), mid)
    assert idle is not None
    return mid, reply, idle


async def test_major_detection_and_basic_auth(v2: V2Env) -> None:
    found = await detect_server(v2.server.url, password=v2.server.password)
    assert (found.major, found.version, found.auth) == (2, "2.1.2", "ok")
    missing = await detect_server(v2.server.url)
    assert (missing.major, missing.auth) == (2, "missing")
    wrong = await detect_server(v2.server.url, password="not-the-password")
    assert (wrong.major, wrong.auth) == (2, "rejected")
    # every /api route needs the password; the answer names it
    async with (
        aiohttp.ClientSession() as http,
        http.get(v2.server.url + "/api/session/active") as resp,
    ):
        assert resp.status == 401
        assert (await resp.json())["_tag"] == "UnauthorizedError"
    async with V2Client(v2.server.url) as anonymous:
        with pytest.raises(AuthFailed, match="OPENCODE_SERVER_PASSWORD"):
            await anonymous.active()


async def test_location_scoping_uses_the_deep_object_parameter(v2: V2Env) -> None:
    other = await v2.server.add_project("scoped")
    assert (await v2.client.location(str(other)))["directory"] == str(other)
    # the plain form is silently ignored: the server's own directory answers
    raw, _ = await v2.client._request("GET", "/api/location", params={"directory": str(other)})
    assert raw["directory"] == v2.directory  # this route answers unwrapped
    with pytest.raises(V2NotFound) as missing:
        await v2.client.location(str(other) + "-missing")
    assert missing.value.tag == "LocationNotFoundError"


async def test_agent_list_race_is_waited_out(v2: V2Env) -> None:
    # A location the server has not loaded: its first GET /api/agent answers [] or the built-ins
    # only; the client's list must still hold the configured seats.
    fresh = await v2.server.add_project("fresh-agents")
    agents = {a.id: a for a in await v2.client.agents(str(fresh))}
    assert {"pm", "dev", "rv", "build"} <= set(agents)
    assert agents["dev"].mode == "subagent"
    assert agents["dev"].color == "#2ecc71"
    assert "title" not in agents  # disabled in the config
    assert (await v2.client.configured_agents(str(fresh))) <= set(agents)


async def test_session_create_child_metadata_and_patch_replaces(v2: V2Env) -> None:
    c = v2.client
    root = await c.create_session(directory=v2.directory, title="S1", metadata={"a": 1})
    child = await c.create_session(
        parent_id=root.id, title="S2", agent="pm", metadata={"roundtable": "rt1", "idx": 1}
    )
    assert child.parent_id == root.id
    assert child.agent == "pm"
    assert child.metadata == {"roundtable": "rt1", "idx": 1}
    assert (child.location or {}).get("directory") == v2.directory
    inherited = await c.create_session(parent_id=root.id)
    assert inherited.metadata == {"a": 1}  # absent → copied from the parent
    assert {s.id for s in await c.children(root.id)} == {child.id, inherited.id}
    await c.update_session(child.id, metadata={"state": {"round": 2}}, title="S2 · CONCLUDED")
    again = await c.get_session(child.id)
    assert again.metadata == {"state": {"round": 2}}  # replaced, not merged
    assert again.title == "S2 · CONCLUDED"
    with pytest.raises(V2NotFound) as unknown:
        await c.create_session(parent_id="ses_" + "0" * 26)
    assert unknown.value.tag == "SessionNotFoundError"
    await c.delete_session(root.id)
    with pytest.raises(V2NotFound):
        await c.get_session(child.id)


async def test_switch_agent_and_model_then_prompt_runs_there(v2: V2Env) -> None:
    c = v2.client
    root = await c.create_session(directory=v2.directory)
    seat = await c.create_session(parent_id=root.id, agent="pm")
    await c.switch_agent(seat.id, "dev")
    await c.switch_model(seat.id, ModelRef(id="debater-3", providerID="scripted"))
    v2.llm.script(Text(text="Dev speaks on debater-3."), session=seat.id)
    since = len(v2.events)
    mid, reply, idle = await run_turn(
        v2, seat.id, "Your opening statement?", metadata={"roundtabled": {"round": 0}}
    )
    assert [r.text for r in reply] == ["Dev speaks on debater-3."]
    assert reply[0].agent == "dev"
    assert reply[0].model is not None and reply[0].model.id == "debater-3"
    assert idle.outcome == "succeeded"
    # the model request: routed by x-opencode-session-id (the seat, not the root), dev's prompt,
    # the switched model, the 2.x output limit
    (req,) = v2.llm.requests_for(session=seat.id)
    assert (req.agent, req.model, req.last_user_text) == (
        "dev",
        "debater-3",
        "Your opening statement?",
    )
    assert req.max_tokens is not None
    # the prompt's record keeps its id and metadata
    record = await c.message(seat.id, mid)
    assert isinstance(record, UserRecord)
    assert record.metadata == {"roundtabled": {"round": 0}}
    # one end-of-turn event, whose id matches the idle record's
    ends = [e for e in v2.events[since:] if turn_end(e) is not None and e.session_id == seat.id]
    assert len(ends) == 1
    end = turn_end(ends[0])
    assert end is not None and end.outcome == "succeeded"
    assert (end.event_id or "").removeprefix("evt_") == idle.id.removeprefix("msg_")


async def test_prompt_to_a_busy_session_gets_its_own_reply(v2: V2Env) -> None:
    c = v2.client
    seat = await c.create_session(directory=v2.directory, agent="pm")
    v2.llm.script(
        Text(text="first reply", chunk_size=2, chunk_delay=0.1),
        Text(text="second reply"),
        session=seat.id,
    )
    first = msg_id()
    since = len(v2.events)
    await c.prompt(seat.id, "first question", message_id=first)
    await v2.llm.wait_for_requests(1, within=30, session=seat.id)
    second = msg_id()
    await c.prompt(seat.id, "second question", message_id=second, delivery="steer")
    await v2.wait_event(lambda e: turn_end(e) is not None and e.session_id == seat.id, since=since)
    records = await c.all_messages(seat.id)
    one, idle1 = reply_of(records, first)
    two, idle2 = reply_of(records, second)
    assert [r.text for r in one] == ["first reply"]
    assert [r.text for r in two] == ["second reply"]
    # answered in the same execution, as the session's agent (a person's note during a seat's
    # turn is answered as that seat: docs/design.md, "The 2.x shell")
    assert [r.agent for r in two] == ["pm"]
    assert [r.id for r in records].index(second) > [r.id for r in records].index(one[-1].id)
    assert idle1 is not None and idle1 == idle2  # one execution, one idle
    assert sum(isinstance(r, IdleRecord) for r in records) == 1


async def test_interrupt_ends_the_turn_interrupted(v2: V2Env) -> None:
    c = v2.client
    seat = await c.create_session(directory=v2.directory, agent="pm")
    v2.llm.script(Hang(max_seconds=60), session=seat.id)
    since = len(v2.events)
    mid = msg_id()
    await c.prompt(seat.id, "hang", message_id=mid)
    await v2.llm.wait_for_requests(1, within=30, session=seat.id)
    assert seat.id in await c.active()
    assert await c.interrupt(seat.id) is True
    ev = await v2.wait_event(
        lambda e: turn_end(e) is not None and e.session_id == seat.id, since=since
    )
    end = turn_end(ev)
    assert end is not None and end.outcome == "interrupted"
    _, idle = reply_of(await c.all_messages(seat.id), mid)
    assert idle is not None and idle.outcome == "interrupted"
    assert await c.interrupt(seat.id) is False  # idle: a no-op
    with pytest.raises(V2NotFound):
        await c.interrupt("ses_" + "0" * 26)


async def test_message_paging(v2: V2Env) -> None:
    c = v2.client
    seat = await c.create_session(directory=v2.directory, agent="pm")
    await run_turn(v2, seat.id, "one")
    await run_turn(v2, seat.id, "two")
    full = await c.all_messages(seat.id)
    assert [r.type for r in full].count("idle") == 2
    newest = await c.messages(seat.id)  # default order: newest first
    assert [r.id for r in newest.records] == [r.id for r in reversed(full)]
    ids: list[str] = []
    page = await c.messages(seat.id, limit=1, order="asc")
    while page.records:
        ids.extend(r.id for r in page.records)
        if not page.next:
            break
        page = await c.messages(seat.id, limit=1, cursor=page.next)
    assert ids == [r.id for r in full]
    only = await c.messages(seat.id, type="assistant")
    assert {r.type for r in only.records} == {"assistant"}
    # why the client sends a cursor alone
    first = await c.messages(seat.id, limit=1, order="asc")
    assert first.next is not None
    with pytest.raises(V2Error) as both:
        await c._request(
            "GET",
            f"/api/session/{seat.id}/message",
            params={"cursor": first.next, "order": "asc"},
        )
    assert both.value.tag == "InvalidCursorError"


async def test_v2_plugin_loads_and_its_context_hook_hides_a_message(v2: V2Env) -> None:
    # the first GET /api/plugin of a location not loaded yet answers []: waited out
    fresh = await v2.server.add_project("fresh-plugins")
    plugin_dir = fresh / ".opencode" / "plugins" / "contract"
    plugin_dir.mkdir(parents=True)
    (plugin_dir / "index.ts").write_text(PLUGIN)
    async with V2Client(v2.server.url, password=v2.server.password) as first:
        fresh_plugins = {p.id: p for p in await first.plugins(str(fresh))}
    assert fresh_plugins[PLUGIN_ID].status == "active", sorted(map(str, fresh_plugins))
    plugins = {p.id: p for p in await v2.client.plugins(v2.directory)}
    assert plugins[PLUGIN_ID].status == "active", plugins
    # nothing was installed for it at run time (its import is resolved by the binary)
    assert not v2.server.npm_install_ran()
    c = v2.client
    seat = await c.create_session(directory=v2.directory, agent="pm")
    await c.prompt(
        seat.id,
        "HIDE_ME state block",
        message_id=msg_id(),
        metadata={"roundtabled": {"hidden": True}},
        resume=False,
    )
    await run_turn(v2, seat.id, "visible question")
    (req,) = v2.llm.requests_for(session=seat.id)
    texts = [str(m.get("content")) for m in req.messages if m.get("role") == "user"]
    assert any("visible question" in t for t in texts)
    assert not any("HIDE_ME" in t for t in texts), texts
    # the hidden prompt is still in the history
    assert any(
        isinstance(r, UserRecord) and r.text == "HIDE_ME state block"
        for r in await c.all_messages(seat.id)
    )


async def test_scripted_model_answers_a_compaction_in_its_template(v2: V2Env) -> None:
    c = v2.client
    seat = await c.create_session(directory=v2.directory, agent="pm")
    await run_turn(v2, seat.id, "something to summarize")
    since = len(v2.events)
    await c._request("POST", f"/api/session/{seat.id}/compact", body={})
    await v2.wait_event(
        lambda e: (
            e.session_id == seat.id
            and e.type in ("session.compaction.ended", "session.compaction.failed")
        ),
        since=since,
    )
    (req,) = v2.llm.requests_for(session=seat.id, kind="compaction")
    assert "## Objective" in req.reply_text
    failed = [e for e in v2.events[since:] if e.type == "session.compaction.failed"]
    assert not failed, failed[0].properties
    compaction = [r for r in await c.all_messages(seat.id) if r.type == "compaction"]
    assert compaction and getattr(compaction[-1], "status", None) != "failed"


async def test_a_1x_server_is_detected_as_major_1(tmp_path: Path) -> None:
    server = OpenCodeServer(
        tmp_path / "v1", offline_config("http://127.0.0.1:9/v1"), password="pw1"
    )
    await server.start()
    try:
        found = await detect_server(server.url, password="pw1")
        assert (found.major, found.version, found.auth) == (1, server.version, "ok")
        missing = await detect_server(server.url)
        assert (missing.major, missing.auth) == (1, "missing")
    finally:
        await server.stop()


async def test_the_context_hook_hides_what_the_session_metadata_lists(v2: V2Env) -> None:
    # State kept in session metadata, read by the plugin: hides replies too (they carry no
    # metadata of their own), and can change after the fact (no message edit exists on 2.x).
    c = v2.client
    seat = await c.create_session(directory=v2.directory, agent="pm")
    v2.llm.script(Text(text="SECRET reply"), session=seat.id)
    first, reply, _ = await run_turn(v2, seat.id, "SECRET question")
    await c.update_session(seat.id, metadata={"roundtabled": {"hidden": [first, reply[0].id]}})
    await run_turn(v2, seat.id, "next question")
    last = v2.llm.requests_for(session=seat.id)[-1]
    texts = [str(m.get("content")) for m in last.messages if m.get("role") != "system"]
    assert any("next question" in t for t in texts)
    assert not any("SECRET" in t for t in texts), texts
