"""The test infrastructure against the REAL ``opencode serve`` 1.18.33 (no mocks).

Also pins down server facts the daemon's design depends on (ignored parts, part PATCH, part
metadata); each is asserted so an OpenCode upgrade that changes them fails here first.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import orjson
import pytest

from roundtabled.offline.opencode_server import OpenCodeServer, offline_config
from roundtabled.offline.scripted_actions import (
    Hang,
    HttpError,
    Stall,
    Text,
    ToolCall,
    ToolCalls,
    tool_call,
)
from roundtabled.offline.scripted_llm import ScriptedLLM, default_text

pytestmark = pytest.mark.timeout(120)

M2 = {"providerID": "scripted", "modelID": "debater-2"}
ORCH = {"providerID": "scripted", "modelID": "orchestrator-1"}

ECHO_TOOL = """import { tool } from "@opencode-ai/plugin"
export default tool({
  description: "Echo the text back",
  args: { text: tool.schema.string().describe("text to echo") },
  async execute(args) { return "echo: " + args.text },
})
"""


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


async def new_session(http: aiohttp.ClientSession, title: str = "infra test") -> str:
    async with http.post("/session", json={"title": title}) as r:
        assert r.status == 200, await r.text()
        return str((await r.json())["id"])


async def prompt(http: aiohttp.ClientSession, sid: str, body: dict[str, Any]) -> None:
    async with http.post(f"/session/{sid}/prompt_async", json=body) as r:
        assert r.status == 204, await r.text()


async def say(
    http: aiohttp.ClientSession,
    sid: str,
    text: str,
    *,
    agent: str | None = "pm",
    model: dict[str, str] = M2,
) -> None:
    """Prompt one text part in ``sid``, to ``agent`` (``None``: the server's default agent)."""
    body: dict[str, Any] = {"parts": [{"type": "text", "text": text}], "model": model}
    if agent is not None:
        body["agent"] = agent
    await prompt(http, sid, body)


async def first_turn(
    http: aiohttp.ClientSession,
    text: str,
    *,
    agent: str | None = "pm",
    model: dict[str, str] = M2,
    n_assistant: int = 1,
    within: float = 20.0,
) -> tuple[str, list[dict[str, Any]]]:
    """A new session, :func:`say` ``text`` in it, then :func:`wait_done`: the session's id and
    its messages."""
    sid = await new_session(http)
    await say(http, sid, text, agent=agent, model=model)
    return sid, await wait_done(http, sid, n_assistant, within)


async def messages(http: aiohttp.ClientSession, sid: str) -> list[dict[str, Any]]:
    async with http.get(f"/session/{sid}/message") as r:
        assert r.status == 200
        result: list[dict[str, Any]] = await r.json()
        return result


async def wait_done(
    http: aiohttp.ClientSession, sid: str, n_assistant: int, within: float = 20.0
) -> list[dict[str, Any]]:
    """Poll until ≥ n completed assistant messages exist and the session is idle."""
    deadline = time.monotonic() + within
    while True:
        msgs = await messages(http, sid)
        async with http.get("/session/status") as r:
            status = await r.json()
        done = [
            m
            for m in msgs
            if m["info"]["role"] == "assistant" and m["info"]["time"].get("completed")
        ]
        if len(done) >= n_assistant and sid not in status:
            return msgs
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(done)}/{n_assistant} assistant messages; status {status}")
        await asyncio.sleep(0.05)


def texts(msg: dict[str, Any]) -> list[str]:
    return [p["text"] for p in msg["parts"] if p["type"] == "text" and p.get("text")]


