"""The offline orchestrator's rule (roundtabled.offline.orchestrator): which requests become a
``roundtable`` tool call, with which arguments, and how the result is relayed."""

from __future__ import annotations

import json

from roundtabled.offline.orchestrator import relay_text, reply_to, roundtable_call
from roundtabled.offline.scripted_actions import Text, ToolCalls


def test_a_request_for_a_roundtable_becomes_its_arguments() -> None:
    assert roundtable_call("convene a roundtable with pm, dev and rv about caching") == {
        "agents": ["pm", "dev", "rv"],
        "prompt": "caching",
        "rounds": 2,
    }
    assert roundtable_call("Debate on tabs versus spaces, 3 rounds, with pm and dev.") == {
        "agents": ["pm", "dev"],
        "prompt": "tabs versus spaces, 3 rounds, with pm and dev.",
        "rounds": 3,
    }
    assert roundtable_call("convene a roundtable about caching")["agents"] == ["pm", "dev", "rv"]  # type: ignore[index]
    assert roundtable_call("what is a monolith?") is None


def test_only_build_calls_and_only_when_the_tool_is_offered() -> None:
    ask = "convene a roundtable with pm, dev and rv about caching"
    call = reply_to("turn", "build", ["roundtable"], [], ask)
    assert isinstance(call, ToolCalls) and call.calls[0].name == "roundtable"
    assert reply_to("turn", "pm", ["roundtable"], [], ask) is None
    missing = reply_to("turn", "build", [], [], ask)
    assert isinstance(missing, Text) and "install-tool" in missing.text


def test_the_relay_says_the_decision_and_a_degraded_result_first() -> None:
    out = {
        "sessionID": "ses_abc123",
        "status": {"degraded": True, "notes": ["dev failed every turn"]},
        "verdict": {"decision": "wait", "consensus": "majority"},
    }
    reply = reply_to(
        "tool-followup", "build", [], [{"role": "tool", "content": json.dumps(out)}], ""
    )
    assert isinstance(reply, Text)
    assert reply.text.splitlines() == [
        "Note: the debate did not run as asked — dev failed every turn.",
        "The roundtable concluded: wait.",
        "Consensus: majority.",
        "The full debate is in its child session ses_abc123.",
    ]
    assert relay_text("Error: agents needs at least 2").startswith("The roundtable did not run")
