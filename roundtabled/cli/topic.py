"""The topic argument of ``start``/``extend``."""

from __future__ import annotations

import sys
from pathlib import Path

from roundtabled.cli.client import EXIT_USAGE, CliError, name_the_flag
from roundtabled.core.validation import MAX_PROMPT_CHARS


def read_topic(value: str) -> str:
    """The topic argument of ``start``/``extend``: the text itself, ``-`` for standard input, or
    ``@FILE`` for a UTF-8 file (a topic too long or multi-line for a shell argument).

    Raises:
        CliError: the file cannot be read or is not UTF-8, the file or standard input holds no
            text, or the topic is longer than the daemon takes (:data:`MAX_PROMPT_CHARS`): exit
            code 2, ``PROMPT`` named. The length is checked here, by the daemon's own rule,
            because a topic of a few hundred KB makes a request body over the control API's size
            limit, refused before any field is read; an empty file here because the daemon can
            only name the empty string, not the file it came from.
    """
    topic = _read(value)
    if len(topic) > MAX_PROMPT_CHARS:
        message = f"prompt must be at most {MAX_PROMPT_CHARS} characters, got {len(topic)}"
        raise CliError(name_the_flag(message, "prompt"), EXIT_USAGE)
    return topic


def _read(value: str) -> str:
    if value == "-":
        return _some_text(sys.stdin.read(), "standard input")
    if value.startswith("@") and len(value) > 1:
        path = Path(value[1:]).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CliError(
                f"Error: prompt: cannot read {str(path)!r}: {reason} (give the topic itself, "
                "- for standard input, or @FILE)",
                EXIT_USAGE,
            ) from None
        return _some_text(text, f"the file {str(path)!r}")
    return value


def _some_text(topic: str, source: str) -> str:
    """``topic`` read from ``source`` (in words), refused when it holds no text."""
    if not topic.strip():
        raise CliError(
            f"Error: PROMPT: {source} holds no text (give the topic itself, - for standard "
            "input, or @FILE)",
            EXIT_USAGE,
        )
    return topic
