"""In the TUI under ``scripts/demo --serve``, "convene a roundtable with pm, dev and rv for 50
rounds about …" was answered "Convening pm, dev for 50 round(s).": the offline orchestrator read
the names up to the topic, so "rv for 50 rounds" was no name and rv lost its seat."""

from __future__ import annotations

import pytest

from roundtabled.offline.orchestrator import roundtable_call


@pytest.mark.parametrize(
    "text",
    [
        "convene a roundtable with pm, dev and rv for 50 rounds about a rewrite in Svelte",
        "convene a roundtable with pm, dev and rv in 3 rounds about caching",
        "convene a roundtable with pm, dev and rv over 2 rounds on caching",
        "convene a roundtable with pm, dev and rv about caching",
    ],
)
def test_every_named_agent_is_seated(text: str) -> None:
    call = roundtable_call(text)
    assert call is not None
    assert call["agents"] == ["pm", "dev", "rv"], call


def test_the_rounds_and_topic_are_kept() -> None:
    call = roundtable_call(
        "convene a roundtable with pm, dev and rv for 50 rounds about a rewrite in Svelte"
    )
    assert call == {"agents": ["pm", "dev", "rv"], "prompt": "a rewrite in Svelte", "rounds": 50}
