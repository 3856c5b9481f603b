"""Contract: the server port (roundtabled/opencode/port.py) against both real OpenCode majors.

One suite, run once on the pinned 1.x server and once on the pinned 2.x server (one server per
major, module-scoped; each test works in sessions of its own). Only the model is scripted. What
each major does for each method: docs/design.md, "The server port".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import pytest
import pytest_asyncio

from roundtabled import ids
from roundtabled.core.card import state_card
from roundtabled.core.messages import AnswerView, UserView
from roundtabled.core.server_records import (
    SessionRef,
    SignedState,
    StateBlock,
    TurnKey,
    TurnOutcome,
    TurnPrompt,
    TurnStatus,
)
from roundtabled.core.state import (
    META_FOOTER,
    META_HEADER,
    META_KEY,
    ModelRef,
    Phase,
    Signer,
    decode_state,
    encode_state,
)
from roundtabled.offline.opencode_server import OpenCodeServer, agent_prompts_of, offline_config
from roundtabled.offline.scripted_actions import Hang, HttpError, Text
from roundtabled.offline.scripted_llm import ScriptedLLM, content_text
from roundtabled.opencode import v1_wire, v2
from roundtabled.opencode.events import Event
from roundtabled.opencode.port import (
    ServerPort,
    UnsupportedServer,
    V1Port,
    V1Session,
    V2Port,
    port_after_reconnect,
    port_for,
)
from roundtabled.opencode.stream import EventStream
from roundtabled.opencode.v2 import v2_event_stream
from tests.states import fresh

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120), pytest.mark.e2e]

SEAT_MODELS = {"pm": "debater-1", "dev": "debater-2", "rv": "debater-3"}
"""Each seat's own configured model (the directory's default is ``orchestrator-1``)."""


@dataclass
class PortEnv:
    major: int
    server: OpenCodeServer
    llm: ScriptedLLM
    port: ServerPort
    events: list[Event] = field(default_factory=list)
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def directory(self) -> str:
        return str(self.server.project_dir)

    async def root(self, title: str = "S1") -> SessionRef:
        """A root session (S1): the port only makes children, so the test's client makes it."""
        port = self.port
        assert isinstance(port, V1Port | V2Port)
        made = await port.client.create_session(directory=self.directory, title=title)
        return await port.session(made["id"] if isinstance(made, dict) else made.id)

    async def wait_event(self, match: Callable[[Event], bool], since: int) -> Event:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for ev in self.events[since:]:
                if match(ev):
                    return ev
            await asyncio.sleep(0.02)
        raise AssertionError(f"{self.major}.x: no matching event in 30 s")

    async def outcome(
        self, session: SessionRef, prompt_id: str, until: Callable[[TurnOutcome], bool]
    ) -> TurnOutcome:
        """Read the turn's outcome until ``until`` holds (level-triggered, as the engine does)."""
        deadline = time.monotonic() + 30
        while True:
            out = await self.port.turn_outcome(session, prompt_id)
            if until(out):
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.major}.x: turn stands at {out}")
            await asyncio.sleep(0.05)


def over(out: TurnOutcome) -> bool:
    return out.over


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=[1, 2], ids=["1.x", "2.x"])
async def env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[PortEnv]:
    major: Literal[1, 2] = request.param
    llm = ScriptedLLM()
    await llm.start(port=0)
    config = offline_config(
        llm.base_url,
        extra_agents={seat: {"model": f"scripted/{mid}"} for seat, mid in SEAT_MODELS.items()},
    )
    llm.agent_prompts.update(agent_prompts_of(config))
    server = OpenCodeServer(tmp_path_factory.mktemp(f"port{major}"), config, major=major)
    await server.start()
    port = await port_for(server.url, password=server.password)
    env = PortEnv(major, server, llm, port)

    def on_event(ev: Event) -> None:
        if ev.type == "server.connected":
            env.connected.set()
        if isinstance(port, V2Port):
            port.seen(ev)  # as the 2.x shell does with every event
        env.events.append(ev)

    stream = (
        v2_event_stream(server.url, on_event, password=server.password)
        if major == 2
        else EventStream(server.url, on_event, password=server.password)
    )
    env.task = asyncio.create_task(stream.run())
    try:
        await asyncio.wait_for(env.connected.wait(), 15)
        yield env
    finally:
        env.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await env.task
        await port.close()
        await server.stop()
        await llm.stop()


