"""Logging set-up: human-readable text (default) or JSON lines (``--log-format json``, for
journald). Records about a roundtable carry ``session_id`` (and ``round``/``agent`` when known) as
fields in JSON and as a ``[ses_…]`` prefix in text. Secrets are never passed to the logger; as a
second line of defence, :class:`RedactFilter` masks any configured secret that still shows up."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from typing import Any

import orjson

_STD = set(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, extra fields, exception."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STD and not key.startswith("_"):
                data[key] = value
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(data, default=str).decode()


class RedactFilter(logging.Filter):
    """Replaces each secret in a record's message with ``********``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s and len(s) >= 4]

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            msg = record.getMessage()
            if any(s in msg for s in self.secrets):
                for s in self.secrets:
                    msg = msg.replace(s, "********")
                record.msg, record.args = msg, None
        return True


def setup_logging(fmt: str = "text", level: str = "info", secrets: Iterable[str] = ()) -> None:
    """Configure the root logger to stderr. ``fmt``: text | json; ``level``: debug … error."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    handler.addFilter(RedactFilter(secrets))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
