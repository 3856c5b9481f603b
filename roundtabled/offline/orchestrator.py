"""The offline orchestrator: what the scripted model answers the ``build`` agent when a person
asks it for a roundtable, so that the TUI path (open the TUI, ask, watch) works without a real
model (``scripts/demo --serve``).

A ``build`` turn whose last user message asks to convene a roundtable or a debate ("convene a
roundtable with pm, dev and rv about …") is answered with a call of the ``roundtable`` tool:
the named agents (the panel of the demo when it names none), the topic (the text after
``about``/``on``, else the whole message) and the rounds asked for (``3 rounds``; default 2).
The follow-up request, which carries the tool's result, is answered with a short plain-text
relay of it: the decision, the consensus and whether the result is degraded (a real
orchestrator must say so, docs/result.md). Any other request is left to the scripted queue or
the default filler (``None``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from roundtabled.core.state import went_wrong
from roundtabled.offline.scripted_actions import Action, Text, ToolCall, ToolCalls
from roundtabled.offline.scripted_llm import RecordedRequest

ORCHESTRATOR = "build"
"""The agent that orchestrates (OpenCode's default primary agent)."""

DEFAULT_PANEL = ("pm", "dev", "rv")
"""Seats when the request names none (the demo's debaters)."""

DEFAULT_ROUNDS = 2

_ASKS = re.compile(r"\b(convene|roundtable|debate)\b", re.IGNORECASE)
_ROUNDS = re.compile(r"\b(\d{1,2})\s+rounds?\b", re.IGNORECASE)
# The names end where the topic or a rounds clause begins ("… and rv for 50 rounds about …").
_WITH = re.compile(
    r"\bwith\s+(?P<names>.+?)(?:\s+(?:about|on|to discuss|for|in|over)\b|[:?.]|$)", re.I
)
_TOPIC = re.compile(r"\b(?:about|on|to discuss)\s+(?P<topic>.+)$", re.IGNORECASE | re.DOTALL)
_NAME = re.compile(r"^[A-Za-z][\w-]{0,63}$")


def roundtable_call(text: str) -> dict[str, Any] | None:
    """The ``roundtable`` tool's arguments a request in ``text`` asks for, or ``None`` when it
    asks for no roundtable.

    >>> roundtable_call("convene a roundtable with pm, dev and rv about caching")
    {'agents': ['pm', 'dev', 'rv'], 'prompt': 'caching', 'rounds': 2}
    """
    text = " ".join(text.split())
    if not _ASKS.search(text):
        return None
    agents: list[str] = []
    m = _WITH.search(text)
    if m:
        for name in re.split(r",|\band\b|&", m["names"]):
            name = name.strip()
            if _NAME.match(name):
                agents.append(name)
    if len(agents) < 2:
        agents = list(DEFAULT_PANEL)
    t = _TOPIC.search(text)
    topic = t["topic"].strip() if t else text
    r = _ROUNDS.search(text)
    rounds = int(r.group(1)) if r else DEFAULT_ROUNDS
    return {"agents": agents, "prompt": topic, "rounds": max(1, min(rounds, 50))}


def relay_text(tool_output: str) -> str:
    """A plain-text relay of the ``roundtable`` tool's output (the result contract as JSON,
    docs/result.md; an ``Error: …`` text is passed on as it is)."""
    try:
        data = json.loads(tool_output)
    except ValueError:
        return f"The roundtable did not run: {tool_output.strip()[:500]}"
    if not isinstance(data, dict):
        return "The roundtable returned something I cannot read."
    verdict: dict[str, Any] = v if isinstance(v := data.get("verdict"), dict) else {}
    status: dict[str, Any] = st if isinstance(st := data.get("status"), dict) else {}
    lines = []
    if status.get("degraded"):
        # Only what went wrong: an informational note (the plugin shaped the requests) is no
        # reason the debate did not run as asked.
        wrong = went_wrong([str(n) for n in status.get("notes") or []])
        notes = "; ".join(wrong) or "see its status notes"
        lines.append(f"Note: the debate did not run as asked — {notes}.")
    decision = verdict.get("decision")
    lines.append(
        f"The roundtable concluded: {decision}." if decision else "No decision was reached."
    )
    if verdict.get("consensus"):
        lines.append(f"Consensus: {verdict['consensus']}.")
    if data.get("sessionID"):
        lines.append(f"The full debate is in its child session {data['sessionID']}.")
    return "\n".join(lines)


def _last_tool_output(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "tool":
            content = m.get("content")
            if isinstance(content, list):
                return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
            return str(content or "")
    return ""


def orchestrator_reply(rec: RecordedRequest) -> Action | None:
    """:attr:`ScriptedLLM.responder <roundtabled.offline.scripted_llm.ScriptedLLM.responder>` of
    the offline demo: :func:`reply_to` for the request ``rec``."""
    return reply_to(rec.kind, rec.agent, rec.tools, rec.messages, rec.last_user_text)


def reply_to(
    kind: str, agent: str | None, tools: list[str], messages: list[dict[str, Any]], last_user: str
) -> Action | None:
    """The offline orchestrator's answer to one model request, or ``None`` to leave it to the
    scripted queue's default.

    Args:
        kind: the request's kind (``turn``, ``tool-followup``, ``title``, ``compaction``).
        agent: the agent recognised from the system text.
        tools: the names of the tools offered with the request.
        messages: the request's chat messages (OpenAI shape).
        last_user: the text of the last user message.
    """
    if agent != ORCHESTRATOR:
        return None
    if kind == "turn":
        call = roundtable_call(last_user)
        if call is None:
            return None
        if "roundtable" not in tools:
            return Text(
                text="I cannot convene a roundtable here: the roundtable tool is not installed "
                "(roundtabled install-tool, then restart opencode serve)."
            )
        return ToolCalls(
            calls=[ToolCall(name="roundtable", arguments=call)],
            text=f"Convening {', '.join(call['agents'])} for {call['rounds']} round(s).",
        )
    if kind == "tool-followup":
        output = _last_tool_output(messages)
        if output:
            return Text(text=relay_text(output))
    return None
