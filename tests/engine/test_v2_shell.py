"""The 2.x shell's translations between the core and the server port (roundtabled/engine/v2run.py),
without a server: the machine's decisions from port outcomes, and prompt ids from turn keys."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roundtabled.core import lifecycle, machine
from roundtabled.core.commands import Abort, Cancel, Prompt
from roundtabled.core.server_records import (
    Interjection,
    TurnKey,
    TurnOutcome,
    TurnStatus,
    stable_digest,
)
from roundtabled.core.state import (
    META_KEY,
    RESUMED_NOTE,
    Delivery,
    Marker,
    ModelRef,
    Phase,
    RoundtableState,
    Signer,
    read_marker,
)
from roundtabled.core.validation import parse_request
from roundtabled.engine import v2_opening
from roundtabled.engine.v2_delivery import take
from roundtabled.engine.v2run import keyed, observation_of, refusal
from roundtabled.opencode.port import v2_prompt_id
from tests.states import fresh

NOW = 1_800_000_000_000
MODEL = ModelRef(providerID="scripted", modelID="debater-1")


def started() -> RoundtableState:
    """A 2-seat, 1-round roundtable whose first turn the shell has just planned."""
    state = fresh(
        "ses_v2shell",
        ["pm", "dev"],
        1,
        models={"pm": MODEL, "dev": MODEL, "roundtable-observer": MODEL},
    )
    d = keyed(machine.decide(state, observation_of(state, None, NOW, accepted=False)))
    return d.state


def test_a_prompt_is_named_by_its_turn_key_in_the_command_and_the_state() -> None:
    state = fresh(
        "ses_v2shell",
        ["pm", "dev"],
        1,
        models={"pm": MODEL, "dev": MODEL, "roundtable-observer": MODEL},
    )
    d = keyed(machine.decide(state, observation_of(state, None, NOW, accepted=False)))
    (prompt,) = [c for c in d.commands if isinstance(c, Prompt)]
    want = v2_prompt_id(TurnKey("ses_v2shell", 0, 0, 0))
    assert prompt.message_id == want
    assert d.state.pending is not None and d.state.pending.message_id == want
    assert prompt.agent == "pm"


@pytest.mark.parametrize("status", [TurnStatus.QUEUED, TurnStatus.RUNNING])
def test_a_turn_not_over_is_waited_for(status: TurnStatus) -> None:
    state = started()
    obs = observation_of(state, TurnOutcome(status), NOW + 1000, accepted=True)
    assert obs.status == "busy" and obs.pending_found
    d = machine.decide(state, obs)
    assert d.commands == [] and d.state.pending == state.pending


def test_an_answered_turn_hands_off_to_the_next_seat_and_hides_nothing_of_the_opening() -> None:
    state = started()
    out = TurnOutcome(TurnStatus.ANSWERED, text="pm says", agent="pm", tokens_in=10, tokens_out=2)
    d = keyed(machine.decide(state, observation_of(state, out, NOW + 1000, accepted=True)))
    (prompt,) = [c for c in d.commands if isinstance(c, Prompt)]
    assert prompt.agent == "dev"
    assert prompt.message_id == v2_prompt_id(TurnKey("ses_v2shell", 0, 1, 0))
    entry = d.state.history[-1]
    assert entry.agent == "pm" and entry.response == "pm says" and not entry.has_error
    assert d.state.unhidden == []  # the opening prompt carries the topic: never hidden


def test_a_failed_turn_is_recorded_with_the_server_s_words() -> None:
    state = started()
    out = TurnOutcome(TurnStatus.FAILED, error='unknown: Agent not found: "pm"')
    d = machine.decide(state, observation_of(state, out, NOW + 1000, accepted=True))
    entry = d.state.history[-1]
    assert entry.has_error and entry.error is not None
    assert 'Agent not found: "pm"' in entry.error


def test_tokens_the_server_did_not_report_stay_unknown() -> None:
    state = started()
    out = TurnOutcome(TurnStatus.ANSWERED, text="pm says", agent="pm")
    d = machine.decide(state, observation_of(state, out, NOW + 1000, accepted=True))
    assert d.state.history[-1].usage_unreported


def test_an_interrupted_turn_after_a_cancel_is_cut_off_and_nothing_more_is_prompted() -> None:
    state = started()
    running = observation_of(state, TurnOutcome(TurnStatus.RUNNING), NOW + 500, accepted=True)
    d = machine.decide(state, replace(running, cancel=Cancel()))
    assert any(isinstance(c, Abort) for c in d.commands)
    out = TurnOutcome(TurnStatus.INTERRUPTED, text="pm sa", agent="pm")
    d2 = machine.decide(d.state, observation_of(d.state, out, NOW + 60_000, accepted=True))
    assert not any(isinstance(c, Prompt) for c in d2.commands)
    assert d2.state.history[-1].error == "cut off by the cancel"
    assert d2.state.end_reason is not None and d2.state.end_reason.value == "cancelled"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"parentSessionID": None}, "parentSessionID"),
    ],
)
def test_what_2x_cannot_run_yet_is_refused_in_one_line_naming_the_field(
    body: dict[str, object], field: str
) -> None:
    base: dict[str, object] = {
        "agents": ["pm", "dev"],
        "prompt": "q",
        "parentSessionID": "ses_parent01",
    }
    req = parse_request({**base, **body})
    refused = refusal(req)
    assert refused is not None and refused.field == field
    (line,) = str(refused).splitlines()
    assert line.startswith(f"Error: {field}:") and "OpenCode 2.x" in line


def test_a_plain_start_is_not_refused() -> None:
    req = parse_request({"agents": ["pm", "dev"], "prompt": "q", "parentSessionID": "ses_parent01"})
    assert refusal(req) is None
    recent = parse_request(
        {
            "agents": ["pm", "dev"],
            "prompt": "q",
            "parentSessionID": "ses_parent01",
            "context": "recent",
        }
    )
    assert refusal(recent) is None  # runs on 2.x (the plugin is checked at the start)
    independent = parse_request(
        {
            "agents": ["pm", "dev"],
            "prompt": "q",
            "parentSessionID": "ses_parent01",
            "opening": "independent",
        }
    )
    assert refusal(independent) is None


@pytest.mark.parametrize("protocol", ["debate", "vote", "adaptive", "council"])
def test_every_protocol_runs_on_2x(protocol: str) -> None:
    req = parse_request(
        {
            "agents": ["pm", "dev", "rv"],
            "prompt": "q",
            "parentSessionID": "ses_parent01",
            "protocol": protocol,
        }
    )
    assert refusal(req) is None


def test_a_second_independent_round_has_ids_of_its_own_and_the_opening_keeps_its_ids() -> None:
    """2.x answers a prompt sent with a used id with the first admission (docs/opencode-server.md,
    the 2.x table), and a record found by its id counts as written: council's ranking round must
    not reuse one id of the opening's, and the opening's ids stay what a roundtable started
    earlier wrote."""
    opening_ids = v2_opening.opening_ids("ses_v2shell", 3)
    ranking_ids = v2_opening.opening_ids("ses_v2shell", 3, 1)
    assert len(set(opening_ids)) == len(set(ranking_ids)) == 7
    assert not set(opening_ids) & set(ranking_ids)
    assert opening_ids[0] == v2_prompt_id(TurnKey("ses_v2shell", 0, 0))
    assert ranking_ids[2] == v2_prompt_id(TurnKey("ses_v2shell", 1, 1))
    assert opening_ids[1] == "msg_" + stable_digest("opening-record", "ses_v2shell", 0)
    assert opening_ids[6] == "msg_" + stable_digest("opening-topic", "ses_v2shell")


def test_a_note_answered_in_the_turn_s_execution_is_the_person_s_not_the_seat_s() -> None:
    """A person's note steered into pm's execution (2.x answers it there, as pm): pm's turn is
    recorded once with its own answer, then the note and its reply; dev is prompted next."""
    state = started()
    note = Interjection(
        prompt_id="msg_note",
        text="mind the audit",
        created=NOW + 500,
        reply="noted",
        agent="pm",
        tokens_in=50,
        tokens_out=3,
        finish="stop",
        completed=True,
    )
    out = TurnOutcome(TurnStatus.ANSWERED, text="pm says", agent="pm", interjections=(note,))
    d = keyed(machine.decide(state, observation_of(state, out, NOW + 1000, accepted=True)))
    (prompt,) = [c for c in d.commands if isinstance(c, Prompt)]
    assert prompt.agent == "dev"
    assert [(e.kind, e.agent, e.response) for e in d.state.history] == [
        ("turn", "pm", "pm says"),
        ("user", "user", "mind the audit"),
        ("interjection", "pm", "noted"),
    ]
    assert "mind the audit" in prompt.text  # dev is told what the person said


def test_the_waiting_tool_call_takes_the_result_with_its_mark_and_no_one_else() -> None:
    signer = Signer(b"k" * 32)
    state = fresh(
        "ses_v2take",
        ["pm", "dev"],
        1,
        parent_session_id="ses_parent",
        delivery=Delivery(toolCallID="call_1", toolMessageID="msg_1"),
    )
    result = {"done": True, "output": "the result"}
    assert take(state, result, None, signer) == (result, False)
    assert take(state, result, "call_other", signer) == (result, False)
    got, took = take(state, result, "call_1", signer)
    assert took and got["output"] == "the result"
    assert read_marker({META_KEY: got["deliveryMark"]}, "ses_parent", signer) == Marker(
        kind="result", roundtable="ses_v2take"
    )
    chosen = state.model_copy(
        update={"delivery": state.delivery.model_copy(update={"no_reply_message_id": "msg_x"})}
    )
    told, took = take(chosen, result, "call_1", signer)
    assert not took and told["postedAsMessage"] and "ses_v2take" not in told["output"]


def test_a_resumed_roundtable_says_where_once() -> None:
    state = started()
    once = lifecycle.resumed(state)
    assert once.notes[-1] == f"{RESUMED_NOTE} at round 1, pm's turn (no turn was sent twice)"
    assert lifecycle.resumed(once).notes == once.notes
    done = state.model_copy(update={"phase": Phase.DONE})
    ended = f"{RESUMED_NOTE} after the debate had ended (no turn was sent twice)"
    assert lifecycle.resumed(done).notes[-1] == ended


def test_a_note_whose_own_execution_runs_on_is_waited_for_before_the_next_turn() -> None:
    """A person's note posted right after pm's turn ended runs an execution of its own: no
    prompt goes into S2 while it runs; once it ended, the note and its reply are recorded and
    dev is prompted."""
    state = started()
    running = Interjection(prompt_id="msg_note", text="one more thing", created=NOW + 900)
    out = TurnOutcome(TurnStatus.ANSWERED, text="pm says", agent="pm", interjections=(running,))
    d = machine.decide(state, observation_of(state, out, NOW + 1000, accepted=True))
    assert not [c for c in d.commands if isinstance(c, Prompt)]
    assert d.state.history == [] and d.state.pending == state.pending
    ended = replace(running, reply="sure", agent="pm", completed=True, finish="stop")
    out = replace(out, interjections=(ended,))
    d = keyed(machine.decide(state, observation_of(state, out, NOW + 2000, accepted=True)))
    (prompt,) = [c for c in d.commands if isinstance(c, Prompt)]
    assert prompt.agent == "dev"
    assert [(e.kind, e.response) for e in d.state.history] == [
        ("turn", "pm says"),
        ("user", "one more thing"),
        ("interjection", "sure"),
    ]
