"""Reading S2 where turn 1's prompt message is the state block too (docs/design.md, "State
format"): the views see a turn prompt that carries the block, the history rebuilt after a
restart counts it as turn 1, and the layout before (the block a message of its own) reads as
it did."""

from __future__ import annotations

from typing import Any

from roundtabled import ids
from roundtabled.core import history, messages
from roundtabled.core.card import state_card
from roundtabled.core.state import Marker, Signer, encode_state
from roundtabled.opencode import v1_wire
from roundtabled.opencode.v1_wire import is_state_part
from tests.states import fresh, raw_prompt, raw_reply

S2 = "ses_turnonecarries0001"
SIGNER = Signer(b"unit-tests-turn-one-carries-key-")
PM = Marker(kind="turn", round=0, seat=0, agent="pm", roundtable=S2)
DEV = Marker(kind="turn", round=0, seat=1, agent="dev", roundtable=S2)


def _block(part_id: str) -> dict[str, Any]:
    state = fresh(S2, ["pm", "dev"], 1)
    text, meta = encode_state(state, SIGNER, card=state_card(state))
    return v1_wire.block_part(part_id, text, meta)


def _debate(*, combined: bool) -> list[dict[str, Any]]:
    """pm's and dev's answered turns of round 1, with the state block inside pm's prompt
    (``combined``) or as a message of its own before it (the layout before)."""
    block = _block(ids.part_id())
    pm_id, dev_id = ids.message_id(), ids.message_id()
    pm = raw_prompt(pm_id, "pm, argue.", PM, S2, SIGNER, created=2)
    msgs: list[dict[str, Any]] = []
    if combined:
        pm["parts"].insert(0, block)
    else:
        msgs.append({"info": {"id": ids.message_id(), "role": "user"}, "parts": [block]})
    return [
        *msgs,
        pm,
        raw_reply(pm_id, "PM: ship it.", at=3),
        raw_prompt(dev_id, "dev, argue.", DEV, S2, SIGNER, created=4),
        raw_reply(dev_id, "DEV: not yet.", at=5),
    ]


def test_a_prompt_carrying_the_state_block_is_a_turn_prompt_and_the_state_block() -> None:
    pm = v1_wire.message_views(_debate(combined=True), S2, SIGNER)[0]
    assert isinstance(pm, messages.UserView)
    assert pm.marker == PM and pm.state_block
    # What the patch mode would hide of it: the prompt's text only, never the block.
    assert [p.text for p in pm.visible_parts] == ["pm, argue."]


def test_the_history_rebuilt_after_a_restart_counts_turn_one_in_either_layout() -> None:
    state = fresh(S2, ["pm", "dev"], 1)
    for combined in (True, False):
        views = v1_wire.message_views(_debate(combined=combined), S2, SIGNER)
        rebuilt = history.rebuild_history(state, views)
        assert [(e.agent, e.round, e.response) for e in rebuilt] == [
            ("pm", 1, "PM: ship it."),
            ("dev", 1, "DEV: not yet."),
        ], combined


def test_turn_one_s_prompt_body_carries_the_block_first() -> None:
    block = _block(ids.part_id())
    body = v1_wire.prompt_body("msg_x", "pm", "argue", "── pm ──", {"roundtabled": {}}, None)
    carried = v1_wire.prompt_body(
        "msg_x", "pm", "argue", "── pm ──", {"roundtabled": {}}, None, block=block
    )
    assert carried["parts"] == [block, *body["parts"]]
    assert is_state_part(carried["parts"][0]) and carried["parts"][0]["ignored"] is True
