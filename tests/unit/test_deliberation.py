"""Deliberation rules (roundtabled/deliberation.py): convergence, budget projection, digest,
diversity warning."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core import deliberation as dl
from roundtabled.core.positions import normalise_label, parse_position, position_of
from roundtabled.core.state import Budget, EndReason, HistoryEntry, Options, RoundtableState, Usage
from tests.states import fresh

AGENTS = ["pm", "dev", "rv"]
S2 = "ses_test1234"


def turn(
    agent: str,
    rnd: int,
    label: str | None,
    *,
    error: bool = False,
    tokens: tuple[int, int] = (100, 20),
    cost: float = 0.0,
) -> HistoryEntry:
    text = "Some argument." + (f"\nPosition: {label} — because (confidence 7/10)" if label else "")
    return HistoryEntry(
        agent=agent,
        round=rnd,
        response="" if error else text,
        has_error=error,
        error="APIError: boom" if error else None,
        seat=AGENTS.index(agent) if agent in AGENTS else None,
        usage=Usage(input=tokens[0], output=tokens[1], cost=cost),
    )


def rounds(*labels: list[str | None]) -> list[HistoryEntry]:
    return [
        turn(agent, r, label)
        for r, row in enumerate(labels, start=1)
        for agent, label in zip(AGENTS, row, strict=True)
    ]


# ── convergence ────────────────────────────────────────────────────────────────────────────────


def test_unchanged_labels_converge_from_round_two() -> None:
    h = rounds(["a", "b", "c"], ["a", "b", "c"])
    c = dl.check_convergence(h, 2)
    assert c.converged and c.rule == "unchanged"
    assert c.labels == {"pm": "a", "dev": "b", "rv": "c"}


def test_round_one_never_converges_sequentially_even_if_unanimous() -> None:
    h = rounds(["a", "a", "a"])
    assert not dl.check_convergence(h, 1).converged


def test_unanimous_independent_opening_converges_at_once() -> None:
    h = rounds(["Split", "split ", "SPLIT."])
    c = dl.check_convergence(h, 1, independent_opening=True)
    assert c.converged and c.rule == "unanimous"
    assert not dl.check_convergence(rounds(["a", "a", "b"]), 1, independent_opening=True).converged


def test_a_changed_label_blocks_even_when_it_makes_the_panel_unanimous() -> None:
    h = rounds(["a", "a", "b"], ["a", "a", "a"])
    c = dl.check_convergence(h, 2)
    assert not c.converged and c.changed == ("rv",)
    # one more stable round and it converges
    h += [turn(a, 3, "a") for a in AGENTS]
    assert dl.check_convergence(h, 3).converged


def test_a_seat_without_a_label_blocks() -> None:
    h = rounds(["a", "b", "c"], ["a", None, "c"])
    c = dl.check_convergence(h, 2)
    assert not c.converged and "dev stated no position" in c.reason


def test_unanimous_after_a_round_without_labels_converges() -> None:
    h = rounds([None, None, None], ["a", "a", "a"])
    c = dl.check_convergence(h, 2)
    assert c.converged and c.rule == "unanimous"


def test_mixed_fresh_labels_do_not_converge() -> None:
    h = rounds([None, "b", "c"], ["a", "b", "c"])
    assert not dl.check_convergence(h, 2).converged


def test_failed_seats_do_not_speak_and_one_speaker_is_not_enough() -> None:
    h = rounds(["a", "b", "c"])
    h += [turn("pm", 2, "a"), turn("dev", 2, None, error=True), turn("rv", 2, "c")]
    assert dl.check_convergence(h, 2).converged  # dev failed: pm and rv held theirs
    h2 = rounds(["a", "b", "c"])
    h2 += [turn("pm", 2, "a"), turn("dev", 2, None, error=True), turn("rv", 2, None, error=True)]
    c = dl.check_convergence(h2, 2)
    assert not c.converged and "only 1 seat" in c.reason


def test_an_extension_needs_two_rounds_of_its_own() -> None:
    h = rounds(["a", "b", "c"], ["a", "b", "c"], ["a", "b", "c"])
    assert not dl.check_convergence(h, 3, first_round=3).converged
    h += [turn(a, 4, lbl) for a, lbl in zip(AGENTS, ["a", "b", "c"], strict=True)]
    assert dl.check_convergence(h, 4, first_round=3).converged


def test_recorded_position_wins_over_the_text() -> None:
    h = rounds(["a", "b", "c"], ["a", "b", "c"])
    h[3] = h[3].model_copy(update={"position": parse_position("Position: z")})
    assert not dl.check_convergence(h, 2).converged


labels_st = st.lists(
    st.lists(st.one_of(st.none(), st.sampled_from(["a", "A ", "b", "c"])), min_size=3, max_size=3),
    min_size=1,
    max_size=5,
)
errors_st = st.lists(st.booleans(), min_size=15, max_size=15)


@given(labels_st, errors_st, st.booleans())
def test_convergence_never_fires_on_a_round_where_any_label_changed(
    table: list[list[str | None]], errors: list[bool], independent: bool
) -> None:
    history = [
        turn(agent, r, label, error=errors[(r - 1) * 3 + i])
        for r, row in enumerate(table, start=1)
        for i, (agent, label) in enumerate(zip(AGENTS, row, strict=True))
    ]
    by = {(e.round, e.agent): e for e in history}
    for r in range(1, len(table) + 1):
        c = dl.check_convergence(history, r, independent_opening=independent)
        if not c.converged:
            continue
        speaking = [a for a in AGENTS if not by[(r, a)].has_error]
        assert len(speaking) >= dl.MIN_SPEAKERS
        for a in speaking:
            now = position_of(by[(r, a)])
            assert now is not None  # a seat without a label blocks
            prev = by.get((r - 1, a))
            if prev is not None and not prev.has_error and (p := position_of(prev)):
                assert normalise_label(p.label) == normalise_label(now.label)


# ── budget ─────────────────────────────────────────────────────────────────────────────────────


def table(history: list[HistoryEntry], budget: Budget, started: int = 1_000) -> RoundtableState:
    return fresh(
        S2, AGENTS, 5, history=history, options=Options(budget=budget, call_started_at=started)
    )


def test_spent_counts_input_and_output_of_the_current_call_only() -> None:
    h = [turn("pm", 1, "a", tokens=(100, 20), cost=0.5), turn("dev", 2, "a", tokens=(200, 30))]
    h.append(
        HistoryEntry(agent="obs", round=1, response="s", kind="observer", usage=Usage(input=9))
    )
    s = dl.spent(h, from_round=0, started_at=1_000, now=3_500)
    assert (s.tokens, s.usd, s.seconds) == (100 + 20 + 200 + 30 + 9, 0.5, 2.5)
    assert dl.spent(h, from_round=1, started_at=1_000, now=1_000).tokens == 230


def test_projection_is_the_seats_last_turn_plus_what_was_said_since() -> None:
    h = [
        turn("pm", 1, "a", tokens=(100, 20), cost=0.012),
        turn("dev", 1, "a", tokens=(130, 40)),
        turn("rv", 1, "a", tokens=(170, 50)),
    ]
    p = dl.project_turn(h, "pm", from_round=0, started_at=1_000, now=7_000)
    assert p.tokens == 120 + 40 + 50
    assert abs(p.usd - 0.012 * 210 / 120) < 1e-12
    assert p.seconds == 2.0  # 6 s over 3 turns
    # a seat that has not spoken: the last turn of anyone
    assert dl.project_turn(h, "new", from_round=0, started_at=0, now=0).tokens == 220
    assert dl.project_turn([], "pm", from_round=0, started_at=0, now=0) == dl.Spent()


def test_reserve_is_the_largest_turn_plus_every_output() -> None:
    h = [turn("pm", 1, "a", tokens=(100, 20)), turn("dev", 1, "a", tokens=(300, 40))]
    r = dl.observer_reserve(h, from_round=0, started_at=1_000, now=5_000)
    assert r.tokens == 340 + 60
    assert r.seconds == dl.RESERVE_SECONDS_FACTOR * 2.0
    assert dl.observer_reserve([], from_round=0, started_at=0, now=0) == dl.Spent()


def test_budget_stops_when_the_projection_would_eat_the_reserve() -> None:
    h = [turn(a, 1, "x", tokens=(100, 20)) for a in AGENTS]  # 360 spent
    # next pm turn ≈ 120 + 40 = 160; reserve = 120 + 60 = 180 → needs 700
    assert dl.budget_check(table(h, Budget(tokens=700)), "pm", 2_000).stop is False  # type: ignore[union-attr]
    check = dl.budget_check(table(h, Budget(tokens=699)), "pm", 2_000)
    assert check is not None and check.stop and check.dimension == "tokens"
    assert "spent 360 tokens of 699 tokens" in check.note


def test_the_first_turn_always_runs_and_no_budget_is_none() -> None:
    assert dl.budget_check(table([], Budget(tokens=1)), "pm", 2_000).stop is False  # type: ignore[union-attr]
    assert dl.budget_check(table([], Budget()), "pm", 2_000) is None


def test_seconds_and_usd_budgets() -> None:
    h = [turn("pm", 1, "x", cost=0.01), turn("dev", 1, "x", cost=0.01)]
    st_ = table(h, Budget(seconds=10), started=1_000)
    # 2 turns in 4 s: next turn 2 s, reserve 4 s: 4 + 2 > 10 - 4 is false at 4 s; at 5 s
    # the turn takes 2.5 s and the reserve 5 s: 5 + 2.5 > 5
    assert dl.budget_check(st_, "rv", 5_000).stop is False  # type: ignore[union-attr]
    check = dl.budget_check(st_, "rv", 6_000)
    assert check is not None and check.stop and check.dimension == "seconds"
    usd = dl.budget_check(table(h, Budget(usd=0.02)), "rv", 2_000)
    assert usd is not None and usd.stop and usd.dimension == "usd"


@given(
    st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 2000)), min_size=0, max_size=12),
    st.integers(1, 50_000),
)
def test_a_budget_that_lets_the_turn_run_leaves_room_for_it_and_the_reserve(
    usages: list[tuple[int, int]], limit: int
) -> None:
    h = [turn(AGENTS[i % 3], i // 3 + 1, "x", tokens=u) for i, u in enumerate(usages)]
    check = dl.budget_check(table(h, Budget(tokens=limit)), AGENTS[len(h) % 3], 2_000)
    assert check is not None
    total = check.spent.tokens + check.projection.tokens + check.reserve.tokens
    assert check.stop == (total > limit)


# ── recent context ─────────────────────────────────────────────────────────────────────────────


def test_rounds_to_hide_keep_the_opening_and_the_last_round() -> None:
    assert list(dl.rounds_to_hide(0)) == []
    assert list(dl.rounds_to_hide(2)) == []  # round 3 starts: rounds 1 and 2 visible
    assert list(dl.rounds_to_hide(3)) == [2]  # round 4 starts: 1 and 3 visible
    assert list(dl.rounds_to_hide(9)) == list(range(2, 9))


def test_digest_from_the_ledger() -> None:
    h = rounds(["a", "b", "c"], ["a", "b", None], ["a", "x", "c"])
    h[4] = turn("dev", 2, None, error=True)
    text = dl.digest(h, [2, 3], AGENTS)
    lines = text.splitlines()
    assert lines[0].startswith("[Digest of round(s) 2–3")
    assert lines[1] == "- pm: r2–3 “a” (7/10)"
    assert lines[2] == "- dev: r2 “no reply” → r3 “x” (7/10)"
    assert lines[3] == "- rv: r2 “no position” → r3 “c” (7/10)"
    assert dl.digest(h, [], AGENTS) == ""


def test_digest_is_bounded() -> None:
    h = [turn(f"agent{i}", r, f"label {r} {'x' * 60}") for r in range(2, 40) for i in range(6)]
    text = dl.digest(h, range(2, 40), [f"agent{i}" for i in range(6)])
    assert len(text.encode()) <= dl.DIGEST_MAX_BYTES + 6  # one newline per line
    assert "…" in text


# ── diversity ──────────────────────────────────────────────────────────────────────────────────


def test_diversity_warning_same_model_and_near_identical_prompts() -> None:
    models = dict.fromkeys(AGENTS, "openai/gpt-x")
    same = dict.fromkeys(AGENTS, "You are a helpful debater. Argue your case.")
    warn = dl.diversity_warning(models, same, AGENTS)
    assert warn is not None and "openai/gpt-x" in warn
    assert dl.diversity_warning(models, dict.fromkeys(AGENTS), AGENTS) is not None
    distinct = {
        "pm": "You are pm, the product manager. Argue from the user's point of view.",
        "dev": "Senior engineer: weigh cost of change, operations, on-call burden.",
        "rv": "Reviewer; look for risks, missing tests and security holes.",
    }
    assert dl.diversity_warning(models, distinct, AGENTS) is None
    mixed = {**models, "rv": "anthropic/claude-y"}
    assert dl.diversity_warning(mixed, same, AGENTS) is None


# ── the machine's question ─────────────────────────────────────────────────────────────────────


def after(history: list[HistoryEntry], nxt: tuple[int, int], **opts: Any) -> RoundtableState:
    return fresh(
        S2,
        AGENTS,
        opts.pop("total", 5),
        history=history,
        current_round=nxt[0],
        current_agent_index=nxt[1],
        options=Options(call_started_at=1_000, **opts),
    )


def test_stop_after_a_converged_round_only_with_until_converged() -> None:
    h = rounds(["a", "b", "c"], ["a", "b", "c"])
    stop = dl.stop_after_seat_turn(after(h, (2, 0), until="converged"), 2_000)
    assert stop is not None and stop.reason == EndReason.CONVERGED
    assert stop.note.startswith("converged after round 2 of 5 (unchanged)")
    assert dl.stop_after_seat_turn(after(h, (2, 0)), 2_000) is None  # until rounds
    # mid-round: no convergence check
    assert dl.stop_after_seat_turn(after(h[:-1], (1, 2), until="converged"), 2_000) is None
    # the last planned round: a normal completion, not a stop
    assert dl.stop_after_seat_turn(after(h, (2, 0), until="converged", total=2), 2_000) is None


def test_unanimous_independent_opening_stops_after_round_one() -> None:
    h = rounds(["a", "a", "a"])
    stop = dl.stop_after_seat_turn(
        after(h, (1, 0), until="converged", opening="independent"), 2_000
    )
    assert stop is not None and stop.reason == EndReason.CONVERGED
    assert dl.stop_after_seat_turn(after(h, (1, 0), until="converged"), 2_000) is None


def test_stop_when_the_next_turn_does_not_fit_the_budget() -> None:
    h = [turn(a, 1, "x", tokens=(100, 20)) for a in AGENTS[:2]]  # mid-round 1
    stop = dl.stop_after_seat_turn(after(h, (0, 2), budget=Budget(tokens=500)), 2_000)
    assert stop is not None and stop.reason == EndReason.BUDGET
    assert "spent 240 tokens of 500 tokens" in stop.note
    assert dl.stop_after_seat_turn(after(h, (0, 2), budget=Budget(tokens=5000)), 2_000) is None


def test_next_call_continues_right_after_an_early_stop_with_the_call_s_options() -> None:
    h = rounds(["a", "b", "c"], ["a", "b", "c"])
    st_ = after(h, (2, 0), until="converged", budget=Budget(tokens=5), total=4)
    st_ = st_.model_copy(update={"end_reason": EndReason.CONVERGED})
    start, opts = dl.next_call(st_, dl.Call(turn_timeout=9.0, budget=Budget(usd=1.0)), 7_000)
    assert start == 2  # not 4: rounds 3 and 4 were never run
    assert (opts.until, opts.budget, opts.turn_timeout) == ("converged", Budget(usd=1.0), 9.0)
    assert (opts.call_started_at, opts.call_from_round) == (7_000, 2)
    # a budget stop mid-round: the cut round counts as run
    cut = st_.model_copy(update={"end_reason": EndReason.BUDGET, "history": h[:4]})
    assert dl.next_call(cut, None, 7_000)[0] == 2
    # a completed debate continues after its last planned round; the old budget is not kept
    done = st_.model_copy(update={"end_reason": EndReason.COMPLETED})
    start, opts = dl.next_call(done, dl.Call(until="rounds"), 7_000)
    assert start == 4 and opts.until == "rounds" and opts.budget is None


def test_a_stop_is_recorded_in_the_notes_and_for_the_card() -> None:
    h = rounds(["a", "b", "c"], ["a", "b", "c"])
    stop = dl.stop_after_seat_turn(after(h, (2, 0), until="converged"), 2_000)
    assert stop is not None
    st_ = stop.recorded(after(h, (2, 0)))
    assert st_.notes == [stop.note] and st_.stop_detail == stop.note


def test_no_stop_before_a_turn_whose_prompt_is_already_in_the_session() -> None:
    # A fast handoff sends the next prompt before writing the state; after a crash the decision
    # is taken again, later: the budget's seconds have grown, but that turn is already running.
    from roundtabled.core.messages import UserView
    from roundtabled.core.state import Marker

    h = [turn(a, 1, "x") for a in AGENTS[:2]]
    tight = after(h, (0, 2), budget=Budget(tokens=200))
    assert dl.stop_after_seat_turn(tight, 2_000) is not None

    def prompt_of(message_id: str, seat: int) -> UserView:
        """The prompt of round 1's turn of ``seat``, as S2 holds it."""
        marker = Marker(kind="turn", round=0, seat=seat, agent=AGENTS[seat])
        return UserView(id=message_id, created=1, marker=marker, text="")

    sent = prompt_of("msg_1", 2)
    assert dl.stop_after_seat_turn(tight, 2_000, [sent]) is None
    other = prompt_of("msg_2", 1)
    assert dl.stop_after_seat_turn(tight, 2_000, [other]) is not None


