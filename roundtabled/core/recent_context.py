"""The "recent" context of a seat's turn: which earlier rounds are hidden and their digest.

Pure helpers for ``context: "recent"`` (docs/deliberation.md): a seat sees the opening round, a
rolling digest of the rounds between (built from the position ledger, never a model call) and
the last round in full. The server keeps an assistant reply's text in the model's context even
when its part is marked ``ignored`` (docs/deliberation.md, `context: "recent"`), so the daemon
refuses ``context: "recent"`` today; these rules are what it applies once replies can be hidden.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from roundtabled.core.deliberation import position_of, round_turns, spoke
from roundtabled.core.positions import normalise_label
from roundtabled.core.state import HistoryEntry

DIGEST_MAX_BYTES = 900
"""Bytes (UTF-8) of the recent-context digest at most; older label runs are dropped first."""


def rounds_to_hide(round_index: int) -> range:
    """1-based rounds whose replies are hidden when 0-indexed round ``round_index`` starts.

    Seats keep the opening round (1) and the last complete round (``round_index``, 1-based) in
    full; the rounds between are hidden, in whole rounds, so the visible conversation changes
    once per round, never per turn (a stable prefix for the server's prompt cache). Empty
    before round 4 (0-indexed 3).
    """
    return range(2, max(2, round_index))


def _run_text(rounds: list[int], label: str, confidence: float | None) -> str:
    span = f"r{rounds[0]}" if len(rounds) == 1 else f"r{rounds[0]}–{rounds[-1]}"
    conf = f" ({round(confidence * 10):g}/10)" if confidence is not None else ""
    return f"{span} “{label}”{conf}"


def digest(history: Sequence[HistoryEntry], rounds: Iterable[int], agents: Sequence[str]) -> str:
    """A rolling digest of the hidden ``rounds`` built from the position ledger (no model call).

    Args:
        history: the roundtable's history.
        rounds: the 1-based rounds to summarise (:func:`rounds_to_hide`).
        agents: the seats in speaking order.

    Returns:
        ``""`` when ``rounds`` is empty; else a header line and one line per seat with its label
        runs (``pm: r2–3 “modular monolith” (7/10) → r4 “split now”``; a turn without a label
        reads ``no position``, a failed one ``no reply``), within :data:`DIGEST_MAX_BYTES`
        bytes (older runs are dropped first, marked ``…``).
    """
    wanted = sorted(set(rounds))
    if not wanted:
        return ""
    span = f"{wanted[0]}" if len(wanted) == 1 else f"{wanted[0]}–{wanted[-1]}"
    header = (
        f"[Digest of round(s) {span}: those replies are hidden to keep the context short; "
        "the opening round and the last round are in full above]"
    )
    lines = [header]
    share = max(40, (DIGEST_MAX_BYTES - len(header.encode())) // max(1, len(agents)) - 1)
    for agent in agents:
        runs: list[tuple[list[int], str, float | None]] = []
        for rnd in wanted:
            e = round_turns(history, rnd).get(agent)
            if e is None:
                continue
            if not spoke(e):
                label, conf = "no reply", None
            else:
                p = position_of(e)
                label, conf = (p.label, p.confidence) if p is not None else ("no position", None)
            if runs and normalise_label(runs[-1][1]) == normalise_label(label):
                runs[-1][0].append(rnd)
                runs[-1] = (runs[-1][0], runs[-1][1], conf)
            else:
                runs.append(([rnd], label, conf))
        if not runs:
            continue
        texts = [_run_text(r, lbl, c) for r, lbl, c in runs]
        line = f"- {agent}: " + " → ".join(texts)
        while len(line.encode()) > share and len(texts) > 1:
            texts.pop(0)
            line = f"- {agent}: … → " + " → ".join(texts)
        if len(line.encode()) > share:
            line = line.encode()[: share - 3].decode(errors="ignore") + "…"
        lines.append(line)
    return "\n".join(lines)
