"""An observer whose model request failed was listed twice in the roundtable's errors (and so
twice under ``status`` and in the result's "what went wrong"): once by the machine as every
failed turn is, ``roundtable-observer (round 2): ProviderAuthError: down``, and once more by
the verdict step, ``observer roundtable-observer: ProviderAuthError: down``. Now a failed turn
is listed once; an observer that replied nothing (not a failed request) is still listed, once."""

from __future__ import annotations

from roundtabled.core import machine
from roundtabled.core.state import EndReason
from tests.unit.test_machine_edges import S2Sim, state_with

DOWN = "ProviderAuthError: down"


def test_an_observer_whose_request_failed_is_listed_once() -> None:
    state = state_with(["pm", "dev"], rounds=2, pending=(1, 0), observing=True)
    sim = S2Sim().prompt("roundtable-observer", 1, -1).answer("", agent="obs", error=DOWN)
    d = machine.decide(state, sim.observe())
    assert d.state.end_reason == EndReason.OBSERVER_FAILED
    listed = [e for e in d.state.errors if "down" in e]
    assert len(listed) == 1 and listed[0].startswith(f"roundtable-observer (round 2): {DOWN}")


def test_an_observer_that_replied_nothing_is_listed_once() -> None:
    state = state_with(["pm", "dev"], rounds=2, pending=(1, 0), observing=True)
    sim = S2Sim().prompt("roundtable-observer", 1, -1).answer("", agent="obs")
    d = machine.decide(state, sim.observe())
    assert d.state.end_reason == EndReason.OBSERVER_FAILED
    assert len(d.state.errors) == 1 and "roundtable-observer" in d.state.errors[0]
