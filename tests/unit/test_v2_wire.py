"""The V2 adapter's pure parts and the scripted model's 2.x request handling, without a server:
event envelopes through our SSE decoder, the end of a turn, a reply without ``parentID``, and
what 2.x sends the model (``x-opencode-session-id``, ``max_completion_tokens``, a trailing
``<system-update>``, a compaction recognised by its last user message). The real-server side is
``tests/contract/test_v2_server.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from roundtabled.offline.scripted_llm import ScriptedLLM, template_summary
from roundtabled.opencode.events import Event
from roundtabled.opencode.v2 import (
    AssistantRecord,
    IdleRecord,
    OtherRecord,
    UserRecord,
    later_prompts,
    parse_v2_event,
    record_of,
    reply_of,
    tool_call_of,
    turn_end,
    v2_event_stream,
)

# Real frames of GET /api/event (2.1.2), trimmed.
CONNECTED = b'{"id":"evt_1","type":"server.connected","data":{}}'
ENQUEUED = (
    b'{"id":"evt_2","created":1,"type":"session.inbox.enqueued","location":{"directory":"/p"},'
    b'"data":{"inboxID":"msg_a","sessionID":"ses_x","item":{"type":"user"}}}'
)
SUCCEEDED = (
    b'{"id":"evt_24d11a1ac001yNjsFry3yrnydR","created":2,"type":"session.execution.succeeded",'
    b'"data":{"sessionID":"ses_x"},"durable":{"aggregateID":"ses_x","seq":10,"version":1}}'
)
FAILED = (
    b'{"id":"evt_3","type":"session.execution.failed","data":{"sessionID":"ses_x",'
    b'"error":{"type":"provider.invalid-request","message":"stub error 400"}}}'
)


def test_v2_frames_pass_our_sse_decoder_heartbeat_comments_included() -> None:
    seen: list[Event] = []
    stream = v2_event_stream("http://127.0.0.1:1", seen.append, password="pw")
    assert stream.url.endswith("/api/event")
    body = b": heartbeat\n\ndata: " + CONNECTED + b"\n\n: heartbeat\n\n"
    body += b"data: " + ENQUEUED + b"\n\ndata: " + SUCCEEDED + b"\n\n"
    assert stream.feed_bytes(body) == 3
    assert [e.type for e in seen] == [
        "server.connected",
        "session.inbox.enqueued",
        "session.execution.succeeded",
    ]
    enqueued = seen[1]
    assert (enqueued.session_id, enqueued.directory, enqueued.id) == ("ses_x", "/p", "evt_2")
    assert enqueued.properties["inboxID"] == "msg_a"
    assert seen[2].directory is None  # execution events carry no location: map by session


def test_turn_end_of_each_execution_event() -> None:
    ok = parse_v2_event(SUCCEEDED)
    assert ok is not None
    end = turn_end(ok)
    assert end is not None and (end.session_id, end.outcome) == ("ses_x", "succeeded")
    failed = parse_v2_event(FAILED)
    assert failed is not None
    end = turn_end(failed)
    assert end is not None and end.outcome == "failed"
    assert end.error == {"type": "provider.invalid-request", "message": "stub error 400"}
    enqueued = parse_v2_event(ENQUEUED)
    assert enqueued is not None and turn_end(enqueued) is None


@pytest.mark.parametrize("payload", [b"not json", b"[]", b'{"data":{}}', b'{"type":3}'])
def test_a_malformed_frame_is_none(payload: bytes) -> None:
    assert parse_v2_event(payload) is None


def _records(*raw: dict[str, Any]) -> list[UserRecord | AssistantRecord | IdleRecord | OtherRecord]:
    return [record_of(r) for r in raw]


def test_a_reply_runs_from_its_prompt_to_the_next_prompt_or_idle() -> None:
    records = _records(
        {"type": "agent-switched", "id": "msg_0", "agent": "dev"},
        {"type": "user", "id": "msg_a", "text": "first", "metadata": {"k": 1}},
        {"type": "assistant", "id": "msg_b", "agent": "dev", "content": [{"type": "tool"}]},
        {"type": "assistant", "id": "msg_c", "content": [{"type": "text", "text": "one"}]},
        {"type": "user", "id": "msg_d", "text": "steered"},
        {"type": "assistant", "id": "msg_e", "content": [{"type": "text", "text": "two"}]},
        {"type": "idle", "id": "msg_f", "outcome": "succeeded"},
    )
    assert isinstance(records[0], OtherRecord)
    first, idle = reply_of(records, "msg_a")
    assert [r.id for r in first] == ["msg_b", "msg_c"]
    assert first[1].text == "one"
    assert idle is not None and idle.outcome == "succeeded"
    second, idle2 = reply_of(records, "msg_d")
    assert [r.text for r in second] == ["two"] and idle2 == idle
    running, none = reply_of(records[:4], "msg_a")
    assert [r.id for r in running] == ["msg_b", "msg_c"] and none is None
    assert reply_of(records, "msg_missing") == ([], None)


def test_the_prompts_delivered_after_a_turn_up_to_the_next_turn_each_with_its_reply() -> None:
    def ours(u: UserRecord) -> bool:
        return "roundtabledTurn" in (u.metadata or {})

    records = _records(
        {"type": "user", "id": "msg_a", "text": "turn", "metadata": {"roundtabledTurn": {}}},
        {"type": "assistant", "id": "msg_b", "content": [{"type": "text", "text": "seat"}]},
        {"type": "user", "id": "msg_c", "text": "a note during the turn"},
        {"type": "assistant", "id": "msg_d", "content": [{"type": "text", "text": "re note"}]},
        {"type": "idle", "id": "msg_e", "outcome": "succeeded"},
        {"type": "user", "id": "msg_f", "text": "a note after it"},
        {"type": "assistant", "id": "msg_g", "content": [{"type": "text", "text": "re later"}]},
    )
    during, after = later_prompts(records, "msg_a", until=ours)
    assert during.prompt.id == "msg_c" and [r.text for r in during.reply] == ["re note"]
    assert during.ended  # its execution (the turn's) has ended
    assert after.prompt.id == "msg_f" and [r.text for r in after.reply] == ["re later"]
    assert not after.ended  # its own execution runs on
    more = _records(
        {"type": "idle", "id": "msg_h", "outcome": "succeeded"},
        {"type": "user", "id": "msg_i", "text": "next", "metadata": {"roundtabledTurn": {}}},
        {"type": "user", "id": "msg_j", "text": "a note in the next turn"},
    )
    assert [p.ended for p in later_prompts([*records, *more], "msg_a", until=ours)] == [True, True]
    assert later_prompts(records, "msg_missing", until=ours) == []


def test_a_tool_call_s_status_result_and_metadata_in_its_record() -> None:
    (record,) = _records(
        {
            "type": "assistant",
            "id": "msg_t",
            "content": [
                {"type": "text", "text": "calling"},
                {
                    "type": "tool",
                    "id": "call_1",
                    "name": "roundtable",
                    "state": {
                        "status": "completed",
                        "content": [
                            {"type": "text", "text": "the "},
                            {"type": "text", "text": "result"},
                        ],
                        "metadata": {"roundtabled": {"kind": "result"}},
                    },
                },
                {"type": "tool", "id": "call_2", "state": {"status": "streaming"}},
            ],
        }
    )
    assert tool_call_of(record, "call_1") == (
        "completed",
        "the result",
        {"roundtabled": {"kind": "result"}},
    )
    assert tool_call_of(record, "call_2") == ("pending", "", {})  # its input still streams
    assert tool_call_of(record, "call_none") == ("pending", "", {})


@pytest.fixture
async def llm() -> AsyncIterator[ScriptedLLM]:
    server = ScriptedLLM()
    await server.start(port=0)
    try:
        yield server
    finally:
        await server.stop()


async def _ask(llm: ScriptedLLM, body: dict[str, Any], headers: dict[str, str]) -> str:
    async with (
        aiohttp.ClientSession() as http,
        http.post(llm.base_url + "/chat/completions", json=body, headers=headers) as resp,
    ):
        text = ""
        async for line in resp.content:
            if line.startswith(b"data: {"):
                for choice in orjson.loads(line[6:])["choices"]:
                    text += choice["delta"].get("content") or ""
        return text


async def test_the_scripted_model_reads_a_2x_request(llm: ScriptedLLM) -> None:
    body = {
        "model": "debater-1",
        "stream": True,
        "max_completion_tokens": 4096,
        "messages": [
            {
                "role": "system",
                "content": "You are pm, the product manager in a roundtable debate.\nBe concise.",
            },
            {"role": "user", "content": "Your opening?"},
            {"role": "user", "content": "<system-update>\nThe Code Mode tool catalog changed"},
        ],
    }
    headers = {"x-opencode-session-id": "ses_child", "x-session-id": "ses_root"}
    await _ask(llm, body, headers)
    (rec,) = llm.requests
    assert (rec.session_id, rec.agent, rec.kind) == ("ses_child", "pm", "turn")
    assert rec.last_user_text == "Your opening?"
    assert rec.max_tokens == 4096
    # 1.x: only x-session-id (the session itself) and max_tokens
    await _ask(llm, {**body, "max_tokens": 100}, {"x-session-id": "ses_v1"})
    assert (llm.requests[1].session_id, llm.requests[1].max_tokens) == ("ses_v1", 100)


COMPACTION_REQUEST = """You MUST summarize the conversation above into a structured summary that \
will be given to another agent to resume the work.

