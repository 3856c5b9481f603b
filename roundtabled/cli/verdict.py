"""The verdict on a terminal: what ``roundtabled start`` / ``status`` / ``watch`` end with.

Renders the result contract (docs/result.md) as plain text: the degraded notes first (in the
warning colour on a terminal), then a positions table (agent, label, confidence, changed?), the
consensus and decision, what deliberation changed (the opening majority beside the final one) and
each minority view. Input is the JSON form of the contract (as the
control API returns it), so the CLI needs no daemon internals.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from roundtabled.core.state import went_wrong
from roundtabled.core.verdict import (
    consensus_line,
    deliberation_line,
    protocol_line,
    unstated_words,
)

WARNING = "\x1b[1;33m"
RESET = "\x1b[0m"
LABEL_CHARS = 64
"""Characters of a label shown in the table."""


def _styled(text: str, tty: bool) -> str:
    return f"{WARNING}{text}{RESET}" if tty else text


def _use_colour(tty: bool | None) -> bool:
    if tty is not None:
        return tty
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _cell(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _confidence(value: Any) -> str:
    return f"{round(float(value) * 10)}/10" if isinstance(value, int | float) else "—"


TURN_KINDS = ("answered", "failed", "empty", "truncated", "timedOut", "cancelled")
"""The kinds of a seat turn in the result contract's ``status.seats[]`` (docs/result.md)."""


def degraded_line(result: dict[str, Any] | None, *, tty: bool | None = None) -> str:
    """``DEGRADED: note; note …`` (in the warning colour on a terminal) for a degraded result
    contract (docs/result.md), '' for a healthy one or none (a roundtable still running)."""
    status = (result or {}).get("status") or {}
    if not status.get("degraded"):
        return ""
    notes = "; ".join(went_wrong([str(n) for n in status.get("notes") or []]))
    notes = notes or "see the notes below"
    return _styled(f"  DEGRADED: {notes}", _use_colour(tty))


def turns_text(turns: object, result: dict[str, Any] | None) -> str:
    """The seat turns count with what they were: ``6 (4 answered, 2 failed)``; only the kinds
    that occurred, from the result contract's ``status.seats[]`` (docs/result.md); the bare
    count while there is no result."""
    seats = ((result or {}).get("status") or {}).get("seats") or []
    counts = {k: sum(int(s.get(k) or 0) for s in seats) for k in TURN_KINDS}
    parts = [f"{n} {'timed out' if k == 'timedOut' else k}" for k, n in counts.items() if n]
    if not parts:
        return str(turns)
    return f"{turns} ({', '.join(parts)})"


def positions_table(verdict: dict[str, Any]) -> list[str]:
    """The positions table: one row per seat, its label in its own words with the stance it
    belongs to where the words differ, why a label counts as no position, and a position kept
    from before an extension; a seat with an assigned side is marked ``(side: …)`` (its position
    is not counted, docs/result.md)."""
    rows = [("agent", "position", "confidence", "changed?")]
    for p in verdict.get("positions") or []:
        label = p.get("label")
        if label is None:
            label = f"({unstated_words(p)})"
        elif p.get("noStance"):
            label = f"{label} (no position: {p['noStance']})"
        else:
            stance = p.get("stance")
            if stance and str(stance).casefold() != str(label).casefold():
                label = f"{label} (stance: {stance})"
            if p.get("carried"):
                label = f"{label} (kept from round {p.get('round')})"
        changes = p.get("changes") or []
        changed = "no"
        if changes:
            last = changes[-1]
            changed = f"yes, round {last.get('round')}"
            if last.get("why"):
                changed += f": {_cell(str(last['why']), 50)}"
        side = p.get("side")
        rows.append(
            (
                str(p.get("agent")) + (f" (side: {_cell(str(side), 30)})" if side else ""),
                _cell(str(label), LABEL_CHARS),
                _confidence(p.get("confidence")),
                changed,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return ["  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]


def render_verdict(result: dict[str, Any], *, tty: bool | None = None) -> str:
    """The verdict block for the terminal.

    Args:
        result: the contract as JSON (``status``, ``verdict`` …); a result without ``verdict``
            (an older daemon) renders as ''.
        tty: force colours on (True) or off (False); default: on a terminal without ``NO_COLOR``.
    """
    verdict = result.get("verdict")
    status = result.get("status") or {}
    if not isinstance(verdict, dict):
        return ""
    colour = _use_colour(tty)
    lines: list[str] = []
    if status.get("degraded"):
        lines.append(_styled("⚠ degraded result:", colour))
        notes = [str(n) for n in status.get("notes") or []]
        lines.extend(_styled(f"  - {n}", colour) for n in went_wrong(notes))
        lines.extend(f"  note: {n}" for n in notes if n not in went_wrong(notes))
    elif status.get("notes"):
        lines.extend(f"  note: {n}" for n in status["notes"])
    lines.append("── verdict ──")
    lines.extend(positions_table(verdict))
    lines.append(consensus_line(verdict))
    decision = verdict.get("decision")
    lines.append(f"decision: {decision}" if decision else "decision: none")
    if (ran := protocol_line(verdict)) is not None:
        lines.append(ran)
    if (deliberated := deliberation_line(verdict)) is not None:
        lines.append(deliberated)
    for d in verdict.get("disagreements") or []:
        who = ", ".join(d.get("minority") or []) or "—"
        lines.append(f"minority ({who}) on {d.get('point')}: {d.get('view')}")
    return "\n".join(lines)


def print_verdict(payload: dict[str, Any]) -> None:
    """Print the verdict block of a finished roundtable's result payload (the control API's
    ``result`` route or status: the contract under ``result``); nothing for an older daemon."""
    contract = payload.get("result")
    block = render_verdict(contract) if isinstance(contract, dict) else ""
    if block:
        print()
        print(block)
