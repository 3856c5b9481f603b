"""The state card on the real server: the machine state in a part's ``metadata`` survives the
server's storage byte for byte through ``POST …/message`` (noReply), ``GET`` and ``PATCH`` of the
part, also for a finished roundtable's large history, so its MAC still verifies."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlparse

from roundtabled import ids
from roundtabled.core.card import CARD_FOOTER, CARD_HEADER, state_card
from roundtabled.core.state import (
    META_HEADER,
    OBSERVER_AGENT,
    EndReason,
    HistoryEntry,
    ModelRef,
    Phase,
    RoundtableState,
    decode_state,
    encode_state,
)
from roundtabled.offline.scripted_actions import Text

from .conftest import RT


def _finished(s2: str, n: int) -> RoundtableState:
    text = "Ünïcode “quotes” — and numbers 300.0, 1e-7, 0.85, -0.0 ✓ " * 70  # ~4 KB each
    return RoundtableState.model_validate(
        {
            "sessionID": s2,
            "title": "(Roundtable) - card",
            "agents": ["pm", "dev"],
            "models": {"pm": ModelRef(providerID="scripted", modelID="debater-1")},
            "total_rounds": n,
            "prompt": "Keep the card?",
            "phase": Phase.DONE,
            "end_reason": EndReason.COMPLETED,
            "history": [
                HistoryEntry(agent=a, round=r, seat=i, response=text[:4000])
                for r in range(1, n + 1)
                for i, a in enumerate(["pm", "dev"])
            ],
        }
    )


async def test_state_in_part_metadata_round_trips_through_post_get_and_patch(rt: RT) -> None:
    signer = rt.daemon.engine.signer
    s = await rt.oc("POST", "/session", {"title": "card"}, params={"directory": rt.directory})
    s2 = str(s["id"])
    first = _finished(s2, 1)
    text, meta = encode_state(first, signer, card=state_card(first))
    msg_id, part_id = ids.message_id(), ids.part_id()
    await rt.oc(
        "POST",
        f"/session/{s2}/message",
        {
            "noReply": True,
            "messageID": msg_id,
            "parts": [
                {"id": part_id, "type": "text", "text": text, "ignored": True, "metadata": meta}
            ],
        },
    )
    got = await rt.oc("GET", f"/session/{s2}/message/{msg_id}")
    (part,) = got["parts"]
    assert part["text"] == text and part["ignored"] is True
    assert decode_state(part["text"], part["metadata"], s2, signer) == first

    # the final write: 10 rounds × 2 seats × 4 KB of history, in place
    final = _finished(s2, 10)
    text2, meta2 = encode_state(final, signer, card=state_card(final))
    assert len(meta2["roundtabled"]["body"]) > 80_000
    await rt.oc(
        "PATCH",
        f"/session/{s2}/message/{msg_id}/part/{part_id}",
        {
            "id": part_id,
            "sessionID": s2,
            "messageID": msg_id,
            "type": "text",
            "text": text2,
            "ignored": True,
            "metadata": meta2,
        },
    )
    msgs = await rt.messages(s2)
    assert len(msgs) == 1 and len(msgs[0]["parts"]) == 1
    part = msgs[0]["parts"][0]
    assert part["text"] == text2 and len(text2.splitlines()) <= 8
    assert decode_state(part["text"], part["metadata"], s2, signer) == final


async def _state_part(rt: RT, s2: str) -> tuple[str, dict[str, Any]]:
    session = await rt.session(s2)
    index = session["metadata"]["roundtabled"]
    msg = await rt.oc("GET", f"/session/{s2}/message/{index['stateMessageID']}")
    (part,) = [p for p in msg["parts"] if p["id"] == index["statePartID"]]
    return str(msg["info"]["id"]), part


async def test_turn_one_s_prompt_carries_the_state_card_and_a_restart_resumes_from_it(
    rt: RT,
) -> None:
    """A start writes S2 once before turn 1: its prompt, whose message carries the state card
    as its first, ignored part (docs/design.md, "State format"). While turn 1 runs S2 holds
    that one user message, the index names it, and a daemon restarted then resumes from it:
    turn 1 is not sent again, the debate concludes and the card is written in place."""
    rt.llm.script(Text(text="PM across the restart.", first_byte_delay=4.0), agent="pm")
    rt.llm.script(Text(text="DEV after the restart."), agent="dev")
    rt.llm.script(Text(text="SUMMARY: one write."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="One write before turn 1", rounds=1)
    await rt.llm.wait_for_requests(1, 30, session=s2, agent="pm")
    msgs = await rt.messages(s2)
    users = [m for m in msgs if m["info"]["role"] == "user"]
    assert len(users) == 1 and msgs[0]["info"]["id"] == users[0]["info"]["id"], msgs
    msg_id, part = await _state_part(rt, s2)
    assert msg_id == users[0]["info"]["id"] and users[0]["parts"][0]["id"] == part["id"]
    assert part["ignored"] is True and part["text"].startswith(CARD_HEADER)
    assert [p["text"] for p in users[0]["parts"][1:] if p.get("ignored")] == ["── pm · round 1 ──"]
    signer = rt.daemon.engine.signer
    state = decode_state(part["text"], part["metadata"], s2, signer)
    assert state.pending is not None and state.pending.message_id == msg_id

    rt.daemon.request_stop()
    await asyncio.wait_for(rt.task, 15)
    await rt._launch(control_port=urlparse(rt.control).port)
    result = await rt.result(s2)
    assert "SUMMARY: one write." in result["summary"]
    await rt.finalized(s2)
    assert [r.agent for r in rt.llm.requests_for(session=s2, kind="turn")][:2] == ["pm", "dev"]
    msgs = await rt.messages(s2)
    assert sum(1 for m in msgs if m["info"]["id"] == msg_id) == 1
    _, part = await _state_part(rt, s2)
    assert decode_state(part["text"], part["metadata"], s2, signer).phase == Phase.DONE


async def test_a_roundtable_holding_the_seed_text_form_resumes_extends_and_gets_the_card(
    rt: RT,
) -> None:
    """Roundtables written before the card hold the text form: a daemon with the card reads
    it, resumes the debate, extends it, and writes the card from then on."""
    rt.llm.script(Text(text="PM before the upgrade."), agent="pm")
    rt.llm.script(Text(text="DEV across the upgrade.", first_byte_delay=4.0), agent="dev")
    rt.llm.script(Text(text="SUMMARY: resumed."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Old block", rounds=1)
    await rt.llm.wait_for_requests(1, 30, agent="dev")
    rt.daemon.request_stop()
    await asyncio.wait_for(rt.task, 15)
    signer = rt.daemon.engine.signer

    # Rewrite the block as an older daemon wrote it: the META text, no body in the metadata.
    msg_id, part = await _state_part(rt, s2)
    assert part["text"].startswith(CARD_HEADER) and CARD_FOOTER in part["text"]
    state = decode_state(part["text"], part["metadata"], s2, signer)
    text, meta = encode_state(state, signer)
    assert META_HEADER in text and "body" not in meta["roundtabled"]
    await rt.oc(
        "PATCH",
        f"/session/{s2}/message/{msg_id}/part/{part['id']}",
        {**part, "text": text, "metadata": meta},
    )

    await rt._launch(control_port=urlparse(rt.control).port)
    result = await rt.result(s2)
    assert "SUMMARY: resumed." in result["summary"]
    await rt.finalized(s2)
    _, part = await _state_part(rt, s2)
    assert part["text"].startswith(CARD_HEADER) and META_HEADER not in part["text"]
    assert decode_state(part["text"], part["metadata"], s2, signer).phase == Phase.DONE

    rt.llm.script(Text(text="PM extended."), agent="pm")
    rt.llm.script(Text(text="DEV extended."), agent="dev")
    rt.llm.script(Text(text="SUMMARY: extended."), agent=OBSERVER_AGENT)
    status, data = await rt.api(
        "POST", "/v1/roundtables", {"sessionID": s2, "prompt": "Continue: costs", "rounds": 1}
    )
    assert status == 200, data
    assert "SUMMARY: extended." in (await rt.result(s2))["summary"]
    _, part = await _state_part(rt, s2)
    assert "Rounds: 2, 1 extension(s)" in part["text"]


async def test_no_model_request_carries_the_state_card_or_its_body(rt: RT) -> None:
    """Bench figure 3's 'state 0 B' with the card: the state part is ignored, so neither the
    card nor the signed body reaches a model (every request of a 2 × 2 debate checked)."""
    for r in (1, 2):
        for a in ("pm", "dev"):
            rt.llm.script(Text(text=f"{a} round {r}."), agent=a)
    rt.llm.script(Text(text="SUMMARY."), agent=OBSERVER_AGENT)
    s2 = await rt.start(agents=["pm", "dev"], prompt="Zero state bytes", rounds=2)
    await rt.result(s2)
    reqs = rt.llm.requests_for(session=s2)
    assert len(reqs) == 5
    for req in reqs:
        whole = json.dumps(req.messages, ensure_ascii=False)
        assert CARD_FOOTER not in whole and CARD_HEADER + " ·" not in whole
        assert "currentAgentIndex" not in whole and META_HEADER not in whole
