"""The state card on the real server: the machine state in a part's ``metadata`` survives the
server's storage byte for byte through ``POST …/message`` (noReply), ``GET`` and ``PATCH`` of the
part, also for a finished roundtable's large history, so its MAC still verifies."""

from __future__ import annotations

from roundtabled import ids
from roundtabled.card import state_card
from roundtabled.state import (
    EndReason,
    HistoryEntry,
    ModelRef,
    Phase,
    RoundtableState,
    decode_state,
    encode_state,
)

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
