"""The plugin mode's decisions in the pure machine (docs/plugin.md).

Property: whatever turns the plugin is reported for (any switch, any number of times), when a
seat's prompt goes out every earlier seat prompt but the opening one is out of its model
request: hidden by a PATCH when the turn runs in patch mode, or named for the plugin by the
prompt's marker (``view: "plugin"``) — and in plugin mode no PATCH is sent at all.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roundtabled import ids
from roundtabled.core import machine
from roundtabled.core.commands import Observation, Prompt
from roundtabled.core.positions import Position
from roundtabled.core.state import MODE_NOTES, HistoryEntry, Options, RoundtableState
from roundtabled.opencode import v1_wire
from tests.unit.test_machine_properties import S2, SIGNER, SimServer, new_state


def _observe(srv: SimServer, state: RoundtableState, plugin: str | None) -> Observation:
    pend = state.pending
    raw, found = srv.from_id(pend.message_id) if pend else ([], False)
    return Observation(
        now=srv.clock,
        status="idle",
        messages=tuple(v1_wire.message_view(m, S2, SIGNER) for m in raw),
        pending_found=found,
        new_id=ids.message_id(),
        accepted=True,
        plugin=plugin,
    )


def _hide(srv: SimServer, prompt: Prompt) -> None:
    """What the engine's PATCH does: mark the visible text parts of each message ignored."""
    wanted = {v.id for v in prompt.hide}
    for m in srv.messages:
        if m["info"]["id"] in wanted:
            for p in m["parts"]:
                if p.get("type") == "text":
                    p["ignored"] = True


def _marker(m: dict[str, Any]) -> dict[str, Any]:
    return dict(m["parts"][1]["metadata"]["roundtabled"])


def _run(state: RoundtableState, modes: list[bool]) -> tuple[SimServer, RoundtableState]:
    srv = SimServer()
    d = machine.decide(state, _observe(srv, state, "1" if modes[0] else None))
    turn = 0
    while True:
        prompts = [c for c in d.commands if isinstance(c, Prompt)]
        state = d.state
        if not prompts:
            return srv, state
        [p] = prompts
        plugin_now = p.marker.view == "plugin"
        assert plugin_now == modes[turn % len(modes)]
        if plugin_now:
            assert p.hide == ()
        _hide(srv, p)
        srv.add_prompt(p)
        if not plugin_now:  # every earlier seat prompt but the opening one is hidden in S2
            for m in srv.messages[:-1]:
                mk = _marker(m) if m["info"]["role"] == "user" else None
                if mk and mk["kind"] == "turn" and (mk["round"], mk["seat"]) != (0, 0):
                    assert all(part.get("ignored") for part in m["parts"]), mk
        srv.clock += 1000
        srv.answer()
        turn += 1
        plugin = "1" if modes[turn % len(modes)] else None
        d = machine.decide(state, _observe(srv, state, plugin))


@settings(max_examples=60, deadline=None)
@given(modes=st.lists(st.booleans(), min_size=1, max_size=12))
def test_earlier_prompts_leave_the_request_in_either_mode_across_any_switch(
    modes: list[bool],
) -> None:
    _, state = _run(new_state(["a", "b", "c"], 4), modes)
    assert state.view == ("plugin" if modes[12 % len(modes)] else "patch")  # the observer's
    notes = [n for n in state.notes if n in MODE_NOTES.values()]
    assert len(notes) == len(set(notes)) and notes  # each mode said once


def test_hides_prompt_is_decided_from_the_recorded_mode() -> None:
    base = new_state(["a", "b"], 2)
    srv = SimServer()
    d = machine.decide(base, _observe(srv, base, None))
    [p] = [c for c in d.commands if isinstance(c, Prompt)]
    srv.add_prompt(p)
    srv.answer()
    d = machine.decide(d.state, _observe(srv, d.state, None))  # round 1, seat b: patch mode
    assert machine.hides_prompt(d.state)
    assert not machine.hides_prompt(d.state.model_copy(update={"view": "plugin"}))


def _entry(agent: str, rnd: int, label: str) -> HistoryEntry:
    return HistoryEntry(
        round=rnd,
        agent=agent,
        response=f"{agent} says {label}",
        position=Position(label=label, position="s", confidence=0.7),
    )


def test_recent_context_names_the_hidden_rounds_and_writes_the_digest() -> None:
    history = [_entry(a, r, f"L{r}") for r in range(1, 5) for a in ("a", "b")]
    state = new_state(["a", "b"], 6).model_copy(
        update={
            "history": history,
            "current_round": 4,
            "options": Options(context="recent"),
        }
    )
    d = machine.plan_turn(
        state, Observation(now=1, status="idle", new_id="msg_x", plugin="1"), opening=False
    )
    [p] = [c for c in d.commands if isinstance(c, Prompt)]
    assert p.marker.view == "plugin" and p.marker.hide == (1, 2)  # rounds 2–3 of 5
    assert "[Digest of round(s) 2–3" in p.text and "L2" in p.text
    # Without the plugin's report: patch mode, no span, no digest.
    d = machine.plan_turn(state, Observation(now=1, status="idle", new_id="msg_y"), opening=False)
    [p] = [c for c in d.commands if isinstance(c, Prompt)]
    assert p.marker.view is None and p.marker.hide is None and "[Digest" not in p.text