async def test_the_major_is_detected_and_its_limits_said(env: PortEnv) -> None:
    caps = env.port.capabilities
    assert (caps.major, caps.version) == (env.major, env.server.version)
    assert isinstance(env.port, V1Port if env.major == 1 else V2Port)
    assert isinstance(env.port, ServerPort)
    toasted = await env.port.notify(env.directory, "Roundtable", "a notice", "info")
    if env.major == 1:
        assert toasted is True
        assert caps.limits() == ()
    else:
        assert toasted is False  # no HTTP route for a toast on 2.x
        limits = caps.limits()
        assert len(limits) == 3 and all(s.startswith("OpenCode 2.1.2 ") for s in limits)
    with pytest.raises(UnsupportedServer, match="no OpenCode server answers"):
        await port_for("http://127.0.0.1:9")


async def test_agents_as_a_roundtable_needs_them(env: PortEnv) -> None:
    agents = {a.id: a for a in await env.port.agents(env.directory)}
    for seat, mid in SEAT_MODELS.items():
        a = agents[seat]
        assert (a.mode, a.hidden, a.has_system_prompt) == ("subagent", False, True)
        assert a.model == ModelRef(providerID="scripted", modelID=mid)
    assert agents["dev"].color == "#2ecc71"
    assert agents["build"].model is None
    assert agents["compaction"].hidden is True


async def test_three_seats_each_answer_on_their_own_model(env: PortEnv) -> None:
    port = env.port
    s1 = await env.root()
    s2 = await port.create_child(s1, "roundtable", "pm", {META_KEY: {"phase": "active"}})
    assert (s2.parent_id, s2.directory, s2.title) == (s1.id, env.directory, "roundtable")
    for seat, agent in enumerate(SEAT_MODELS):
        env.llm.script(Text(text=f"{agent} speaks."), session=s2.id)
        since = len(env.events)
        key = TurnKey(s2.id, 0, seat)
        prompt_id = await port.start_turn(s2, agent, None, f"Round 1, {agent}: your view?", key)
        out = await env.outcome(s2, prompt_id, over)
        assert out.status is TurnStatus.ANSWERED, out.words()
        assert (out.text, out.agent) == (f"{agent} speaks.", agent)
        assert out.model == ModelRef(providerID="scripted", modelID=SEAT_MODELS[agent])
        assert (out.tokens_in, out.tokens_out) == (100, 20)  # the scripted model's usage
        assert (out.finish, out.truncated, out.error) == ("stop", False, None)
        await env.wait_event(lambda e: port.turn_ended(e) == s2.id, since)
    # the model requests: each seat as itself, on its own configured model
    requests = env.llm.requests_for(session=s2.id)
    assert [(r.agent, r.model) for r in requests] == list(SEAT_MODELS.items())