You MUST use this format for your response. Do not include the <template> tags in your response.
<template>
## Objective
- [one or two brief sentences describing what the user is trying to accomplish]

## Work State
Break the objective into smaller goals.
### Completed
- [goals that have been completed; otherwise "(none)"]

## Next Move
1. [ordered list of next actions, or "(none)"]
</template>"""


async def test_a_2x_compaction_is_answered_in_its_template(llm: ScriptedLLM) -> None:
    body = {
        "model": "debater-1",
        "messages": [
            {
                "role": "system",
                "content": "You are pm, the product manager in a roundtable debate.\nBe concise.",
            },
            {"role": "user", "content": "Topic"},
            {"role": "assistant", "content": "An argument"},
            {"role": "user", "content": COMPACTION_REQUEST},
        ],
    }
    text = await _ask(llm, body, {"x-opencode-session-id": "ses_c"})
    (rec,) = llm.requests
    assert (rec.kind, rec.agent) == ("compaction", "compaction")
    assert text == template_summary(COMPACTION_REQUEST)
    assert text.splitlines()[:2] == ["## Objective", f"- {text.splitlines()[1][2:]}"]
    assert "## Work State" in text and "### Completed\n- (none)" in text
    assert "## Next Move\n1. (none)" in text and "[" not in text and "Break" not in text
    assert template_summary("no template here") is None
