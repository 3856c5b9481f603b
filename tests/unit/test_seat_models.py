"""The start's seat rule, one for both majors (core/validation.py: ``check_agents``,
``seat_models``, ``needs_default_model``, ``check_parent_session``; ``listed_models``, the same
rule as an eval report names the seats' models; docs/behaviour.md, 'Phases',
step 1): each seat and the observer runs on its agent's own model, else the directory's
default."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core.server_records import AgentRecord, SessionMarks
from roundtabled.core.state import BUILTIN_OBSERVER, OBSERVER_AGENT, ModelRef
from roundtabled.core.validation import (
    check_agents,
    check_parent_session,
    listed_models,
    needs_default_model,
    seat_models,
)
from roundtabled.errors import ValidationFailed

DEFAULT = ModelRef(providerID="scripted", modelID="orchestrator-1")
INSTALL = "`roundtabled install-tool --project DIR` (or --global)"
NAMES = ["pm", "dev", "rv", "qa"]
models = st.none() | st.sampled_from(
    [ModelRef(providerID="scripted", modelID=f"debater-{i}") for i in (1, 2, 3)]
)


def agent(name: str, model: ModelRef | None = None, *, hidden: bool = False) -> AgentRecord:
    return AgentRecord(name, "subagent", hidden, None, model, True, f"You are {name}.")


@given(
    own=st.fixed_dictionaries({n: models for n in NAMES}),
    observer_model=models,
    default=st.none() | st.just(DEFAULT),
    seats=st.sampled_from([NAMES[:2], NAMES[:3], NAMES]),
)
def test_each_seat_runs_its_agent_s_model_else_the_default(
    own: dict[str, ModelRef | None],
    observer_model: ModelRef | None,
    default: ModelRef | None,
    seats: list[str],
) -> None:
    available = [agent(n, m) for n, m in own.items()]
    available.append(agent(OBSERVER_AGENT, observer_model, hidden=True))
    check_agents(seats, None, available)
    wanted = {n: own[n] or default for n in seats} | {OBSERVER_AGENT: observer_model or default}
    needs = needs_default_model(seats, BUILTIN_OBSERVER, available)
    assert needs == (any(own[n] is None for n in seats) or observer_model is None)
    if None in wanted.values():
        with pytest.raises(ValidationFailed, match="has no model and the server has no default"):
            seat_models(seats, BUILTIN_OBSERVER, available, default, install=INSTALL)
        return
    assert seat_models(seats, BUILTIN_OBSERVER, available, default, install=INSTALL) == wanted
    if not needs:  # the default is never read: none of them falls back on it
        assert seat_models(seats, BUILTIN_OBSERVER, available, None, install=INSTALL) == wanted


def test_a_missing_built_in_observer_names_the_major_s_install_command() -> None:
    available = [agent("pm", DEFAULT), agent("dev", DEFAULT)]
    check_agents(["pm", "dev"], None, available)
    with pytest.raises(ValidationFailed) as caught:
        seat_models(["pm", "dev"], BUILTIN_OBSERVER, available, DEFAULT, install=INSTALL)
    assert caught.value.field == "observer"
    assert str(caught.value) == (
        f"Error: the built-in observer agent '{OBSERVER_AGENT}' is not installed for this "
        f"project; run {INSTALL}, or name an observer agent"
    )
    # a named observer agent needs no built-in one
    assert seat_models(["pm", "dev"], "dev", available, None, install=INSTALL) == {
        "pm": DEFAULT,
        "dev": DEFAULT,
    }


def test_a_hidden_agent_takes_no_seat_and_the_listing_names_the_others() -> None:
    available = [agent("pm"), agent("dev"), agent("compaction", hidden=True)]
    with pytest.raises(ValidationFailed, match=r"unknown agent 'compaction'\. Available agents: "):
        check_agents(["pm", "compaction"], None, available)
    with pytest.raises(ValidationFailed, match=r"Available agents: dev, pm$"):
        check_agents(["pm", "qa"], None, available)


@pytest.mark.parametrize(
    ("marks", "words"),
    [
        (SessionMarks(indexed=True), "is a roundtable's own session"),
        (SessionMarks(indexed=False, opening_of="ses_S2"), "roundtable ses_S2's independent"),
    ],
)
def test_a_roundtable_s_own_session_or_a_seat_s_cannot_convene_one(
    marks: SessionMarks, words: str
) -> None:
    with pytest.raises(ValidationFailed, match=words) as caught:
        check_parent_session("ses_S1", marks)
    assert caught.value.field == "parentSessionID"
    check_parent_session("ses_S1", SessionMarks(indexed=False))


@given(
    own=st.fixed_dictionaries({n: models for n in NAMES}),
    default=st.none() | st.just(DEFAULT),
    seats=st.lists(st.sampled_from([*NAMES, "ghost"]), max_size=5, unique=True),
)
def test_an_eval_report_names_the_seats_models_by_the_start_s_rule(
    own: dict[str, ModelRef | None], default: ModelRef | None, seats: list[str]
) -> None:
    """``listed_models`` (roundtabled/eval/server.py): each listed seat on its agent's model,
    else the default, in seat order, as ``seat_models`` seats it; a seat a start refuses (an
    agent not listed, or one without a model and no default) is left out, not refused."""
    available = [agent(n, m) for n, m in own.items()]
    got = listed_models(seats, available, default)
    assert list(got) == [n for n in seats if n in own and (own[n] or default) is not None]
    assert all(got[n] == (own[n] or default) for n in got)
    assert needs_default_model(seats, None, available) == any(
        own.get(n, DEFAULT) is None for n in seats
    )
    known = [n for n in seats if n in own]
    if known and all((own[n] or default) is not None for n in known):
        rule = seat_models(known, known[0], available, default, install=INSTALL)
        assert got == {n: rule[n] for n in known}