async def test_a_failed_turn_is_read_as_failed_with_the_server_s_words(env: PortEnv) -> None:
    s1 = await env.root()
    s2 = await env.port.create_child(s1, "failing", "pm", {})
    env.llm.script(HttpError(status=400, message="scripted bad request"), session=s2.id)
    prompt_id = await env.port.start_turn(s2, "pm", None, "fail please", TurnKey(s2.id, 0, 0))
    out = await env.outcome(s2, prompt_id, over)
    assert out.status is TurnStatus.FAILED
    assert out.error is not None and "scripted bad request" in out.error
    assert out.words().startswith("failed by pm")
    assert (out.tokens_in, out.tokens_out) == (None, None)  # unknown, not 0
    # the next turn: answered; read before it starts, it is never the failed turn's failure
    env.llm.script(Text(text="recovered"), session=s2.id)
    key = TurnKey(s2.id, 0, 1)
    if env.major == 2:
        # 2.x: a prompt parked in the inbox of a session whose last execution failed
        v2_client: Any = env.port.client  # type: ignore[attr-defined]
        parked = "msg_" + key.digest() + "p"
        await v2_client.prompt(s2.id, "parked", message_id=parked, resume=False)
        assert (await env.port.turn_outcome(s2, parked)).status is TurnStatus.QUEUED
    nxt = await env.port.start_turn(s2, "dev", None, "your turn", key)
    assert (await env.port.turn_outcome(s2, nxt)).status is not TurnStatus.FAILED
    out = await env.outcome(s2, nxt, over)
    assert (out.status, out.text, out.agent) == (TurnStatus.ANSWERED, "recovered", "dev")


async def test_abort_of_a_running_turn_is_read_as_interrupted(env: PortEnv) -> None:
    s1 = await env.root()
    s2 = await env.port.create_child(s1, "hanging", "pm", {})
    env.llm.script(Hang(max_seconds=60), session=s2.id)
    prompt_id = await env.port.start_turn(s2, "pm", None, "hang", TurnKey(s2.id, 0, 0))
    await env.llm.wait_for_requests(1, within=30, session=s2.id)
    running = await env.port.turn_outcome(s2, prompt_id)
    assert running.status is TurnStatus.RUNNING
    ran = await env.port.abort(s2)
    assert ran is (None if env.major == 1 else True)  # 1.x answers true for anything
    out = await env.outcome(s2, prompt_id, over)
    assert out.status is TurnStatus.INTERRUPTED, out.words()
    if env.major == 2:
        assert await env.port.abort(s2) is False  # nothing runs any more


async def test_the_state_is_written_read_back_and_replaced(env: PortEnv) -> None:
    port = env.port
    s1 = await env.root()
    index = {"phase": "active", "v": 1}
    s2 = await port.create_child(s1, "stateful", "pm", {META_KEY: index})
    assert await port.read_state(s2) == ()
    signer = Signer(b"k" * 32)
    blocks = []
    for rnd in (0, 1):
        state = fresh(s2.id, ["pm", "dev"], 3, current_round=rnd)
        text, meta = encode_state(state, signer, card=state_card(state))
        blocks.append(SignedState(text, meta))
        await port.write_state(s2, blocks[-1])
        read = await port.read_state(s2)
        assert read[0] == blocks[-1]
        # the MAC survives the server's JSON round trip
        assert decode_state(read[0].text, read[0].metadata, s2.id, signer).current_round == rnd
    # the index beside it is kept (2.x: a metadata PATCH replaces the whole object)
    port_client: Any = port.client  # type: ignore[attr-defined]
    raw = await port_client.get_session(s2.id)
    metadata = raw["metadata"] if isinstance(raw, dict) else raw.metadata
    assert {k: metadata[META_KEY][k] for k in index} == index
    # a child of S2 holds none of it (2.x copies the parent's metadata unless given)
    child = await port.create_child(s2, "a child", "pm", {})
    assert await port.read_state(child) == ()