def contents(rec_messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) of every non-system message sent to the model."""
    out = []
    for m in rec_messages:
        if m["role"] == "system":
            continue
        c = m.get("content")
        if isinstance(c, list):
            c = "\n".join(p.get("text", "") for p in c)
        out.append((m["role"], c or ""))
    return out


# ------------------------------------------------------------------------------------------------
# scripted LLM on its own (fast)
# ------------------------------------------------------------------------------------------------


async def _sse(resp: aiohttp.ClientResponse) -> list[Any]:
    events: list[Any] = []
    async for line in resp.content:
        if line.startswith(b"data: "):
            data = line[6:].strip()
            events.append("[DONE]" if data == b"[DONE]" else orjson.loads(data))
    return events


async def test_scripted_llm_stream_format_and_control_routes(scripted_llm: ScriptedLLM) -> None:
    body = {
        "model": "debater-1",
        "stream": True,
        "messages": [
            {"role": "system", "content": "You are dev, the developer in a roundtable debate.\nx"},
            {"role": "user", "content": [{"type": "text", "text": "hello"}]},
        ],
    }
    async with aiohttp.ClientSession(base_url=scripted_llm.url) as http:
        # script through the control route, as the offline demo does
        actions = [
            {"kind": "tool_calls", "calls": [{"name": "probe", "arguments": {"label": "a"}}]},
            {"kind": "text", "text": "abcdefghij", "chunk_size": 3, "reasoning": "hmm"},
        ]
        async with http.post("/script", json={"actions": actions, "agent": "dev"}) as r:
            assert (await r.json()) == {"queued": 2}
        async with http.post(
            "/v1/chat/completions", json=body, headers={"x-session-id": "ses_1"}
        ) as r:
            ev = await _sse(r)
        assert ev[-1] == "[DONE]"
        final = ev[-2]
        assert final["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "tool_calls"}
        assert final["usage"]["prompt_tokens"] == 100
        arg_deltas = [
            e["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
            for e in ev[1:-2]
            if e["choices"][0]["delta"].get("tool_calls")
        ]
        assert arg_deltas[0] == "" and len(arg_deltas) == 3
        assert orjson.loads("".join(arg_deltas)) == {"label": "a"}

        async with http.post("/v1/chat/completions", json=body) as r:
            ev = await _sse(r)
        deltas = [e["choices"][0]["delta"] for e in ev[:-1]]
        assert deltas[0]["role"] == "assistant"
        assert "".join(d.get("reasoning_content", "") for d in deltas) == "hmm"
        assert [d["content"] for d in deltas if d.get("content")] == ["abc", "def", "ghi", "j"]
        assert ev[-2]["choices"][0]["finish_reason"] == "stop"

        async with http.get("/requests") as r:
            recs = await r.json()
    assert [(x["agent"], x["kind"], x["action"]) for x in recs] == [
        ("dev", "turn", "tool_calls"),
        ("dev", "turn", "text"),
    ]
    assert recs[0]["session_id"] == "ses_1" and recs[0]["last_user_text"] == "hello"


async def test_scripted_llm_hang_notices_disconnect(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Hang())
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    async with aiohttp.ClientSession() as http:
        with pytest.raises(asyncio.TimeoutError):
            await http.post(
                f"{scripted_llm.base_url}/chat/completions",
                json=body,
                timeout=aiohttp.ClientTimeout(total=0.5),
            )
    await asyncio.sleep(0.3)
    (rec,) = scripted_llm.requests
    assert rec.action == "hang" and rec.disconnected and rec.finished_at is not None


def test_default_replies_are_diverse() -> None:
    def bigrams(t: str) -> set[str]:
        return {t[i : i + 2] for i in range(len(t) - 1)}

    replies = [default_text(a, s, n) for a in ("pm", "dev") for s in ("s1", "s2") for n in range(8)]
    assert len(set(replies)) == len(replies)
    assert default_text("pm", "s1", 0) == default_text("pm", "s1", 0)
    worst = max(
        len(bigrams(a) & bigrams(b)) / len(bigrams(a) | bigrams(b))
        for i, a in enumerate(replies)
        for b in replies[i + 1 :]
    )
    assert worst < 0.75  # loop detection fires at > 0.85


# ------------------------------------------------------------------------------------------------
# against the real server
# ------------------------------------------------------------------------------------------------


async def test_pm_turn(opencode_factory: Any, scripted_llm: ScriptedLLM) -> None:
    """(a) a pm turn via prompt_async; the text and the model land where expected."""
    server: OpenCodeServer = await opencode_factory()
    scripted_llm.script(Text(text="PM says: ship the MVP first.", chunk_size=5), agent="pm")
    async with server.client() as http:
        sid, msgs = await first_turn(http, "Opening statement?")
    (req,) = scripted_llm.requests
    assert (req.agent, req.model, req.kind, req.session_id) == ("pm", "debater-2", "turn", sid)
    assert req.last_user_text == "Opening statement?"
    assert req.tools == []  # seats have permission {"*": "deny"}
    _user, assistant = msgs
    assert assistant["info"]["agent"] == "pm" and assistant["info"]["modelID"] == "debater-2"
    assert assistant["info"]["finish"] == "stop"
    assert assistant["info"]["tokens"]["input"] == 100
    assert texts(assistant) == ["PM says: ship the MVP first."]
    assert not server.npm_install_ran()


async def test_tool_turn(opencode_factory: Any, scripted_llm: ScriptedLLM) -> None:
    """(b) build calls the built-in read tool, gets the result, then answers with text.

    (``glob``/``grep`` need ripgrep: without ``rg`` on PATH OpenCode tries to download it from
    GitHub on first use and the tool fails offline with "ripgrep execution failed".)
    """
    server: OpenCodeServer = await opencode_factory(files={"notes/a.md": "# alpha notes\n"})
    path = str(server.project_dir / "notes" / "a.md")
    scripted_llm.script(
        ToolCalls(calls=[ToolCall(name="read", arguments={"filePath": path})]),
        Text(text="Found the notes.", reasoning="The file has one line."),
        agent="build",
    )
    async with server.client() as http:
        _sid, msgs = await first_turn(http, "List notes", agent=None, model=ORCH, n_assistant=2)
    first, second = scripted_llm.requests
    assert (first.kind, second.kind) == ("turn", "tool-followup")
    assert first.agent == second.agent == "build"
    assert "read" in first.tools
    tool_msg = second.messages[-1]
    assert tool_msg["role"] == "tool" and "alpha notes" in str(tool_msg["content"])
    a1, a2 = msgs[1], msgs[2]
    (tool_part,) = [p for p in a1["parts"] if p["type"] == "tool"]
    assert tool_part["tool"] == "read" and tool_part["state"]["status"] == "completed"
    assert a1["info"]["finish"] == "tool-calls" and a2["info"]["finish"] == "stop"
    assert [p["text"] for p in a2["parts"] if p["type"] == "reasoning"] == [
        "The file has one line."
    ]
    assert texts(a2) == ["Found the notes."]


async def test_ignored_parts_are_hidden_from_the_model(
    opencode_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """(c) FINDING: a text part with ``ignored: true`` is stored (GET returns it with
    ``ignored: true``) but never sent to the model. A user message whose parts are ALL ignored
    disappears from the model's context entirely (no empty user message is sent). In a message with
    one ignored and one normal part, only the normal part's text is sent. Prompting (not noReply)
    with only ignored parts still runs a turn, whose context then ends with the previous
    *assistant* message. Part ``metadata`` given on a prompt's text part is stored and returned.
    """
    server: OpenCodeServer = await opencode_factory()
    async with server.client() as http:
        sid = await new_session(http)
        first = {"type": "text", "text": "first visible", "metadata": {"rt": "meta1"}}
        await prompt(http, sid, {"parts": [first], "agent": "pm", "model": M2})
        await wait_done(http, sid, 1)
        await prompt(
            http,
            sid,
            {
                "parts": [{"type": "text", "text": "ALLIGNORED secret", "ignored": True}],
                "noReply": True,
                "agent": "pm",
                "model": M2,
            },
        )
        await prompt(
            http,
            sid,
            {
                "parts": [
                    {"type": "text", "text": "MIXIGNORED hidden", "ignored": True},
                    {"type": "text", "text": "MIXNORMAL visible"},
                ],
                "agent": "pm",
                "model": M2,
            },
        )
        await wait_done(http, sid, 2)
        await prompt(
            http,
            sid,
            {
                "parts": [{"type": "text", "text": "ONLYIGNORED", "ignored": True}],
                "agent": "pm",
                "model": M2,
            },
        )
        msgs = await wait_done(http, sid, 3)

    stored = [(p.get("text"), p.get("ignored")) for m in msgs for p in m["parts"]]
    assert ("ALLIGNORED secret", True) in stored and ("MIXIGNORED hidden", True) in stored
    assert msgs[0]["parts"][0]["metadata"] == {"rt": "meta1"}

    _r1, r2, r3 = scripted_llm.requests_for(agent="pm")
    seen = contents(r2.messages)
    assert [role for role, _ in seen] == ["user", "assistant", "user"]
    assert seen[2] == ("user", "MIXNORMAL visible")
    every_text = orjson.dumps(r2.messages + r3.messages).decode()
    assert "IGNORED" not in every_text.replace("MIXNORMAL", "")
    # all-ignored prompt: a turn runs, its context ends with the previous assistant reply
    seen3 = contents(r3.messages)
    assert [role for role, _ in seen3] == ["user", "assistant", "user", "assistant"]
    assert r3.last_user_text == "MIXNORMAL visible"


async def test_part_patch_edits_and_hides(opencode_factory: Any, scripted_llm: ScriptedLLM) -> None:
    """FINDING: ``PATCH /session/{id}/message/{msgID}/part/{partID}`` takes a FULL Part as body
    (``{"ignored": true}`` alone → 400 "Expected Part"; a body ``id`` different from the path →
    400). It replaces the stored part (text, ignored, metadata), the next model request sees the
    change (an edited assistant text is sent as edited; a user part patched to ``ignored`` hides
    the message). A path/body id that does not exist yet INSERTS a new part (upsert); parts are
    ordered by part id.
    """
    server: OpenCodeServer = await opencode_factory()
    scripted_llm.script(Text(text="original reply"), agent="pm")
    async with server.client() as http:
        sid, msgs = await first_turn(http, "META block")
        upart = msgs[0]["parts"][0]
        apart = next(p for p in msgs[1]["parts"] if p["type"] == "text")
        url = f"/session/{sid}/message/{upart['messageID']}/part/{upart['id']}"
        async with http.patch(url, json={"ignored": True}) as r:
            assert r.status == 400
        async with http.patch(url, json={**upart, "id": "prt_" + "z" * 26}) as r:
            assert r.status == 400
        async with http.patch(url, json={**upart, "ignored": True, "metadata": {"k": 1}}) as r:
            assert r.status == 200
            assert (await r.json())["ignored"] is True
        aurl = f"/session/{sid}/message/{apart['messageID']}/part/{apart['id']}"
        async with http.patch(aurl, json={**apart, "text": "edited reply"}) as r:
            assert r.status == 200
        await say(http, sid, "next")
        msgs = await wait_done(http, sid, 2)
    assert msgs[0]["parts"][0]["metadata"] == {"k": 1}
    last = scripted_llm.requests[-1]
    assert contents(last.messages) == [("assistant", "edited reply"), ("user", "next")]


async def test_http_400_gives_assistant_error(
    opencode_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """(d) a 400 from the provider is not retried and ends as an assistant message error."""
    server: OpenCodeServer = await opencode_factory()
    scripted_llm.script(HttpError(status=400, message="bad request from script"), agent="dev")
    async with server.client() as http:
        _sid, msgs = await first_turn(http, "go", agent="dev")
    assistant = msgs[-1]["info"]
    assert assistant["error"]["name"] == "APIError"
    assert assistant["error"]["data"]["message"] == "bad request from script"
    assert assistant["error"]["data"]["statusCode"] == 400
    assert "finish" not in assistant
    assert len(scripted_llm.requests) == 1


async def test_abort_disconnects_hanging_request(
    opencode_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """A hang is ended by OpenCode's abort, and the scripted LLM records the disconnect."""
    server: OpenCodeServer = await opencode_factory()
    scripted_llm.script(Hang(), agent="rv")
    async with server.client() as http:
        sid = await new_session(http)
        await say(http, sid, "go", agent="rv")
        (rec,) = await scripted_llm.wait_for_requests(1, agent="rv")
        async with http.post(f"/session/{sid}/abort") as r:
            assert await r.json() is True
        t0 = time.monotonic()
        while not rec.disconnected and time.monotonic() - t0 < 5:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        msgs = await wait_done(http, sid, 1)
    assert rec.disconnected
    assert msgs[-1]["info"]["error"]["name"] == "MessageAbortedError"


