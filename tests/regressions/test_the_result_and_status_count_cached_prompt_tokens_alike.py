"""Field failure (a new user's demo on llama.cpp with ``--cache-reuse``, which OpenCode records as
cache reads): the ``start`` result's footer said ``pm: 5.1k in / 512 out … total: 13.5k in``
while ``roundtabled status`` of the same roundtable said ``pm 2817 in 512 out … total 9163 in``.
The footer counted input + cache read + cache write, the contract's ``usage.input``, ``status``
and the export counted the uncached input only, and the eval's tokens per question left the
cached prompt tokens (and reasoning) out. One rule now counts them everywhere:
in = input + cache read + cache write, out = output + reasoning (docs/result.md, usage)."""

from __future__ import annotations

from roundtabled.cli.show import usage_cells
from roundtabled.core.result import build_result, delivery_text
from roundtabled.core.state import Usage
from roundtabled.eval.spending import spend_upto
from roundtabled.service.export import to_data, to_markdown
from tests.states import finished as state_of
from tests.states import seat_turn as turn

CACHED = Usage(input=590, cache_read=2227, output=500, reasoning=12)
"""pm's round-2 turn as llama.cpp's reuse of the prompt cache records it: 2,817 tokens in."""


def test_every_view_counts_cached_prompt_tokens_and_reasoning() -> None:
    state = state_of([turn("pm", 1, CACHED), turn("dev", 1, CACHED)])
    usage = build_result(state).dump()["usage"]
    assert (usage["perAgent"]["pm"]["input"], usage["perAgent"]["pm"]["output"]) == (2817, 512)
    assert (usage["input"], usage["output"]) == (5634, 1024)

    footer = next(ln for ln in delivery_text(state).splitlines() if ln.startswith("Usage"))
    assert "pm: 2.8k in / 512 out" in footer and "total: 5.6k in / 1.0k out" in footer, footer

    data = to_data(state)
    assert usage_cells(data["usage"]["perAgent"]["pm"]).split()[:4] == ["2817", "in", "512", "out"]
    assert usage_cells(data["usage"]["total"]).split()[:4] == ["5634", "in", "1024", "out"]
    md = to_markdown(data)
    assert "| **total** | 5634 | 1024 |" in md, md
    assert "2.8k in · 512 out" in md, md

    spent = spend_upto(data["turns"], 1, None, state.prompt)
    assert spent["tokens"] == 2 * (2817 + 512), spent
