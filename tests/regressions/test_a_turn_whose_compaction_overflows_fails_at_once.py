"""Regression: a turn whose compaction overflowed waited for the turn timeout.

Field failure (``roundtabled eval --level easy`` on Qwen2.5-Coder 0.5B through OpenCode 1.18.33,
S2 of ``easy-0-6``, read from the server's database): the observer's request no longer fit the
model's 16,384-token context; OpenCode stored an empty completed reply to the observer's prompt
(no finish, no parts), compacted S2, and the compaction's own reply failed with
``ContextOverflowError``; S2 went idle with the prompt unanswered. The daemon waited until the
turn timeout (8.5 minutes there, 600 s a turn), then the next seat hit the same. Proves: at the
idle, such a turn is recorded as failed at once with the server's error, and the debate moves on;
a compaction that succeeded changes nothing.
"""

from __future__ import annotations

from typing import Any

from roundtabled import ids
from roundtabled.core import machine
from roundtabled.core.commands import Decision, Observation, Prompt
from roundtabled.core.state import Options, Signer
from roundtabled.opencode import v1_wire
from tests.states import fresh, raw_prompt

SIGNER = Signer(b"k" * 32)
S2 = "ses_test0000000001"
T0 = 1796413042808
"""When the stored prompt was created (epoch ms), as in the field."""


def stored(prompt: Prompt, *, compaction_error: bool) -> list[dict[str, Any]]:
    """S2 after the prompt, as the server stored it: the empty reply, the compaction's user
    message and its reply (failed with ``ContextOverflowError``, or a summary)."""
    empty = {
        "info": {
            "id": ids.message_id(),
            "role": "assistant",
            "parentID": prompt.message_id,
            "agent": prompt.agent,
            "time": {"created": T0 + 28, "completed": T0 + 400},
        },
        "parts": [],
    }
    compaction_id = ids.message_id()
    ask = {
        "info": {
            "id": compaction_id,
            "role": "user",
            "agent": prompt.agent,
            "time": {"created": T0 + 413},
        },
        "parts": [{"type": "compaction", "auto": True}],
    }
    reply: dict[str, Any] = {
        "info": {
            "id": ids.message_id(),
            "role": "assistant",
            "parentID": compaction_id,
            "agent": "compaction",
            "summary": True,
            "time": {"created": T0 + 422, "completed": T0 + 430},
        },
        "parts": [],
    }
    if compaction_error:
        reply["info"]["error"] = {
            "name": "ContextOverflowError",
            "data": {"message": "Input exceeds context window of this model"},
        }
    else:
        reply["info"]["finish"] = "stop"
        reply["parts"] = [{"type": "text", "text": "## Objective\n- summary"}]
    return [
        raw_prompt(prompt.message_id, prompt.text, prompt.marker, S2, SIGNER, created=T0),
        empty,
        ask,
        reply,
    ]


def first_turn() -> tuple[Any, Prompt]:
    state = fresh(S2, ["seat-a", "seat-b"], 1, options=Options(turn_timeout=600))
    d = machine.decide(state, Observation(now=T0, status="idle", new_id=ids.message_id()))
    prompt = next(c for c in d.commands if isinstance(c, Prompt))
    return d.state.model_copy(
        update={"pending": d.state.pending.model_copy(update={"prompted_at": T0})}  # type: ignore[union-attr]
    ), prompt


def idle_after(state: Any, raw: list[dict[str, Any]]) -> Decision:
    views = tuple(v1_wire.message_view(m, S2, SIGNER) for m in raw)
    return machine.decide(
        state,
        Observation(
            now=T0 + 1000,
            status="idle",
            messages=views,
            pending_found=True,
            new_id=ids.message_id(),
        ),
    )


def test_a_failed_compaction_fails_the_turn_at_the_idle() -> None:
    state, prompt = first_turn()
    d = idle_after(state, stored(prompt, compaction_error=True))
    entry = d.state.history[-1]
    assert entry.agent == "seat-a" and entry.has_error
    assert "ContextOverflowError" in (entry.error or "")
    assert [c.agent for c in d.commands if isinstance(c, Prompt)] == ["seat-b"]


def test_a_compaction_that_succeeded_leaves_the_turn_running() -> None:
    state, prompt = first_turn()
    d = idle_after(state, stored(prompt, compaction_error=False))
    assert not d.state.history
    assert not [c for c in d.commands if isinstance(c, Prompt)]