@pytest.mark.timing
async def test_prefilled_custom_tool_is_fast_and_offline(
    opencode_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """(e) a custom tool in a fresh project works on the first prompt without an npm install."""
    server: OpenCodeServer = await opencode_factory(files={".opencode/tool/echo.ts": ECHO_TOOL})
    scripted_llm.script(tool_call("echo", {"text": "hi"}), Text(text="echoed"), agent="build")
    async with server.client() as http:
        sid = await new_session(http)
        t0 = time.monotonic()
        await say(http, sid, "echo hi", agent=None, model=ORCH)
        msgs = await wait_done(http, sid, 2)
        latency = time.monotonic() - t0
    (tool_part,) = [p for m in msgs for p in m["parts"] if p["type"] == "tool"]
    assert tool_part["tool"] == "echo"
    assert tool_part["state"]["output"] == "echo: hi"
    assert "echo" in scripted_llm.requests[0].tools
    assert latency < 8.0, f"first custom-tool prompt took {latency:.1f}s"
    assert not server.npm_install_ran()


async def test_password_restart_and_second_project(
    opencode_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """Basic auth is enforced, a restart keeps sessions (same data dirs, same port), and a second
    project directory is served as its own instance."""
    server: OpenCodeServer = await opencode_factory(password="s3cret")
    async with aiohttp.ClientSession() as anon, anon.get(f"{server.url}/global/health") as r:
        assert r.status == 401
    async with server.client() as http:
        sid = await new_session(http)
    port = server.port
    await server.restart()
    assert server.port == port
    other = await server.add_project("other")
    async with server.client() as http:
        async with http.get(f"/session/{sid}") as r:
            assert r.status == 200
        async with http.post("/session", params={"directory": str(other)}, json={}) as r:
            assert (await r.json())["directory"] == str(other)
    assert not server.npm_install_ran()


async def test_title_and_auto_compaction_are_classified(
    opencode_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """Title and compaction requests are recognised (own kinds/queues) and do not consume the
    seat's script; a usage override near the context limit triggers auto-compaction."""
    cfg = offline_config(scripted_llm.base_url, title=True, auto_compaction=True)
    server: OpenCodeServer = await opencode_factory(cfg)
    scripted_llm.script(
        Text(text="Big reply", prompt_tokens=126_000), Text(text="after"), agent="pm"
    )
    scripted_llm.script(Text(text="Scripted title"), agent="title")
    async with server.client() as http:
        async with http.post("/session", json={}) as r:  # default title → title request
            sid = (await r.json())["id"]
        await say(http, sid, "go")
        await scripted_llm.wait_for_requests(2, agent="pm", within=20)
        await wait_done(http, sid, 3)
        async with http.get(f"/session/{sid}") as r:
            title = (await r.json())["title"]
    kinds = sorted((r.kind, r.agent, r.action) for r in scripted_llm.requests)
    assert kinds == [
        ("compaction", "compaction", "default"),
        ("title", "title", "text"),
        ("turn", "pm", "text"),
        ("turn", "pm", "text"),
    ]
    assert title == "Scripted title"
    (compaction,) = scripted_llm.requests_for(kind="compaction")
    assert compaction.tools == []


@pytest.mark.slow
async def test_stall_is_retried_after_chunk_timeout(
    opencode_factory: Any, scripted_llm: ScriptedLLM
) -> None:
    """A stall longer than the provider's ``chunkTimeout`` makes OpenCode drop the stream (the
    scripted LLM records the disconnect) and retry; the retry gets the next (default) reply."""
    cfg = offline_config(scripted_llm.base_url)
    cfg["provider"]["scripted"]["options"]["chunkTimeout"] = 1000
    server: OpenCodeServer = await opencode_factory(cfg)
    scripted_llm.script(Stall(text="partial text then a long pause", pause=3.0), agent="dev")
    async with server.client() as http:
        _sid, msgs = await first_turn(http, "go", agent="dev", within=30)
    first, second = scripted_llm.requests_for(agent="dev")
    assert first.action == "stall" and first.disconnected
    assert second.action == "default"
    assert texts(msgs[-1])[-1] == second.reply_text
