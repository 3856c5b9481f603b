"""Property test of :func:`roundtabled.core.commands.join_cancel`: any interleaving of cancel
requests (plain or ``summarize``) with the worker taking the pending cancel gives exactly one
abort, one cancel decided by the worker, and every caller an honest answer: a granted
``summarize`` gets its observer, a refused one is told the observer will not run."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core.commands import Cancel, join_cancel

STEPS = st.lists(st.sampled_from(["plain", "summarize", "take"]), min_size=1, max_size=12).filter(
    lambda s: any(x != "take" for x in s)
)


@given(steps=STEPS)
def test_every_cancel_caller_gets_an_honest_answer(steps: list[str]) -> None:
    pending: Cancel | None = None
    taken: Cancel | None = None
    aborts = 0
    granted_summary = refused_summary = 0
    for step in [*steps, "take"]:
        if step == "take":
            if pending is not None:
                assert taken is None, "the worker decided two cancels"
                taken, pending = pending, None
            continue
        answer = join_cancel(pending, taken, Cancel(summarize=step == "summarize"))
        if answer.refusal is not None:
            assert step == "summarize" and answer.pending is None
            assert "observer will not run" in answer.refusal
            refused_summary += 1
            continue
        if answer.pending is not None:
            assert taken is None, "a cancel set pending after the worker took one"
            pending = answer.pending
        if not answer.joined:
            aborts += 1
        granted_summary += step == "summarize"
    assert aborts == 1
    assert taken is not None
    if granted_summary:
        assert taken.summarize, "a granted summary whose observer never runs"
    if refused_summary:
        assert not taken.summarize, "a refused summary whose observer runs after all"