async def test_1x_the_engine_s_own_layout_goes_through_v1_session(env: PortEnv) -> None:
    """1.x: what the 1.x engine does beyond the port (``V1Session``, docs/design.md "The server
    port"): a prompt under the machine's id with the state block riding in it, the block
    rewritten in place, a noReply posted once, a reply's text part edited and a prompt hidden
    with the parts' other fields kept, the statuses, a tool call whose message is gone."""
    if env.major != 1:
        pytest.skip("V1Session is the 1.x engine's own layout")
    port = env.port
    assert isinstance(port, V1Port) and isinstance(port, V1Session)
    s1 = await env.root()
    s2 = await port.create_child(s1, "layout", None, {})
    signer = Signer(b"k" * 32)

    def block_of(rnd: int) -> SignedState:
        state = fresh(s2.id, ["pm", "dev"], 3, current_round=rnd)
        text, meta = encode_state(state, signer, card=state_card(state))
        return SignedState(text, meta)

    mid, pid = ids.message_id(), ids.part_id()
    env.llm.script(Text(text="pm speaks."), session=s2.id)
    prompt = TurnPrompt(mid, "pm", "Your view?", "── pm ──", {}, None, StateBlock(pid, block_of(0)))
    await port.send_prompt(s2.id, prompt)
    out = await env.outcome(s2, mid, over)
    assert (out.status, out.text) == (TurnStatus.ANSWERED, "pm speaks."), out.words()
    assert await port.has_part(s2.id, mid, pid)
    assert not await port.has_part(s2.id, mid, ids.part_id())
    assert not await port.has_part(s2.id, ids.message_id(), pid)
    await port.write_state_part(s2.id, mid, StateBlock(pid, block_of(1)))
    assert (await port.read_state(s2))[0] == block_of(1)

    note = ids.message_id()
    for _ in range(2):
        await port.post_once(s2.id, note, "A note.", label="── note ──", marker={"x": 1})
    stored = await port.client.message(s2.id, note)
    assert [(p["text"], bool(p.get("ignored"))) for p in stored["parts"]] == [
        ("A note.", False),
        ("── note ──", True),
    ]

    msgs, _ = await port.client.messages(s2.id)
    (reply,) = v1_wire.reply_text_parts(msgs, [mid])
    assert isinstance(reply.handle, dict)
    await port.edit_part(s2.id, replace(reply, text="Shown."))
    msgs, _ = await port.client.messages(s2.id)
    (shown,) = v1_wire.reply_text_parts(msgs, [mid])
    assert isinstance(shown.handle, dict)
    assert shown.text == "Shown."
    assert {**shown.handle, "text": reply.text} == reply.handle  # nothing else changed

    await port.hide_message(s2.id, mid)
    prompt_msg = await port.client.message(s2.id, mid)
    assert v1_wire.visible_text_parts(prompt_msg) == []
    assert await port.has_part(s2.id, mid, pid)  # the state block stays where it was
    assert (await port.read_state(s2))[0] == block_of(1)

    assert s2.id not in await port.statuses(env.directory)  # idle: not listed
    assert await port.tool_call(s2.id, ids.message_id(), "call_x") == (None, "", {})


