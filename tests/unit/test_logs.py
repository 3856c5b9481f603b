"""Logging of the daemon: human-readable text by default, one JSON object per line
with ``--log-format json``; every line logged about a roundtable (through its table's logger, the
engine's ``_TableAdapter``) carries ``session_id``, ``round`` and ``agent`` — as fields in JSON and
as a ``[ses_… rN agent]`` prefix in text; a configured secret never reaches the output.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from roundtabled.core.state import HistoryEntry, PendingTurn, RoundtableState
from roundtabled.engine.table import Table
from roundtabled.service.logs import setup_logging

SECRET = "hunter2-very-secret"


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)


def _table(*, pending_agent: str | None = "dev", current_round: int = 1) -> Table:
    state = RoundtableState(
        sessionID="ses_abc123",
        title="(Roundtable) - test",
        agents=["pm", "dev"],
        total_rounds=3,
        prompt="topic",
        current_round=current_round,
    )
    if pending_agent:
        state = state.model_copy(
            update={
                "pending": PendingTurn(
                    kind="turn", round=current_round, seat=1, agent=pending_agent, messageID="msg_1"
                )
            }
        )
    return Table(state=state)


def _lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def test_json_lines_carry_session_round_and_agent(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("json", "info")
    table = _table()
    table.log.info("dev answered: %d chars", 42)
    table.log.warning("turn cut off")
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 2
    for line in lines:
        rec = json.loads(line)  # every line is one JSON object
        assert rec["session_id"] == "ses_abc123"
        assert rec["round"] == 2  # 1-based for people
        assert rec["agent"] == "dev"
        assert rec["logger"] == "roundtabled.engine"
        assert {"time", "level", "message"} <= set(rec)
    assert json.loads(lines[0])["message"].endswith("dev answered: 42 chars")
    assert json.loads(lines[1])["level"] == "warning"


def test_json_line_without_a_turn_in_flight_has_agent_null(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging("json", "info")
    _table(pending_agent=None, current_round=0).log.info("finalizing")
    rec = json.loads(_lines(capsys.readouterr().err)[0])
    assert rec["session_id"] == "ses_abc123"
    assert rec["round"] == 1
    assert rec["agent"] is None


def test_json_exception_is_inside_the_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("json", "info")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        _table().log.exception("unexpected error")
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 1
    assert "RuntimeError: boom" in json.loads(lines[0])["exception"]


def test_text_is_the_default_and_prefixes_the_roundtable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging()
    _table().log.info("dev answered")
    logging.getLogger("roundtabled").info("daemon line")
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 2
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[0])
    assert "[ses_abc123 r2 dev] dev answered" in lines[0]
    assert "INFO" in lines[0]
    assert lines[1].endswith("roundtabled: daemon line")


def test_debug_lines_are_dropped_at_info_and_kept_at_debug(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging("text", "info")
    _table().log.debug("hidden")
    assert capsys.readouterr().err == ""
    setup_logging("text", "debug")
    _table().log.debug("shown")
    assert "shown" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_configured_secret_is_redacted(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(fmt, "info", secrets=[SECRET])
    logging.getLogger("roundtabled.opencode").warning("auth failed for %s", SECRET)
    _table().log.error(f"request with password {SECRET} failed")
    err = capsys.readouterr().err
    assert SECRET not in err
    assert err.count("********") == 2


def test_the_line_about_a_finished_turn_names_that_turn_not_the_one_in_flight(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """dev's round-1 failure is logged after the machine moved on to the observer: the line must
    still say dev / round 1 (it used to say the observer)."""
    setup_logging("json", "info")
    table = _table(pending_agent="roundtable-observer", current_round=1)
    entry = HistoryEntry(agent="dev", round=1, response="", has_error=True, error="APIError: x")
    table.record_turn(entry)
    rec = json.loads(_lines(capsys.readouterr().err)[0])
    assert (rec["session_id"], rec["agent"], rec["round"]) == ("ses_abc123", "dev", 1)
    assert "[ses_abc123 r1 dev]" in rec["message"]