@pytest.mark.parametrize(
    "reason",
    [
        EndReason.ALL_FAILED,
        EndReason.REPETITION,
        EndReason.CANCELLED,
        EndReason.OBSERVER_FAILED,
        EndReason.TIMEOUT,
        EndReason.FAILED,
    ],
)
def test_next_call_continues_right_after_any_early_stop(reason: EndReason) -> None:
    # An all-failed stop after round 1 of 2, extended by 1: the extension is round 2, not a
    # "round 3" that leaves round 2 never run and never mentioned.
    h = rounds(["a", "b", "c"])
    st_ = after(h, (1, 0), total=2).model_copy(update={"end_reason": reason})
    start, opts = dl.next_call(st_, None, 7_000)
    assert start == 1 and opts.call_from_round == 1
    # stopped before any seat spoke: the extension starts at round 1
    assert dl.next_call(st_.model_copy(update={"history": []}), None, 7_000)[0] == 0


# ── convergence on stances ─────────────────────────────────────────────────────────────────────


def test_rephrasings_of_one_stance_converge() -> None:
    h = rounds(
        ["modular monolith", "Modular monolith first", "a modular monolith, for now"],
        ["**Modular monolith.**", "go with a modular monolith", "the modular monolith"],
    )
    c = dl.check_convergence(h, 2, seats=AGENTS, topic="Split?")
    assert c.converged and c.rule == "unchanged" and c.changed == ()


def test_a_negation_or_another_number_is_a_change() -> None:
    h = rounds(["split payments", "12", "x"], ["do not split payments", "12.0", "x"])
    c = dl.check_convergence(h, 2, seats=AGENTS)
    assert not c.converged and c.changed == ("pm",)
    h = rounds(["a", "12", "x"], ["a", "112", "x"])
    assert dl.check_convergence(h, 2, seats=AGENTS).changed == ("dev",)


def test_a_seat_name_as_label_blocks_like_no_label() -> None:
    h = rounds(["keep", "keep", "keep"], ["keep", "Dev", "keep"])
    c = dl.check_convergence(h, 2, seats=AGENTS)
    assert not c.converged and "dev stated no position in round 2" in c.reason


def test_only_the_counted_seats_decide() -> None:
    h = rounds(["keep", "keep", "split"], ["keep", "keep", "split now"])
    assert not dl.check_convergence(h, 2, seats=AGENTS).converged
    assert dl.check_convergence(h, 2, seats=AGENTS, counted=["pm", "dev"]).converged