async def test_1x_the_engine_s_reads_of_s2_go_through_v1_session(env: PortEnv) -> None:
    """1.x: what the 1.x engine reads of S2 (``V1Session``, docs/design.md "The server port"):
    a turn's message views from its prompt on, the reply's text parts, the indexed state block
    and the scan of every message, the whole session with a pasted META block named, the
    opening's seats and the start-up scan's candidates, each in the product's records."""
    if env.major != 1:
        pytest.skip("V1Session is the 1.x engine's own layout")
    port = env.port
    assert isinstance(port, V1Port) and isinstance(port, V1Session)
    s1 = await env.root()
    s2 = await port.create_child(s1, "reads", None, {})
    signer = Signer(b"k" * 32)
    state = fresh(s2.id, ["pm", "dev"], 3)
    block = SignedState(*encode_state(state, signer, card=state_card(state)))

    mid, pid = ids.message_id(), ids.part_id()
    env.llm.script(Text(text="pm speaks."), session=s2.id)
    prompt = TurnPrompt(mid, "pm", "Your view?", "── pm ──", {}, None, StateBlock(pid, block))
    await port.send_prompt(s2.id, prompt)
    await env.outcome(s2, mid, over)

    views, found = await port.views_from(s2.id, mid, signer)
    assert found and isinstance(views[0], UserView) and views[0].id == mid
    assert views[0].state_block
    answers = [v for v in views if isinstance(v, AnswerView)]
    assert [(a.parent_id, a.text) for a in answers] == [(mid, "pm speaks.")]
    assert await port.views_from(s2.id, "msg_000000000000aaaaaaaaaaaaaa", signer) == ((), False)
    assert [p.text for p in await port.reply_parts(s2.id, [mid])] == ["pm speaks."]
    assert await port.reply_parts(s2.id, []) == ()

    assert await port.indexed_state(s2.id) is None  # no index written yet
    await port.write_index(s2.id, Phase.ACTIVE, mid, pid, finalized=False)
    assert await port.indexed_state(s2.id) == (mid, (block,))
    assert (mid, (block,)) in await port.state_scan(s2.id)

    pasted = ids.message_id()
    await port.post_once(s2.id, pasted, f"{META_HEADER}\n{{}}\n{META_FOOTER}")
    whole = await port.session_messages(s2.id, signer, mid)
    assert whole.pasted_meta == (pasted,)
    assert [v.id for v in whole.views][-1] == pasted and whole.views[0].id == mid

    seat = await port.create_seat_session(s2, "seat 2", 2)
    assert seat is not None
    assert await port.opening_seats(s2.id) == ((seat, 2),)

    scanned, candidates = await port.sessions_to_recover(env.directory)
    assert s2.id in candidates and s1.id not in candidates and scanned >= 3
    assert isinstance(await port.server_directory(), str)


async def test_2x_a_state_write_is_one_patch_that_keeps_another_writer_s_key(
    env: PortEnv,
) -> None:
    """2.x: the state write PATCHes from the metadata the port knows (created, written, or
    announced by ``session.metadata.updated``) without reading S2 first; another writer's key
    reaches it by the event and survives the next write; after a reconnect it reads again."""
    if env.major != 2:
        pytest.skip("1.x writes the state into a part of its own")
    port = env.port
    assert isinstance(port, V2Port)
    s1 = await env.root()
    s2 = await port.create_child(s1, "one patch", "pm", {META_KEY: {"phase": "active"}})
    signer = Signer(b"k" * 32)
    state = fresh(s2.id, ["pm", "dev"], 3)
    text, meta = encode_state(state, signer, card=state_card(state))
    reads: list[str] = []
    read = port.client.get_session

    async def counted(session_id: str) -> v2.SessionInfo:
        reads.append(session_id)
        return await read(session_id)

    port.client.get_session = counted  # type: ignore[method-assign]
    try:
        await port.write_state(s2, SignedState(text, meta), hidden=["msg_a"], phase="active")
        assert reads == []
        # another writer adds a key of its own (a PATCH replaces the whole object)
        held = (await read(s2.id)).metadata or {}
        since = len(env.events)
        await port.client.update_session(s2.id, metadata={**held, "note": "a person's"})
        await env.wait_event(
            lambda e: (
                e.type == "session.metadata.updated"
                and e.session_id == s2.id
                and "note" in e.properties.get("metadata", {})
            ),
            since,
        )
        await port.write_state(s2, SignedState(text, meta), hidden=["msg_b"], phase="active")
        assert reads == []
        after = (await read(s2.id)).metadata or {}
        assert after["note"] == "a person's"
        assert after[META_KEY] == {"phase": "active", "hidden": ["msg_b"]}
        assert await port.read_state(s2) == (SignedState(text, meta),)
        reads.clear()
        port.forget_metadata()  # the event stream reconnected: an update may have been missed
        await port.write_state(s2, SignedState(text, meta), phase="done")
        assert reads == [s2.id]
        assert ((await read(s2.id)).metadata or {})[META_KEY] == {
            "phase": "done",
            "hidden": ["msg_b"],
        }
    finally:
        del port.client.get_session


