"""Regression: a real local model's closing lines were read as no position, then as garbage.

Field failure (`scripts/demo --base-url http://127.0.0.1:18080/v1 --model local`, Qwen2.5-Coder
0.5B on llama.cpp): every seat wrote its whole closing line in square brackets, and in the last
round copied the daemon's own words "finalize your thoughts" as its label. The result said
"no Position line" for every seat; read without the brackets, the last round would have been a
unanimous decision named "Finalizing Your Thoughts".

Proves, with the exact replies: a bracketed (or parenthesised) closing line is read, its closing
bracket dropped; a label that copies the daemon's instruction names no stance; each phrase the
rule knows is in the daemon's prompts.
"""

from __future__ import annotations

import inspect

from roundtabled.core import prompts
from roundtabled.core.positions import parse_position
from roundtabled.core.stances import INSTRUCTION_PHRASES, no_stance_reason, stance_key

ROUND_1 = (
    "[Position: Splitting Monolith into Microservices Round 1/2 — Understanding the Benefits of "
    "Microservices]"
)
ROUND_2 = (
    "[Position: Finalizing Your Thoughts — Position: Splitting Monolith into Microservices Round "
    "1/2 – Un...]"
)


def test_a_bracketed_closing_line_is_read() -> None:
    p = parse_position(ROUND_1)
    assert p is not None
    assert p.label == "Splitting Monolith into Microservices Round 1/2"
    assert p.position == "Understanding the Benefits of Microservices"
    q = parse_position("An argument.\n(Position: keep it — it works (confidence 7/10))")
    assert q is not None and (q.label, q.position, q.confidence) == ("keep it", "it works", 0.7)


def test_the_copied_instruction_names_no_stance() -> None:
    p = parse_position(ROUND_2)
    assert p is not None and p.label == "Finalizing Your Thoughts"
    assert no_stance_reason(p.label, seats=["pm", "dev", "rv"]) == "the prompt's instruction copied"
    assert no_stance_reason("finalize the migration plan", seats=["pm"]) is None


def test_each_instruction_phrase_is_the_daemon_s_own() -> None:
    source = stance_key(inspect.getsource(prompts))
    assert all(phrase in source for phrase in INSTRUCTION_PHRASES)


def test_the_eval_s_copied_labels_name_no_stance() -> None:
    """The same model under `roundtabled eval` (question "What is the result of 10*4+12*13?"):
    its opening labels were "Round 1/1" (the turn header's counter) and "Finalize thoughts"."""
    for label, why in [
        ("Round 1/1", "the round header copied"),
        ("Finalize thoughts", "the prompt's instruction copied"),
    ]:
        assert no_stance_reason(label, seats=["seat-a", "seat-b", "seat-c"]) == why, label
    assert no_stance_reason("196", seats=["seat-a"]) is None
    assert no_stance_reason("do it in round 2", seats=["seat-a"]) is None
