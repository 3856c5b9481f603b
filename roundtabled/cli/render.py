"""How the command line shows things: agent colours, turn headers and bodies, durations.

Every place that prints a turn uses :func:`turn_header`, so the header style is one.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from roundtabled.core import sides


def color(hexcolor: str | None, text: str) -> str:
    """``text`` in the agent's colour (``#rrggbb``) on a terminal; plain through a pipe or with
    ``NO_COLOR`` set."""
    if not hexcolor or not sys.stdout.isatty() or os.environ.get("NO_COLOR"):
        return text
    h = hexcolor.lstrip("#")
    if len(h) != 6:
        return text
    r, g, b = int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)
    return f"\x1b[1;38;2;{r};{g};{b}m{text}\x1b[0m"


def turn_header(entry: dict[str, Any], colors: dict[str, str]) -> str:
    """The header line of one transcript entry (an item of the export's ``turns``)."""
    kind = entry.get("kind", "turn")
    agent = str(entry.get("agent"))
    name = color(colors.get(agent), agent)
    if kind == "user":
        return f"── the user (round {entry.get('round')}) ──"
    if kind == "observer":
        return f"── observer · {name} ──"
    if kind == "interjection":
        return f"── {name} (reply to the user) ──"
    side = entry.get("side")
    return sides.turn_header(
        name, int(entry.get("round") or 0), side if isinstance(side, str) else None
    )


def print_turn(entry: dict[str, Any], colors: dict[str, str]) -> None:
    """Print one transcript entry: header, failure line, text (cut at 4000 characters), tools."""
    print(turn_header(entry, colors))
    if entry.get("hasError"):
        print(f"  [{'cut off' if entry.get('cutOff') else 'failed'}: {entry.get('error')}]")
    text = str(entry.get("response") or "").strip()
    if text:
        print(text if len(text) <= 4000 else text[:4000] + " …")
    for tool in entry.get("toolCalls") or []:
        print(f"  [tool {tool.get('toolName')}] {str(tool.get('outputPreview'))[:200]}")
    print(flush=True)  # stream: a pipe must see each turn when it finishes


def fmt_elapsed(seconds: float | None) -> str:
    """``seconds`` as ``4m05s`` / ``1h02m``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def project_line(directory: str | None) -> str:
    """The line of ``start`` (after the roundtable's id) and ``agents`` (after the table) that
    says which project directory the daemon uses
    (``directory`` from ``--directory``, or ``None`` for the OpenCode server's own directory,
    which may differ from the one ``doctor`` checks: the current one)."""
    if directory:
        return f"Project: {directory} (--directory)"
    return "Project: the server's directory (pass --directory to choose)"
