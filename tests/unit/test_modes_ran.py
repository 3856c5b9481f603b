"""``history.with_modes_ran``: after a restart the result says the modes S2's prompts ran in."""

from __future__ import annotations

from roundtabled.core import history
from roundtabled.core.messages import UserView
from roundtabled.core.state import MODE_NOTES, Marker
from tests.states import fresh

S2 = "ses_modes"


def _prompt(i: int, view: str | None) -> UserView:
    marker = Marker(kind="turn", round=0, seat=i, agent="pm", roundtable=S2, view=view)
    return UserView(id=f"msg_{i}", created=i, marker=marker, text="prompt")


def test_the_modes_s2_ran_in_are_said_in_order_and_a_mode_no_prompt_ran_in_is_not() -> None:
    views = [_prompt(0, "plugin"), _prompt(1, "plugin"), _prompt(2, None)]
    behind = fresh(S2, ["pm", "dev", "rv"], 1, notes=["n1"])  # the stored state, behind S2
    assert history.with_modes_ran(behind, views).notes == [
        "n1",
        MODE_NOTES["plugin"],
        MODE_NOTES["patch"],
    ]
    # Turn 1 planned with the plugin and never sent (killed at once), then run without it.
    planned = fresh(S2, ["pm"], 1, notes=[MODE_NOTES["plugin"], "n1"])
    assert history.with_modes_ran(planned, [_prompt(0, None)]).notes == [
        "n1",
        MODE_NOTES["patch"],
    ]
    said = fresh(S2, ["pm"], 1, notes=[MODE_NOTES["plugin"]])
    assert history.with_modes_ran(said, [_prompt(0, "plugin")]) is said
    # A person's message carries no marker: it says nothing of the mode.
    person = UserView(id="msg_p", created=9, marker=None, text="a note")
    assert history.with_modes_ran(fresh(S2, ["pm"], 1), [person]).notes == []
