"""Regression (adversarial review of the fast handoff): after a crash that lost the deferred state
write, a person's message in S2 is recorded once, after the turn it followed.

Failing input (pure machine): stored state pending = pm's turn; S2 holds pm's prompt and reply,
dev's prompt (sent by a fast handoff) and reply, then a person's message and the reply to it.
Catching up recorded the person's message as an extra of pm's turn and again after dev's.
Expected: one ``user`` entry, after dev's turn."""

from __future__ import annotations

from roundtabled.core import machine
from roundtabled.core.commands import Observation
from roundtabled.opencode import v1_wire
from tests.unit.test_machine_edges import S2, SIGNER, T0, S2Sim, state_with

DEV = "msg_turn00000000000002"  # after TURN_MSG
P = "msg_user00000000000009"


def test_a_person_s_message_after_an_adopted_prompt_is_recorded_once_after_it() -> None:
    state = state_with(["pm", "dev", "rv"], rounds=1, pending=(0, 0), timeout=600)
    sim = S2Sim().prompt("pm", 0, 0).answer("pm's view", mid="msg_turn00000000000001a")
    sim.prompt("dev", 0, 1, mid=DEV, created=T0 + 5)
    sim.answer("dev's view", parent=DEV, mid="msg_turn00000000000002a")
    sim.user("A person: please consider the cost!", mid=P)
    sim.answer("reply to the person", parent=P, mid="msg_user00000000000009a")
    # Step 1 (stored pending = pm): S2 from pm's prompt on.
    d1 = machine.decide(state, sim.observe(now=T0 + 10_000))
    assert d1.state.pending is not None and d1.state.pending.message_id == DEV  # adopted
    # Step 2: S2 from the adopted dev prompt on.
    raw2 = sim.raw[2:]
    obs2 = Observation(
        now=T0 + 11_000,
        status="idle",
        messages=tuple(v1_wire.message_view(m, S2, SIGNER) for m in raw2),
        pending_found=True,
        accepted=False,
        new_id="msg_next00000000000001",
    )
    d2 = machine.decide(d1.state, obs2)
    hist = [(e.kind, e.agent, e.response) for e in d2.state.history]
    persons = [h for h in hist if h[0] == "user"]
    assert len(persons) == 1, hist
    # and it belongs after dev's turn (it was written after dev's prompt)
    assert [h[1] for h in hist][:2] == ["pm", "dev"], hist