async def test_2x_agent_and_model_switched_at_once_both_hold_for_the_prompt(
    env: PortEnv,
) -> None:
    """2.x: an agent switch leaves the session's model as it is and a model switch its agent
    (even an agent with a configured model of its own), so ``V2Port.switch`` sends both at once;
    each lands as a history record and the prompt runs as that agent on that model."""
    if env.major != 2:
        pytest.skip("1.x names the agent and the model in each prompt")
    port = env.port
    assert isinstance(port, V2Port)
    s1 = await env.root()
    s2 = await port.create_child(s1, "switches", "pm", {})
    # the order that would lose if an agent switch applied the agent's configured model: the
    # model first, then rv, whose own model is debater-3
    await port.client.switch_model(s2.id, v2.ModelRef(id="debater-1", providerID="scripted"))
    await port.client.switch_agent(s2.id, "rv")
    plan = [("rv", "debater-1", False), ("dev", "debater-3", True), ("pm", "debater-2", True)]
    for seat, (agent, model, at_once) in enumerate(plan):
        env.llm.script(Text(text=f"{agent} on {model}."), session=s2.id)
        since = len(env.events)
        if at_once:
            await port.switch(s2, agent, ModelRef(providerID="scripted", modelID=model))
        key = TurnKey(s2.id, 0, seat)
        prompt_id = await port.start_turn(s2, agent, None, "your view?", key, switched=True)
        out = await env.outcome(s2, prompt_id, over)
        assert out.status is TurnStatus.ANSWERED, out.words()
        assert (out.agent, out.model) == (agent, ModelRef(providerID="scripted", modelID=model))
        await env.wait_event(lambda e: port.turn_ended(e) == s2.id, since)
    requests = env.llm.requests_for(session=s2.id)
    assert [(r.agent, r.model) for r in requests] == [(a, m) for a, m, _ in plan]
    kinds = [r.type for r in await port.client.all_messages(s2.id) if isinstance(r, v2.OtherRecord)]
    assert kinds.count("agent-switched") == 3 and kinds.count("model-switched") == 3, kinds


async def test_a_turn_sent_again_gives_no_second_reply(env: PortEnv) -> None:
    port = env.port
    s1 = await env.root()
    s2 = await port.create_child(s1, "resent", "pm", {})
    env.llm.script(
        Text(text="the one reply", chunk_size=2, chunk_delay=0.05),
        Text(text="dev answers."),
        session=s2.id,
    )
    key = TurnKey(s2.id, 0, 0)
    first = await port.start_turn(s2, "pm", None, "ONLY ONCE please", key)
    await env.llm.wait_for_requests(1, within=30, session=s2.id)
    # sent again while it runs (a crash before the admission was recorded) ...
    assert await port.start_turn(s2, "pm", None, "ONLY ONCE please", key) == first
    out = await env.outcome(s2, first, over)
    assert (out.status, out.text) == (TurnStatus.ANSWERED, "the one reply")
    # ... and again after it ended
    since = len(env.events)
    assert await port.start_turn(s2, "pm", None, "ONLY ONCE please", key) == first
    if env.major == 2:
        # 2.x answers the used id with the original admission, and runs an empty execution:
        # one more end event (and idle record), no model request
        await env.wait_event(lambda e: port.turn_ended(e) == s2.id, since)
    assert (await port.turn_outcome(s2, first)).text == "the one reply"
    assert len(env.llm.requests_for(session=s2.id)) == 1
    # the next seat's request holds the prompt once (1.x: a re-sent prompt_async would have
    # appended its parts to the stored message again; the port looked for it first)
    second = await port.start_turn(s2, "dev", None, "dev, your view?", TurnKey(s2.id, 0, 1))
    assert (await env.outcome(s2, second, over)).text == "dev answers."
    last = env.llm.requests_for(session=s2.id)[-1]
    said = "\n".join(content_text(m.get("content")) for m in last.messages[1:])
    assert said.count("ONLY ONCE please") == 1, said
    assert said.count("the one reply") == 1


