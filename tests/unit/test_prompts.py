"""Prompt and text builders (docs/behaviour.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core.positions import Change
from roundtabled.core.prompts import (
    ATTRIBUTION_MAX_ENTRIES,
    CLOSING_FORMS,
    CLOSING_LINE,
    DEFAULT_CLOSING_FORM,
    EXTEND_CONTINUATION_PREFIXES,
    STANCES_BLOCK_BYTES,
    TURN_ORCHESTRATION_BUDGET,
    closing_line,
    default_title,
    effective_topic,
    extend_topic,
    failure_toast,
    infer_extend_mode,
    stances_block,
    turn_prompt,
)
from roundtabled.core.result import (
    CANCELLED_HEADER,
    INTERRUPTION_HEADER,
    REPETITION_TEXT,
    cancelled_text,
    delivery_text,
    interruption_text,
    named_observer_prompt,
    observer_prompt,
    usage_table,
)
from roundtabled.core.state import (
    TITLE_PREFIX,
    EndReason,
    Extension,
    HistoryEntry,
    Options,
    RoundtableState,
    ToolCallSummary,
    Usage,
)

SECTIONS = (
    "Executive summary",
    "Key points",
    "Decisions or convergences",
    "Remaining open questions",
    "Suggested next steps",
)


def make_state(**kw: object) -> RoundtableState:
    data: dict[str, object] = {
        "session_id": "ses_abc",
        "title": "(Roundtable) - ORM",
        "agents": ["pm", "dev", "rv"],
        "total_rounds": 3,
        "prompt": "Which ORM should we use?",
    }
    data.update(kw)
    return RoundtableState.model_validate(data)


def turn(agent: str, rnd: int, text: str, **kw: object) -> HistoryEntry:
    return HistoryEntry.model_validate({"agent": agent, "round": rnd, "response": text, **kw})


# ── default_title ───────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        ("Which ORM should we use?", "(Roundtable) - Which ORM should we use?"),
        ("  Which\n\nORM   now?  ", "(Roundtable) - Which ORM now?"),
        ("a" * 80, "(Roundtable) - " + "a" * 80),
        ("a" * 81, "(Roundtable) - " + "a" * 80),  # one word longer than 80: cut hard
        ("word " * 20, "(Roundtable) - " + " ".join(["word"] * 16)),
        ("x" * 70 + " abcdefghijkl", "(Roundtable) - " + "x" * 70),
        ("x" * 70 + ", abcdefghijkl", "(Roundtable) - " + "x" * 70),  # no trailing punctuation
        ("x" * 78 + " y and more", "(Roundtable) - " + "x" * 78 + " y"),  # boundary at 80
        ("", "(Roundtable)"),
    ],
)
def test_default_title_table(prompt: str, title: str) -> None:
    assert default_title(prompt) == title


@given(st.text(alphabet=st.sampled_from("ab .,!\n\t—é😀"), max_size=300) | st.text(max_size=300))
def test_default_title_bounded_and_cut_at_word_boundary(prompt: str) -> None:
    title = default_title(prompt)
    assert len(title) <= 95
    collapsed = " ".join(prompt.split())
    if not collapsed:
        return
    body = title.removeprefix(TITLE_PREFIX)
    assert collapsed.startswith(body)
    rest = collapsed[len(body) :]
    if not rest or rest.startswith(" "):
        return
    # The body ends inside a word: either that word is longer than 80 characters (cut hard), or
    # only trailing punctuation of the word was dropped.
    word_start = body.rfind(" ") + 1
    word = collapsed[word_start:].split(" ")[0]
    dropped = collapsed[len(body) : word_start + len(word)]
    assert len(word) > 80 or all(not ch.isalnum() for ch in dropped)


# ── extend mode ─────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("prompt", "mode"),
    [
        ("Debate more about X", "continuation"),
        ("debate MORE about X", "continuation"),
        ("Continue", "continuation"),
        ("continue.", "continuation"),
        ("  **Continue:** the costs", "continuation"),
        ("CONTINUE with the costs", "continuation"),
        ("Dive deeper into operational costs", "continuation"),
        ("dive   deeper\ninto costs", "continuation"),
        ("Keep going", "continuation"),
        ("Go deeper on latency", "continuation"),
        ("Elaborate on the risks", "continuation"),
        ("- continue", "continuation"),
        ("Now plan Y", "new-topic"),
        ("Continuous delivery: how?", "new-topic"),
        ("Debater roles", "new-topic"),
        ("What about continuing later?", "new-topic"),
        ("", "new-topic"),
    ],
)
def test_infer_extend_mode(prompt: str, mode: str) -> None:
    assert infer_extend_mode(prompt) == mode


def test_every_continuation_prefix_matches() -> None:
    for prefix in EXTEND_CONTINUATION_PREFIXES:
        assert infer_extend_mode(prefix.upper() + " X") == "continuation"


def test_extend_topic() -> None:
    assert extend_topic("A", "Debate more", "continuation") == (
        "Original topic: A\n\nContinuation: Debate more"
    )
    text = extend_topic("A", "Now plan Y", "new-topic")
    assert text.endswith("New challenge: Now plan Y")
    assert "above in this session" in text


def test_effective_topic_follows_extensions() -> None:
    state = make_state(
        total_rounds=6,
        extensions=[
            Extension(from_round=2, prompt="Debate more on cost", mode="continuation"),
            Extension(from_round=4, prompt="Now plan Y", mode="new-topic"),
            Extension(from_round=5, prompt="Continue", mode="continuation"),
        ],
    )
    assert effective_topic(state, 0) == "Which ORM should we use?"
    assert effective_topic(state, 1) == "Which ORM should we use?"
    assert effective_topic(state, 2) == extend_topic(
        "Which ORM should we use?", "Debate more on cost", "continuation"
    )
    assert effective_topic(state, 4).endswith("New challenge: Now plan Y")
    assert effective_topic(state, 5) == "Original topic: Now plan Y\n\nContinuation: Continue"


# ── turn prompt ─────────────────────────────────────────────────────────────────────────────────


def test_turn_prompt_first_turn() -> None:
    text = turn_prompt(make_state(), round_index=0, seat=0, since=[], opening=True)
    assert text.startswith(
        "[System] You are participating in a roundtable debate. "
        "Agents (pm → dev → rv) will discuss the topic below in 3 round(s)."
    )
    assert "[Topic] Which ORM should we use?" in text
    assert "Round 1/3 | Current agent: pm" in text
    assert "You are pm. Speak only as pm." in text
    assert "assistant messages in this conversation" in text
    assert "Nobody has spoken" not in text
    assert "last prompt" not in text
    assert "ROUNDTABLE META" not in text


def test_turn_prompt_attribution_and_last_round() -> None:
    since = [
        turn("dev", 2, "The **cost** is high.\nReally."),
        turn("me", 2, "What about raw SQL?", kind="user"),
        turn("rv", 2, "", has_error=True, error="ProviderAuthError: bad key"),
        turn("pm", 2, "partial answer", cut_off=True),
        turn("dev", 2, "", tool_calls=[ToolCallSummary(tool_name="bash", output_preview="x")]),
    ]
    text = turn_prompt(make_state(), round_index=2, seat=0, since=since, opening=False)
    assert "Round 3/3 | Current agent: pm" in text
    assert "Since your last turn:" in text
    assert "- dev (round 2): “The **cost** is high. Really.”" in text
    assert "- the user (a person at the table) wrote: “What about raw SQL?”" in text
    assert "- rv (round 2) failed: ProviderAuthError: bad key" in text
    assert "- pm (round 2) was cut off at the time limit: “partial answer”" in text
    assert "[used tools: bash]" in text
    # The framing first, the question last, then the closing request.
    assert "[System] This is the last prompt — finalize your thoughts\n\n[Topic] " in text
    assert text.endswith("\n\n[Topic] Which ORM should we use?\n\n" + CLOSING_LINE)
    assert text.index("Round 3/3") < text.index("Since your last turn:") < text.index("[Topic]")
    assert "assistant messages in this conversation" not in text
    # entries are listed in order
    assert text.index("- dev (round 2)") < text.index("the user") < text.index("- rv")


def test_turn_prompt_nobody_spoke() -> None:
    text = turn_prompt(make_state(), round_index=1, seat=1, since=[], opening=False)
    assert "Nobody has spoken since your last turn." in text
    assert "Round 2/3 | Current agent: dev" in text


def test_turn_prompt_quotes_are_capped() -> None:
    since = [turn("dev", 1, "word " * 100)]
    text = turn_prompt(make_state(), round_index=1, seat=0, since=since, opening=False)
    line = next(x for x in text.splitlines() if x.startswith("- dev"))
    quote = line.split("“", 1)[1].rstrip("”")
    assert quote.endswith("…")
    assert len(quote) <= 101


def test_turn_prompt_lists_at_most_twelve_entries() -> None:
    since = [turn("me", 1, f"message {i}", kind="user") for i in range(20)]
    text = turn_prompt(make_state(), round_index=1, seat=0, since=since, opening=False)
    listed = [x for x in text.splitlines() if x.startswith("- the user")]
    assert len(listed) == ATTRIBUTION_MAX_ENTRIES
    assert "… and 8 more" in text
    assert "message 0" in text


def test_turn_prompt_uses_extension_topic() -> None:
    state = make_state(
        total_rounds=4,
        extensions=[Extension(from_round=3, prompt="Now plan Y", mode="new-topic")],
    )
    assert "[Topic] Which ORM" in turn_prompt(state, round_index=2, seat=0, since=[], opening=False)
    text = turn_prompt(state, round_index=3, seat=0, since=[], opening=False)
    assert "New challenge: Now plan Y" in text
    assert "Round 4/4" in text


_names = st.text(alphabet=st.characters(codec="utf-8"), min_size=1)
_entry = st.builds(
    lambda agent, rnd, text, kind, err, cut: HistoryEntry(
        agent=agent, round=rnd, response=text, kind=kind, has_error=err, error=text, cut_off=cut
    ),
    _names.map(lambda s: s[:100]),
    st.integers(1, 50),
    st.text(max_size=400),
    st.sampled_from(["turn", "user", "interjection", "observer"]),
    st.booleans(),
    st.booleans(),
)


@settings(max_examples=200)
@given(
    agents=st.lists(
        st.text(alphabet="abcdé😀-_", min_size=1, max_size=100).filter(
            lambda name: len(name.encode()) <= 100
        )
        | st.text(alphabet="abcdefgh", min_size=90, max_size=100),
        min_size=2,
        max_size=6,
    ),
    rounds=st.integers(1, 50),
    data=st.data(),
    since=st.lists(_entry, max_size=30),
    opening=st.booleans(),
    topic=st.text(max_size=300),
    change=st.none()
    | st.builds(
        lambda r, a, b: Change(round=r, from_label=a, to_label=b),
        st.integers(1, 50),
        st.text(min_size=1, max_size=80),
        st.text(min_size=1, max_size=80),
    ),
    labels=st.lists(
        st.tuples(st.integers(0, 5), st.text(alphabet="ab 12界😀-", min_size=1, max_size=80)),
        max_size=12,
    ),
)
def test_turn_prompt_orchestration_is_bounded(
    agents: list[str],
    rounds: int,
    data: st.DataObject,
    since: list[HistoryEntry],
    opening: bool,
    topic: str,
    change: Change | None,
    labels: list[tuple[int, str]],
) -> None:
    # Every seat has stated a position: the stances block is as full as it gets.
    history = [
        HistoryEntry(agent=agents[i % len(agents)], round=1, response=f"x\nPosition: {label} — y")
        for i, label in labels
    ]
    state = make_state(agents=agents, total_rounds=rounds, prompt=topic, history=history)
    round_index = data.draw(st.integers(0, rounds - 1))
    seat = data.draw(st.integers(0, len(agents) - 1))
    text = turn_prompt(
        state, round_index=round_index, seat=seat, since=since, opening=opening, change=change
    )
    assert f"[Topic] {topic}\n" in text
    orchestration = len(text.encode()) - len(topic.encode())
    assert orchestration <= TURN_ORCHESTRATION_BUDGET


def test_turn_prompt_worst_case_names_and_entries() -> None:
    agents = [chr(ord("a") + i) * 100 for i in range(6)]  # 100-byte names
    since = [turn(agents[i % 6], 50, "長" * 500, cut_off=bool(i % 2)) for i in range(40)]
    since += [turn("me", 50, "😀" * 300, kind="user")]
    history = [
        turn(agents[i], 49, f"x\nPosition: {chr(0x4E00 + i) * 80} — y (confidence 7/10)")
        for i in range(6)
    ]
    state = make_state(agents=agents, total_rounds=50, prompt="t", history=history)
    change = Change(round=49, from_label="界" * 80, to_label="😀" * 80)
    text = turn_prompt(state, round_index=49, seat=0, since=since, opening=False, change=change)
    assert len(text.encode()) - 1 <= TURN_ORCHESTRATION_BUDGET
    assert "begin with: Changed:" in text and text.endswith(CLOSING_LINE)
    assert f"You are {agents[0]}." in text
    assert "last prompt" in text
    assert "Stances on the table" in text and "more" in text
    opening = turn_prompt(state, round_index=49, seat=0, since=since, opening=True, change=change)
    assert len(opening.encode()) - 1 <= TURN_ORCHESTRATION_BUDGET
    assert "Changed:" not in opening and opening.endswith(CLOSING_LINE)


def test_turn_prompt_size_does_not_grow_with_rounds() -> None:
    since = [turn("dev", 1, "x" * 1000), turn("rv", 1, "y" * 1000)]
    small = turn_prompt(
        make_state(total_rounds=2), round_index=0, seat=0, since=since, opening=False
    )
    big = turn_prompt(
        make_state(total_rounds=50), round_index=48, seat=0, since=since, opening=False
    )
    assert abs(len(small) - len(big)) <= 4  # only the digits of the round numbers differ


# ── observer prompts ────────────────────────────────────────────────────────────────────────────


def _history() -> list[HistoryEntry]:
    return [
        turn("pm", 1, "PM opening " + "z" * 100, usage=Usage(input=1200, output=340, cost=0.0012)),
        turn("dev", 1, "", has_error=True, error="ProviderAuthError"),
        turn("me", 1, "What about raw SQL?", kind="user"),
        turn(
            "rv",
            1,
            "partial",
            cut_off=True,
            tool_calls=[ToolCallSummary(tool_name="bash", output_preview="src/\nlib/")],
            usage=Usage(input=800, output=60, cost=0.02),
        ),
    ]


def test_observer_prompt_sections_and_entries() -> None:
    history = _history()
    state = make_state(history=history)
    text = observer_prompt(state, history, per_entry_chars=50)
    assert text.startswith("You are an impartial roundtable observer.")
    for section in SECTIONS:
        assert section in text
    assert "\nDebate:\n" in text
    assert "── pm · round 1 ──" in text
    assert "── dev · round 1" in text and "FAILED" in text and "ProviderAuthError" in text
    assert "── the user ──\nWhat about raw SQL?" in text
    assert "CUT OFF" in text
    assert "  [tool bash] src/" in text
    assert "… [truncated, full text above in this session]" in text
    assert "stopped" not in text  # completed (no end reason): nothing to explain
    assert "ROUNDTABLE META" not in text


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        (EndReason.REPETITION, "repeating"),
        (EndReason.ALL_FAILED, "every agent failed in round 1"),
        (EndReason.CANCELLED, "cancelled"),
    ],
)
def test_observer_prompt_states_why_the_debate_stopped(reason: EndReason, words: str) -> None:
    history = _history()
    state = make_state(history=history, end_reason=reason)
    assert words in observer_prompt(state, history)
    assert words in named_observer_prompt(state, history, observer="rv")


@given(
    st.lists(
        st.builds(
            lambda a, r, t: HistoryEntry(agent=a, round=r, response=t),
            st.text(alphabet="abcxyz", min_size=1, max_size=10),
            st.integers(1, 50),
            st.text(max_size=200),
        ),
        max_size=10,
    )
)
def test_observer_prompt_names_every_agent(history: list[HistoryEntry]) -> None:
    state = make_state(history=history)
    text = observer_prompt(state, history)
    for section in SECTIONS:
        assert section in text
    for e in history:
        assert f"── {e.agent} · round {e.round} ──" in text


def test_named_observer_prompt() -> None:
    history = _history()
    text = named_observer_prompt(make_state(), history, observer="rv")
    assert text.startswith("Your role: rv. Provide an executive summary")
    for section in SECTIONS:
        assert section in text
    assert "── pm · round 1 ──" in text


# ── texts for S1 ────────────────────────────────────────────────────────────────────────────────


def test_delivery_text_completed_with_footer() -> None:
    state = make_state(history=_history(), summary="The summary.", end_reason="completed")
    text = delivery_text(state)
    lines = text.splitlines()
    assert lines[0] == "Roundtable ses_abc — ORM"
    assert lines[1].startswith("Status: completed")
    assert "The summary." in text
    footer = next(line for line in lines if line.startswith("Usage — "))
    assert footer.startswith("Usage — pm: 1.2k in / 340 out · $0.0012 | rv: 800 in")
    assert "total: 2.0k in / 400 out · $0.02" in footer
    assert "dev:" not in footer  # nothing recorded for dev
    quiet = state.model_copy(update={"options": Options(usage_footer=False)})
    assert "Usage — " not in delivery_text(quiet)


@pytest.mark.parametrize(
    ("reason", "line"),
    [
        (EndReason.REPETITION, REPETITION_TEXT),
        (EndReason.ALL_FAILED, "Roundtable aborted: every agent failed in round 1"),
        (EndReason.CANCELLED, "Roundtable cancelled by the user"),
    ],
)
def test_delivery_text_end_reason(reason: EndReason, line: str) -> None:
    state = make_state(history=_history(), summary="S.", end_reason=reason)
    assert delivery_text(state).splitlines()[1] == line


def test_interruption_and_cancelled_texts() -> None:
    history = [turn("pm", 1, "a" * 5000), turn("dev", 1, "short")]
    state = make_state(history=history)
    text = interruption_text(state)
    assert text.startswith(
        "[Roundtable interrupted — session closed. Partial history up to interruption:]\n"
    )
    assert text.startswith(INTERRUPTION_HEADER)
    assert "a" * 2000 in text and "a" * 2001 not in text
    assert "── dev · round 1 ──\nshort" in text
    cancelled = cancelled_text(state)
    assert cancelled.startswith(CANCELLED_HEADER + "\n")
    assert cancelled_text(make_state()).endswith("(nothing was said)")


def test_failure_toast() -> None:
    assert failure_toast("dev", 2, "rv") == "DEV failed on Round 2. Skipping to RV."
    assert failure_toast("dev", 2, None) == "DEV failed on Round 2."


def test_usage_table() -> None:
    history = [
        turn("pm", 1, "", usage=Usage(input=10, output=1, cost=0.5)),
        turn("dev", 1, "", usage=Usage(input=20, output=2)),
        turn("pm", 2, "", usage=Usage(input=30, output=3, reasoning=4, cost=0.25)),
        turn("me", 2, "hi", kind="user"),
    ]
    table = usage_table(history)
    assert table["perAgent"]["pm"].usage == Usage(input=40, output=4, reasoning=4, cost=0.75)
    assert table["perAgent"]["dev"].usage == Usage(input=20, output=2)
    assert "me" not in table["perAgent"]
    assert table["perRound"][1].usage == Usage(input=30, output=3, cost=0.5)
    assert table["perRound"][2].usage == Usage(input=30, output=3, reasoning=4, cost=0.25)
    assert table["total"].usage == Usage(input=60, output=6, reasoning=4, cost=0.75)
    assert table["total"].turns == 3 and table["total"].unreported == 0


# ── the stances on the table and the closing line ──────────────────────────────────────────────


def _stated(agent: str, rnd: int, label: str) -> HistoryEntry:
    return turn(agent, rnd, f"Because.\nPosition: {label} — why (confidence 7/10)")


def test_stances_on_the_table_from_round_two_most_held_first() -> None:
    history = [
        _stated("pm", 1, "Modular monolith first"),
        _stated("dev", 1, "split now"),
        _stated("rv", 1, "a modular monolith, for now"),
    ]
    state = make_state(history=history)
    assert "Stances on the table" not in turn_prompt(
        state, round_index=0, seat=1, since=history[:1], opening=False
    )
    text = turn_prompt(state, round_index=1, seat=0, since=history[1:], opening=False)
    block = text[text.index("Stances on the table") :]
    lines = block.splitlines()
    assert "reuse its label exactly" in lines[0]
    assert lines[1] == "- “Modular monolith first”: pm, rv"
    assert lines[2] == "- “split now”: dev"
    # The closing request is last, after the stances.
    assert text.endswith(CLOSING_LINE) and text.index("Stances") < text.index(CLOSING_LINE)


def test_a_label_that_names_no_stance_is_not_on_the_table() -> None:
    history = [_stated("pm", 1, "PM"), _stated("dev", 1, "split now")]
    block = stances_block(make_state(history=history))
    assert "“PM”" not in block and "“split now”: dev" in block


def test_stances_block_is_capped_with_a_count_of_the_rest() -> None:
    agents = [f"seat{i}" for i in range(6)]
    history = [_stated(a, 1, f"stance number {i} " + "w" * 50) for i, a in enumerate(agents)]
    block = stances_block(make_state(agents=agents, history=history))
    assert len(block.encode()) <= STANCES_BLOCK_BYTES
    assert block.splitlines()[-1].startswith("… and ") and block.endswith(" more")
    shown = len(block.splitlines()) - 2
    assert block.endswith(f"… and {6 - shown} more")


def test_closing_line_asks_for_the_argument_first_and_the_line_last() -> None:
    assert closing_line(DEFAULT_CLOSING_FORM) == CLOSING_LINE
    assert CLOSING_LINE.index("argument") < CLOSING_LINE.index("Position:")
    assert "very last line" in CLOSING_LINE
    assert set(CLOSING_FORMS) >= {"argue-then-position", "position-line"}
    assert all("Position: <short label>" in form for form in CLOSING_FORMS.values())
    with pytest.raises(KeyError):
        closing_line("no-such-form")
