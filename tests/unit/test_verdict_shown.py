"""The rule that makes S2 show the observer's recorded verdict in words instead of its JSON block
(:func:`roundtabled.core.observer_verdict.shown_text`, :func:`recorded_line`, and phase 4's
:func:`roundtabled.core.lifecycle.finalize`; docs/result.md, "The observer's verdict").

Properties: a text with a verdict block loses every block and keeps its prose; a text without one
is left alone; a shown text is never changed again (a restart repeats nothing); the line is one
line with no fence whatever the decision says. Phase 4 edits only after the delivery's state
write, never into a deleted S2 or after a failure, and records that it did.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core import lifecycle
from roundtabled.core.lifecycle import EditPart, FinalFacts, WriteState
from roundtabled.core.messages import TextPart
from roundtabled.core.observer_verdict import has_verdict_block, recorded_line, shown_text
from roundtabled.core.state import (
    EndReason,
    Finalization,
    HistoryEntry,
    VerdictRecord,
)
from roundtabled.opencode import v1_wire
from tests.states import finished, seat_turn

VERDICT = {"decision": "ship it", "confidence": 0.8, "consensus": "majority"}
BLOCK = f"6. **Verdict**\n```json\n{json.dumps(VERDICT)}\n```"
LINE = recorded_line(VERDICT)

prose_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="`{}"),
    max_size=80,
).map(str.strip)


def test_the_line_says_decision_consensus_and_confidence_in_words() -> None:
    assert LINE == (
        "Verdict recorded by roundtabled — decision: ship it; consensus: majority; "
        "confidence: 8/10."
    )
    assert recorded_line({"decision": None, "consensus": "none"}) == (
        "Verdict recorded by roundtabled — decision: none; consensus: none."
    )
    assert recorded_line(None).startswith("Verdict block not used: ")


@given(decision=st.text(max_size=600))
def test_the_line_is_one_line_without_a_fence_whatever_the_decision(decision: str) -> None:
    line = recorded_line({"decision": decision, "consensus": "split"})
    assert "\n" not in line and "```" not in line
    assert not has_verdict_block(line)


@settings(max_examples=200)
@given(prose=prose_text, after=prose_text)
def test_a_block_gives_way_to_the_line_after_the_prose_and_only_once(
    prose: str, after: str
) -> None:
    text = "\n\n".join(t for t in (prose, BLOCK, after) if t)
    shown = shown_text(text, LINE)
    assert shown is not None
    assert "```" not in shown and shown.endswith(LINE)
    assert prose in shown and after in shown
    assert shown_text(shown, LINE) is None  # already shown: left alone


@given(text=prose_text)
def test_a_text_without_a_block_is_left_as_it_is(text: str) -> None:
    assert shown_text(text, LINE) is None


def test_a_bare_json_repair_reply_becomes_the_line_and_two_blocks_both_go() -> None:
    assert shown_text(json.dumps(VERDICT), LINE) == LINE
    two = f"Prose.\n```json\n{{}}\n```\nMore.\n{BLOCK}"
    assert shown_text(two, LINE) == f"Prose.\n\nMore.\n\n{LINE}"


# ── phase 4 ─────────────────────────────────────────────────────────────────────────────────────

REPLY = f"Summary.\n\n{BLOCK}"


def concluded(**extra: Any) -> Any:
    observer = HistoryEntry.model_validate(
        {
            "agent": "roundtable-observer",
            "round": 2,
            "response": REPLY,
            "kind": "observer",
            "messageID": "msg_observer_prompt",
            "finish": "stop",
        }
    )
    return finished(
        [seat_turn("pm", 1), seat_turn("dev", 1), observer],
        verdict=VerdictRecord(data=VERDICT),
        summary="Summary.",
        stateMessageID="msg_state",
        statePartID="prt_state",
        **extra,
    )


RAW = {"id": "prt_reply", "type": "text", "text": REPLY, "messageID": "msg_answer"}
PART = v1_wire.text_part_record("msg_answer", RAW)


def facts(parts: tuple[TextPart, ...] | None) -> FinalFacts:
    return FinalFacts(now=1, result_id="msg_result", delimiter_id="msg_delim", observer_parts=parts)


def test_phase_4_edits_the_block_after_the_delivery_s_write_and_records_it() -> None:
    state = concluded()
    assert lifecycle.reply_reads(state) == ("msg_observer_prompt",)
    step = lifecycle.finalize(state, facts((PART,)))
    kinds = [type(c).__name__ for c in step.commands]
    edit = kinds.index("EditPart")
    assert "WriteState" in kinds[:edit]  # the verdict and the delivery are written first
    cmd = step.commands[edit]
    assert isinstance(cmd, EditPart) and cmd.message_id == "msg_answer"
    assert cmd.part == replace(PART, text=f"Summary.\n\n{LINE}")
    assert v1_wire.part_body(cmd.part) == {**RAW, "text": f"Summary.\n\n{LINE}"}
    later = [c for c in step.commands[edit:] if isinstance(c, WriteState)]
    assert later and all(c.state.finalization.verdict_shown for c in later)
    assert step.state.history[-1].response == f"Summary.\n\n{LINE}"
    assert step.done and lifecycle.reply_reads(step.state) is None


def test_an_edited_part_or_a_reply_without_a_block_is_left_alone() -> None:
    shown = replace(PART, text=f"Summary.\n\n{LINE}")
    plain = replace(PART, text="Prose only.")
    for part in (shown, plain):
        step = lifecycle.finalize(concluded(), facts((part,)))
        assert not any(isinstance(c, EditPart) for c in step.commands)
        assert step.state.finalization.verdict_shown


def test_no_edit_once_recorded_nor_into_a_deleted_or_failed_roundtable() -> None:
    parts = (PART,)
    for state in (
        concluded(finalization=Finalization(verdict_shown=True)),
        concluded(end_reason=EndReason.SESSION_DELETED),
        concluded(end_reason=EndReason.PARENT_DELETED),
        concluded(end_reason=EndReason.FAILED),
    ):
        assert lifecycle.reply_reads(state) is None
        step = lifecycle.finalize(state, facts(parts))
        assert not any(isinstance(c, EditPart) for c in step.commands)


def test_no_edit_while_the_result_waits_for_its_delivery() -> None:
    state = concluded(parentSessionID="ses_parent0000000001")
    step = lifecycle.finalize(
        state, FinalFacts(now=1, result_id="r", delimiter_id="d", s1_busy=True, observer_parts=())
    )
    assert step.wake_at is not None and not step.state.finalization.verdict_shown
    assert not any(isinstance(c, EditPart) for c in step.commands)


@settings(max_examples=300, deadline=None)
@given(
    crashes=st.lists(st.integers(min_value=-1, max_value=8), max_size=6),
    busy=st.lists(st.booleans(), max_size=6),
)
def test_across_crashes_s2_shows_the_line_once_and_only_after_a_written_delivery(
    crashes: list[int], busy: list[bool]
) -> None:
    """Phase 4 under crashes after any command (the next process resumes from the last written
    state, its history read back from S2 as the edit left it) and a busy S2: the part ends with
    the prose and the line once, and every edit comes after a write that recorded the
    delivery."""
    part = PART
    written = concluded()
    state = written
    delivered_written = False
    for n in range(len(crashes) + 8):
        crash = crashes[n] if n < len(crashes) else -1
        reads = lifecycle.reply_reads(state)
        parts = (part,) if reads is not None else None
        step = lifecycle.finalize(
            state,
            FinalFacts(
                now=n,
                result_id=f"msg_r{n}",
                delimiter_id=f"msg_d{n}",
                s2_busy=busy[n] if n < len(busy) else False,
                observer_parts=parts,
            ),
        )
        crashed = False
        for i, cmd in enumerate(step.commands):
            if isinstance(cmd, WriteState):
                written = cmd.state
                delivered_written = (
                    delivered_written or cmd.state.delivery.delivered_via is not None
                )
            elif isinstance(cmd, EditPart):
                assert delivered_written, "an edit before the delivery's state was written"
                part = cmd.part
            if i == crash:
                crashed = True
                break
        if crashed:
            # A restart: the written state, its history rebuilt from S2 (the part as it is).
            history = list(written.history)
            history[-1] = history[-1].model_copy(update={"response": part.text})
            state = written.model_copy(update={"history": history})
            continue
        state = step.state
        if step.done:
            break
    assert part.text == f"Summary.\n\n{LINE}"
    assert state.finalization.verdict_shown
