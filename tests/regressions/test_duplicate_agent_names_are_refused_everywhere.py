"""Regression: duplicate agent names.

Field failure: ``agents=["pm","pm"]`` (and case/whitespace variants) produced a table whose seat
count differed from the list the caller believed was accepted (a seat silently merged, or a name
with a stray space that no agent has). Proves the one rule — names compared case-folded, a name
with surrounding whitespace refused, every refusal an ``Error:`` naming the duplicate and listing
the available agents — holds in the validation layer (hypothesis), the control API, the CLI and
the real ``roundtable`` tool path, and that no S2 session is ever created for a refused list.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core.server_records import AgentRecord
from roundtabled.core.validation import check_agents
from roundtabled.errors import ValidationFailed
from roundtabled.offline.scripted_actions import Text, ToolCall, ToolCalls
from tests.e2e.cli_helpers import cli
from tests.e2e.conftest import RT
from tests.e2e.edge_helpers import ask_build

#: The exact failing inputs from the field, with the name the error must mention.
CASES: list[tuple[list[str], str]] = [
    (["pm", "pm"], "'pm'"),
    (["pm", "PM", "dev"], "'PM'"),
    ([" pm", "dev"], "' pm'"),
    (["pm", "dev", "pm"], "'pm'"),
]
#: The same inputs as typed on the command line. The CLI trims each name of ``--agents`` (a
#: whitespace-padded ``--agents "pm, dev"`` is the seats pm and dev), so there the padded case is a
#: padded duplicate, refused under its trimmed name.
CLI_CASES: list[tuple[list[str], str]] = [
    (["pm", "pm"], "'pm'"),
    (["pm", "PM", "dev"], "'PM'"),
    (["pm", " pm"], "'pm'"),
    (["pm", "dev", "pm"], "'pm'"),
]
AVAILABLE = [
    AgentRecord(n, None, n == "roundtable-observer", None, None, False)
    for n in ("build", "dev", "plan", "pm", "rv", "roundtable-observer")
]


def assert_refusal(message: str, needle: str) -> None:
    assert message.startswith("Error:"), message
    assert needle in message, (needle, message)
    assert "Available agents:" in message, message
    for name in ("dev", "pm", "rv"):
        assert name in message.split("Available agents:")[1], message


@pytest.mark.parametrize(("agents", "needle"), CASES)
def test_field_inputs_are_refused_naming_the_duplicate(agents: list[str], needle: str) -> None:
    """The four field inputs, at the validation layer."""
    with pytest.raises(ValidationFailed) as exc:
        check_agents(agents, None, AVAILABLE)
    assert_refusal(str(exc.value), needle)


NAME = st.sampled_from(["pm", "PM", "Pm", "dev", "DEV", "rv", " pm", "dev ", "\tR v", "rv\n"])


@settings(max_examples=300, deadline=None)
@given(st.lists(NAME, min_size=2, max_size=6))
def test_an_accepted_list_has_exactly_one_seat_per_name(agents: list[str]) -> None:
    """Property: accepted ⇒ names exact (no surrounding whitespace), known, pairwise distinct
    after case-folding; refused ⇒ ``Error:`` listing the available agents."""
    try:
        check_agents(agents, None, AVAILABLE)
    except ValidationFailed as exc:
        assert str(exc).startswith("Error:")
        assert "Available agents: build, dev, plan, pm, rv" in str(exc)
        return
    folded = [a.casefold() for a in agents]
    assert len(set(folded)) == len(agents)
    assert all(a == a.strip() and a in ("pm", "dev", "rv") for a in agents)


async def _sessions(rt: RT) -> set[str]:
    return {s["id"] for s in await rt.oc("GET", "/session", params={"directory": rt.directory})}


async def test_control_api_refuses_and_creates_no_session(rt: RT) -> None:
    """``POST /v1/roundtables`` with each field input: 400, ``Error:`` naming the duplicate and
    the available agents, and no new session on the server."""
    before = await _sessions(rt)
    for agents, needle in CASES:
        status, data = await rt.api(
            "POST", "/v1/roundtables", {"agents": agents, "prompt": "x", "directory": rt.directory}
        )
        assert status == 400, (agents, data)
        assert_refusal(data["error"], needle)
    assert await _sessions(rt) == before
    assert rt.llm.requests == []


async def test_cli_refuses_with_one_error_and_exit_2(rt: RT) -> None:
    """``roundtabled start --agents pm,PM,dev`` etc. through the real entry point."""
    before = await _sessions(rt)
    for agents, needle in CLI_CASES:
        run = await cli(rt, "start", "--agents", ",".join(agents), "topic")
        assert run.code == 2, (agents, run)
        assert "Traceback" not in run.err
        assert_refusal(run.err.strip(), needle)
    assert await _sessions(rt) == before


async def test_the_real_tool_path_refuses_with_the_same_rule(rt: RT) -> None:
    """build's model calls the ``roundtable`` tool once per field input (parallel calls in one
    step); every tool result is the same ``Error:`` and no roundtable starts."""
    s1 = await rt.new_parent()
    before = await _sessions(rt)
    calls = [
        ToolCall(name="roundtable", arguments={"agents": agents, "prompt": "Which stack?"})
        for agents, _ in CASES
    ]
    rt.llm.script(ToolCalls(calls=calls), Text(text="All refused."), agent="build")
    await ask_build(rt, s1, "Convene the panels.")
    follow = await rt.llm.wait_for_requests(1, within=60, session=s1, kind="tool-followup")
    results = {
        m["tool_call_id"]: str(m["content"]) for m in follow[0].messages if m["role"] == "tool"
    }
    assert len(results) == len(CASES), results
    by_call: dict[str, Any] = {}
    for m in follow[0].messages:
        for tc in m.get("tool_calls") or []:
            by_call[tc["id"]] = json.loads(tc["function"]["arguments"])["agents"]
    for call_id, content in results.items():
        agents = by_call[call_id]
        needle = next(n for a, n in CASES if a == agents)
        assert_refusal(content, needle)
    await rt.wait_idle(s1)
    assert await _sessions(rt) == before  # no roundtable session was created
    assert not [r for r in rt.llm.requests if r.agent in ("pm", "dev", "rv")]
