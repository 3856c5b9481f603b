"""The topic argument of ``start``/``extend``."""

from __future__ import annotations

import sys
from pathlib import Path

from roundtabled.cli.client import EXIT_USAGE, CliError


def read_topic(value: str) -> str:
    """The topic argument of ``start``/``extend``: the text itself, ``-`` for standard input, or
    ``@FILE`` for a UTF-8 file (a topic too long or multi-line for a shell argument).

    Raises:
        CliError: the file cannot be read or is not UTF-8 (exit code 2, the field named).
    """
    if value == "-":
        return sys.stdin.read()
    if value.startswith("@") and len(value) > 1:
        path = Path(value[1:]).expanduser()
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CliError(
                f"Error: prompt: cannot read {str(path)!r}: {reason} (give the topic itself, "
                "- for standard input, or @FILE)",
                EXIT_USAGE,
            ) from None
    return value