async def test_the_result_is_delivered_once_and_what_the_model_sees(env: PortEnv) -> None:
    port = env.port
    s1 = await env.root()
    mid = await port.deliver_result(s1, "ROUNDTABLE RESULT: ship it", "rt-result-1")
    assert await port.deliver_result(s1, "ROUNDTABLE RESULT: ship it", "rt-result-1") == mid
    port_client: Any = port.client  # type: ignore[attr-defined]
    if env.major == 1:
        msgs, _ = await port_client.messages(s1.id)
        assert [m["info"]["id"] for m in msgs] == [mid]  # stored, visible in S1
    else:
        # 2.x: parked in S1's inbox, not in its history, until the next prompt delivers it
        assert [i["id"] for i in await port_client.inbox(s1.id)] == [mid]
        assert (await port_client.messages(s1.id)).records == []
    assert env.llm.requests_for(session=s1.id) == []  # no model turn yet
    # the person's next prompt: the model reads the result once, before that prompt
    env.llm.script(Text(text="noted"), session=s1.id)
    nxt = await port.start_turn(s1, "build", None, "what did they decide?", TurnKey(s1.id, 0, 0))
    assert (await env.outcome(s1, nxt, over)).text == "noted"
    (req,) = env.llm.requests_for(session=s1.id)
    users = [content_text(m.get("content")) for m in req.messages if m.get("role") == "user"]
    assert [u for u in users if "ROUNDTABLE RESULT" in u] == ["ROUNDTABLE RESULT: ship it"]
    assert users.index("ROUNDTABLE RESULT: ship it") < len(users) - 1
    assert await port.deliver_result(s1, "ROUNDTABLE RESULT: ship it", "rt-result-1") == mid
    if env.major == 2:
        records = await port_client.all_messages(s1.id)
        assert [r.id for r in records if r.type == "synthetic"] == [mid]
        assert await port_client.inbox(s1.id) == []


async def test_an_unknown_agent_fails_the_turn_with_the_server_s_words(env: PortEnv) -> None:
    s1 = await env.root()
    s2 = await env.port.create_child(s1, "nobody", None, {})
    model = ModelRef(providerID="scripted", modelID="debater-1")
    prompt_id = await env.port.start_turn(s2, "nosuch", model, "who?", TurnKey(s2.id, 0, 0))
    if env.major == 1:
        # 1.x stores nothing and says why only in a session.error event
        out = await env.outcome(s2, prompt_id, lambda o: o.status is TurnStatus.MISSING)
        assert out.error is None
        return
    out = await env.outcome(s2, prompt_id, over)
    assert out.status is TurnStatus.FAILED
    assert out.error == 'unknown: Agent not found: "nosuch"'


async def test_a_server_upgraded_in_place_gets_the_other_major_s_port(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    config = offline_config("http://127.0.0.1:9/v1")
    old = OpenCodeServer(tmp_path_factory.mktemp("old"), config, password="pw")
    await old.start()
    url = old.url
    try:
        port = await port_for(url, password="pw")
        assert isinstance(port, V1Port)
        assert await port_after_reconnect(port, url, password="pw") is port  # the same server
    finally:
        await old.stop()
    new = OpenCodeServer(tmp_path_factory.mktemp("new"), config, password="pw", major=2)
    new._port = old.port  # the same URL, now OpenCode 2.x
    await new.start()
    try:
        assert new.url == url
        upgraded = await port_after_reconnect(port, url, password="pw")
        assert isinstance(upgraded, V2Port)
        assert (upgraded.capabilities.major, upgraded.capabilities.version) == (2, new.version)
        with pytest.raises(UnsupportedServer, match=r"OpenCode 2\.x at .* rejected the password"):
            await port_after_reconnect(upgraded, url, password="wrong")
        await upgraded.close()
    finally:
        await new.stop()
