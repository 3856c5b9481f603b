"""What a roundtable does beyond a plain debate, on the real OpenCode 2.1.2 server, run by the 2.x
shell (engine/v2run.py): context 'recent', extend, until and budgets, the dry run, list, the
progress feed and export. Only the model is scripted. The server loads the roundtabled plugin as
``install-tool --opencode 2`` writes it (the ``env`` fixture of test_v2_roundtable.py). What the
shell does and why: docs/design.md, "The 2.x shell".
"""

from __future__ import annotations

from typing import Any

import pytest

from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.core.validation import parse_request
from roundtabled.errors import ValidationFailed
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import content_text
from tests.e2e.test_v2_roundtable import Env, env

__all__ = ["env"]  # the fixture, imported: one 2.x server for this module too

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180), pytest.mark.e2e]

WORDS = {
    "pm": ["customers", "marketing", "pricing", "roadmap", "churn"],
    "dev": ["flags", "ledger", "latency", "rollback", "schema"],
}
"""Each seat's word per round: replies that share few words, so loop detection never ends the
debate early."""


def reply(seat: str, rnd: int) -> str:
    """Seat ``seat``'s scripted reply in 1-based round ``rnd`` (its first line is unique)."""
    word = WORDS[seat][rnd - 1]
    return f"{seat} r{rnd}: {word} {word}-{rnd} matter most.\nPosition: flag — ship behind a flag"


def said(request: Any, role: str) -> list[str]:
    """The texts of ``request``'s messages of ``role``, in order."""
    return [content_text(m.get("content")) for m in request.messages if m.get("role") == role]


async def run_debate(env: Env, body: dict[str, Any], seats: list[str], rounds: int) -> Any:
    """Script ``rounds`` rounds of ``seats`` and the observer, start ``body`` and return the
    result and the model requests of the debate (seat turns and the observer's)."""
    s1 = await env.parent()
    since = len(env.llm.requests)
    for rnd in range(1, rounds + 1):
        for seat in seats:
            env.llm.script(Text(text=reply(seat, rnd)), agent=seat)
    env.llm.script(Text(text="SUMMARY: ship behind a flag."), agent=OBSERVER_AGENT)
    req = parse_request({"agents": seats, "parentSessionID": s1, **body})
    state = await env.runner.start(req)
    result = await env.runner.wait_result(state.session_id, 150)
    assert result is not None, "no result within 150 s"
    requests = [r for r in env.llm.requests[since:] if r.kind == "turn"]
    return state, result, requests


async def test_context_recent_leaves_the_middle_rounds_out_of_a_seat_s_request(env: Env) -> None:
    """context 'recent', two seats, four rounds: a seat in round 4 sees the opening round and
    round 3 in full and the digest of round 2, never round 2's replies (the plugin's context hook
    drops what S2's metadata lists); rounds 1 to 3 see every reply; the observer sees all."""
    state, result, requests = await run_debate(
        env,
        {"rounds": 4, "until": "rounds", "context": "recent", "prompt": "Ship behind a flag?"},
        ["pm", "dev"],
        4,
    )
    assert result["endReason"] == "completed", result
    assert state.options.context == "recent"
    assert [r.agent for r in requests] == ["pm", "dev"] * 4 + [OBSERVER_AGENT]

    def replies_seen(r: Any) -> list[str]:
        return [t.strip().splitlines()[0] for t in said(r, "assistant") if t.strip()]

    def first_line(seat: str, rnd: int) -> str:
        return reply(seat, rnd).splitlines()[0]

    everything = [first_line(s, rnd) for rnd in (1, 2, 3, 4) for s in ("pm", "dev")]
    # rounds 1 to 3: every earlier reply (nothing is hidden before round 4)
    for i in range(6):
        assert replies_seen(requests[i]) == everything[:i], i
        assert "[Digest of round" not in said(requests[i], "user")[-1]
    # round 4: round 1 and round 3 in full (and pm's round 4 for dev), round 2 left out
    kept = [first_line(s, rnd) for rnd in (1, 3) for s in ("pm", "dev")]
    assert replies_seen(requests[6]) == kept
    assert replies_seen(requests[7]) == [*kept, first_line("pm", 4)]
    for r in requests[6:8]:
        own = said(r, "user")[-1]
        assert "[Digest of round(s) 2:" in own, own
        assert "Ship behind a flag?" in said(r, "user")[0]  # the opening prompt stays
        for seat in ("pm", "dev"):
            assert first_line(seat, 2) not in "\n".join(said(r, "assistant"))
    # the observer reads the whole debate
    assert replies_seen(requests[8]) == everything


async def test_context_recent_without_the_plugin_is_refused_naming_install_tool(
    env: Env,
) -> None:
    """A project whose OpenCode 2.x instance does not load the roundtabled plugin: context
    'recent' is refused in one line naming the field and `roundtabled install-tool`."""
    bare = await env.server.add_project("bare")
    s1 = await env.port.client.create_session(directory=str(bare), title="S1")
    req = parse_request(
        {"agents": ["pm", "dev"], "prompt": "Q?", "parentSessionID": s1.id, "context": "recent"}
    )
    with pytest.raises(ValidationFailed) as caught:
        await env.runner.start(req)
    assert caught.value.field == "context"
    line = str(caught.value)
    assert line.startswith("Error: context:") and "\n" not in line
    assert "roundtabled install-tool --opencode 2" in line and str(bare) in line
