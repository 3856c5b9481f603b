"""``council``'s pure rules (:mod:`roundtabled.core.protocols.council`): the anonymised ranking
prompts (no seat's name, each answer but the seat's own, an order that differs per seat), the
ranking lines read back, the aggregate rank (property-tested: the order of the rankings changes
nothing, an answer ranked first by every ranker leads, the unranked come last), and the second
independent round the opening hands over to (each seat prompted once in its own opening session,
the same decision when it is taken twice)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled.core import opening
from roundtabled.core.commands import CreateSeatSession, PersistRound, PromptSeat
from roundtabled.core.opening import OpeningObservation
from roundtabled.core.protocols import council
from roundtabled.core.state import (
    HistoryEntry,
    OpeningRound,
    OpeningSeat,
    Options,
    RoundtableState,
)

AGENTS = ["pm", "dev", "rv", "qa"]


def answer(agent: str) -> str:
    return f"As {agent}, I say: SECRET-{agent.upper()}. Position: x — because (confidence 7/10)"


def state(failed: tuple[str, ...] = (), *, rankings: OpeningRound | None = None) -> RoundtableState:
    seats = [
        OpeningSeat(
            seat=i,
            agent=a,
            messageID=f"msg_p{i}",
            recordID=f"msg_r{i}",
            sessionID=f"ses_seat{i:012d}",
            entry=HistoryEntry(
                agent=a,
                round=1,
                seat=i,
                response="" if a in failed else answer(a),
                has_error=a in failed,
                error="APIError: boom" if a in failed else None,
            ),
            recorded=True,
        )
        for i, a in enumerate(AGENTS)
    ]
    return RoundtableState.model_validate(
        {
            "session_id": "ses_roundtable00001",
            "title": "t",
            "agents": AGENTS,
            "total_rounds": 1,
            "prompt": "Which database?",
            "options": Options(protocol="council", opening="independent"),
            "openings": OpeningRound(seats=seats, topicRecordID="msg_topic", topic_recorded=True),
            "second_round": rankings,
        }
    )


def test_a_ranking_prompt_shows_the_other_answers_anonymised() -> None:
    st_ = state()
    firsts = set()
    for seat, agent in enumerate(AGENTS):
        text = council.ranking_prompt(st_, seat)
        for other in AGENTS:
            assert other not in text.split(), f"{agent}'s ranking prompt names {other}"
            assert f"As {other}," not in text
        assert f"SECRET-{agent.upper()}" not in text  # its own answer is not ranked
        others = [a for a in AGENTS if a != agent]
        assert all(f"SECRET-{o.upper()}" in text for o in others)
        assert text.rstrip().endswith("Rank 3: Answer C — <one sentence: why>")
        firsts.add(council.lineup(st_, seat)[0][1])
    assert len(firsts) > 1  # the first answer shown differs between seats


def test_a_failed_answer_is_not_ranked_and_two_answers_need_no_ranking_round() -> None:
    st_ = state(failed=("dev",))
    assert [s for _, s in council.lineup(st_, 0)] == [2, 3]
    assert "SECRET-DEV" not in council.ranking_prompt(st_, 0)
    assert council.PROTOCOL.second_round(state(failed=("dev", "rv"))) is None


def test_ranking_lines_are_read_back_or_refused() -> None:
    text = "Thinking…\nRank 1: Answer B — clearer\n**Rank 2:** Answer A: thinner\nRank 3: C - wrong"
    assert council.parse_ranking(text, ["A", "B", "C"]) == {
        "B": (1, "clearer"),
        "A": (2, "thinner"),
        "C": (3, "wrong"),
    }
    assert council.parse_ranking("Rank 1: Answer A — x\nRank 1: Answer B — y", ["A", "B"]) is None
    assert council.parse_ranking("Rank 1: Answer A — x", ["A", "B"]) is None
    assert council.parse_ranking("I like them all.", ["A", "B"]) is None


rank_lists = st.lists(
    st.permutations(["pm", "dev", "rv"]).map(
        lambda order: [(a, i + 1, f"r{i}") for i, a in enumerate(order)]
    ),
    min_size=0,
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(ranks=rank_lists, perm=st.randoms(use_true_random=False))
def test_the_aggregate_rank(ranks: list[list[tuple[str, int, str]]], perm: Any) -> None:
    rankings = [(f"s{i}", r) for i, r in enumerate(ranks)]
    out = council.aggregate(["pm", "dev", "rv", "qa"], rankings)
    shuffled = list(rankings)
    perm.shuffle(shuffled)
    assert council.aggregate(["pm", "dev", "rv", "qa"], shuffled) == out
    assert out[-1].author == "qa" and out[-1].mean is None  # never ranked: last, unknown
    means = [r.mean for r in out if r.mean is not None]
    assert means == sorted(means)
    for r in out:
        assert len(r.ranks) == len(rankings) or r.author == "qa"
    if rankings and all(r[0][0] == "pm" for _, r in rankings):
        assert out[0].author == "pm" and out[0].mean == 1.0


def test_the_rankings_count_the_valid_and_name_the_rest() -> None:
    st_ = state()
    rnd = opening.start(AGENTS, [f"msg_x{i}" for i in range(9)], 0).model_copy(update={"round": 2})
    replies = {
        0: "Rank 1: Answer A — good\nRank 2: Answer B — ok\nRank 3: Answer C — weak",
        1: "no ranking at all",
        2: "",
        3: "Rank 1: Answer C — best\nRank 2: Answer A — fine\nRank 3: Answer B — poor",
    }
    seats = []
    for s in rnd.seats:
        e = HistoryEntry(
            agent=s.agent,
            round=2,
            seat=s.seat,
            kind="ranking",
            response=replies[s.seat],
            has_error=s.seat == 2,
            error="APIError: down" if s.seat == 2 else None,
        )
        seats.append(s.model_copy(update={"entry": e, "recorded": True}))
    st_ = state(rankings=rnd.model_copy(update={"seats": seats, "topic_recorded": True}))
    ranked, degraded = council.rankings(st_)
    assert dict(degraded) == {
        "dev": "gave no ranking of every answer once",
        "rv": "its ranking failed: APIError: down",
    }
    by = {r.author: r for r in ranked}
    # pm ranked dev, rv, qa (A, B, C); qa ranked pm, dev, rv (A, B, C).
    assert [(b, k) for b, k, _ in by["dev"].ranks] == [("pm", 1), ("qa", 3)]
    assert by["dev"].mean == 2.0
    lines = "\n".join(council.observer_lines(st_))
    assert "You chair a council" in lines and "Not counted: dev" in lines


def test_the_opening_hands_over_to_the_ranking_round_once() -> None:
    st_ = state()
    obs = OpeningObservation(now=5_000_000, status="idle")
    assert opening.running(st_)
    ids = [f"msg_rank{i:02d}" for i in range(2 * len(AGENTS) + 1)]
    first = opening.decide(st_, obs, ids=ids, new_id="msg_next0000000001")
    again = opening.decide(st_, obs, ids=ids, new_id="msg_next0000000001")
    assert first.commands == again.commands and first.state == again.state
    assert first.after is None  # the observer waits for the rankings
    assert isinstance(first.commands[0], PersistRound)  # the round's ids are written first
    assert not any(isinstance(c, CreateSeatSession) for c in first.commands)
    sent = [c for c in first.commands if isinstance(c, PromptSeat)]
    assert [c.session_id for c in sent] == [f"ses_seat{i:012d}" for i in range(4)]
    assert all(c.marker.round == 1 and c.label.endswith("· ranking ──") for c in sent)
    rnd = first.state.second_round
    assert rnd is not None and rnd.round == 2
    # After a crash before that write: the same round is started again from the persisted state.
    again_fresh = opening.decide(st_, obs, ids=ids, new_id="msg_next0000000001")
    assert again_fresh.state.second_round == rnd
