"""Which of a roundtable's states in S2 a restarted daemon resumes on OpenCode 2.x
(core/lifecycle.py ``newest_state``), property-tested: the state a prompt carries wins exactly
when the metadata's state does not know that prompt and the prompt is the newest such one that
names itself as its pending turn; a write made after a prompt (a cancel, the observer's) wins
over the prompt's own block."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core import lifecycle
from roundtabled.core.server_records import PromptRecord, SessionRef, SignedState
from roundtabled.core.state import (
    HistoryEntry,
    PendingTurn,
    Phase,
    RoundtableState,
    Signer,
    encode_state,
)
from roundtabled.engine import v2_features

S2 = "ses_neweststate0000000001"


def pid(i: int) -> str:
    return f"msg_{i:04d}"


def state(recorded: int, pending: int | None, *, notes: tuple[str, ...] = ()) -> RoundtableState:
    """A state whose history holds the turns of prompts 1..``recorded`` and whose pending turn
    is prompt ``pending`` (``None``: none)."""
    return RoundtableState.model_validate(
        {
            "session_id": S2,
            "title": "Q",
            "agents": ["pm", "dev"],
            "total_rounds": 9,
            "prompt": "Q?",
            "phase": Phase.ACTIVE,
            "history": [
                HistoryEntry(agent="pm", round=1, response=f"r{i}", message_id=pid(i))
                for i in range(1, recorded + 1)
            ],
            "pending": (
                PendingTurn(kind="turn", round=0, seat=0, agent="pm", message_id=pid(pending))
                if pending is not None
                else None
            ),
            "notes": list(notes),
        }
    )


@given(stored_at=st.integers(1, 8), sent=st.integers(1, 8), cancelled=st.booleans())
def test_the_newest_prompt_the_metadata_does_not_know_wins(
    stored_at: int, sent: int, cancelled: bool
) -> None:
    """Prompts 1..``sent`` went out, prompt k carrying the state with k pending (prompt 1's
    block went to the metadata, as every turn 1's); the metadata's state was last written with
    prompt ``stored_at`` pending (a cancel writes it again with the same pending turn)."""
    stored_at = min(stored_at, sent)
    stored = state(stored_at - 1, stored_at, notes=("cancelled",) if cancelled else ())
    carried = [(pid(k), state(k - 1, k)) for k in range(2, sent + 1)]
    got = lifecycle.newest_state(stored, carried)
    if sent > stored_at:
        assert got == carried[-1][1]
    else:
        assert got is stored  # it knows every prompt: the cancel (or the same state) stays


@given(sent=st.integers(2, 8))
def test_a_block_whose_pending_turn_is_another_prompt_is_not_taken(sent: int) -> None:
    """A prompt that carries a state naming another prompt as pending (copied there by hand)
    is no state of that prompt."""
    stored = state(0, 1)
    carried = [(pid(k), state(k - 1, k + 1)) for k in range(2, sent + 1)]
    assert lifecycle.newest_state(stored, carried) is stored


def test_a_finished_state_knows_its_prompts() -> None:
    """The observer's write (no pending turn) knows every recorded prompt."""
    stored = state(5, None)
    carried = [(pid(k), state(k - 1, k)) for k in range(2, 6)]
    assert lifecycle.newest_state(stored, carried) is stored


def test_no_carried_block_keeps_the_metadata_s() -> None:
    stored = state(0, 1)
    assert lifecycle.newest_state(stored, []) is stored


def test_a_carried_state_cuts_the_replies_and_a_restart_takes_them_back_from_s2() -> None:
    """A seat prompt's block keeps each answer's first CARRIED_RESPONSE_MAX characters (a
    person's note whole); the full texts come back from S2's replies by the entries' prompt ids
    (engine.v2_features.with_replies), a reply that does not begin as the cut one is not taken."""
    from roundtabled.core.server_records import PromptRecord
    from roundtabled.core.state import CARRIED_RESPONSE_MAX, carried_form
    from roundtabled.engine.v2_features import with_replies

    long = "because " * 100
    full = state(2, 3).model_copy(
        update={
            "history": [
                HistoryEntry(agent="pm", round=1, response="A " + long, message_id=pid(1)),
                HistoryEntry(agent="dev", round=1, response="B " + long, message_id=pid(2)),
                HistoryEntry(
                    agent="user", round=1, response="note " + long, kind="user", message_id="p"
                ),
            ]
        }
    )
    cut = carried_form(full)
    assert [len(e.response) for e in cut.history[:2]] == [CARRIED_RESPONSE_MAX] * 2
    assert cut.history[2].response == full.history[2].response
    prompts = [
        PromptRecord(id=pid(1), key=None, text="A " + long),
        PromptRecord(id=pid(2), key=None, text="another reply " + long),
    ]
    back = with_replies(cut, prompts)
    assert back.history[0].response == full.history[0].response
    assert back.history[1].response == cut.history[1].response
    assert back.history[2].response == full.history[2].response


class _Port:
    """What ``v2_features.stored_state`` reads of a 2.x port: S2's metadata state and its
    prompts (counted)."""

    def __init__(self, stored: RoundtableState, signer: Signer, prompts: list[PromptRecord]):
        self.block = SignedState(*encode_state(stored, signer))
        self.records = prompts
        self.prompt_reads = 0

    async def read_state(self, session: SessionRef) -> tuple[SignedState, ...]:
        return (self.block,)

    async def prompts(self, session: SessionRef) -> list[PromptRecord]:
        self.prompt_reads += 1
        return self.records


async def test_a_running_roundtable_s_stored_state_reads_its_prompts_once() -> None:
    signer = Signer(b"k" * 32)
    carried = state(1, 2)
    port = _Port(
        state(0, 1),
        signer,
        [
            PromptRecord(pid(1), None, text="r1, the reply in full"),
            PromptRecord(pid(2), None, state=SignedState(*encode_state(carried, signer))),
        ],
    )
    got = await v2_features.stored_state(port, signer, SessionRef(S2, None))  # type: ignore[arg-type]
    assert port.prompt_reads == 1
    assert got is not None and got.pending is not None and got.pending.message_id == pid(2)
    assert [e.response for e in got.history] == ["r1, the reply in full"]
