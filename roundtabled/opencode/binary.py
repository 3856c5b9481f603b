"""Locating the ``opencode`` executable (the daemon's service installer and the test server).

:func:`find_opencode_binary` looks at ``$ROUNDTABLED_OPENCODE_BIN`` first (``scripts/test
--opencode VERSION`` points it at another release installed by ``scripts/opencode-release``), then
the repository's pinned ``node_modules/.bin/opencode``, then ``PATH``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["OPENCODE_VERSION", "find_opencode_binary", "search_roots"]

#: The pinned OpenCode version (package.json at the repository root).
OPENCODE_VERSION = "1.18.33"


def search_roots() -> list[Path]:
    """This file's directory and the cwd, each followed by its parents (where to look for
    ``node_modules``)."""
    roots: list[Path] = []
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        roots.extend([start, *start.parents])
    return roots


def find_opencode_binary() -> Path:
    """Path of the ``opencode`` executable.

    Order: ``$ROUNDTABLED_OPENCODE_BIN``; ``<dir>/node_modules/.bin/opencode`` for ``dir`` this
    file's directory or the cwd or any of their parents; ``opencode`` on ``PATH``. Raises
    :class:`FileNotFoundError` explaining how to install it otherwise.
    """
    env = os.environ.get("ROUNDTABLED_OPENCODE_BIN")
    if env:
        path = Path(env)
        if not path.is_file():
            raise FileNotFoundError(f"ROUNDTABLED_OPENCODE_BIN={env} does not exist")
        return path
    for root in search_roots():
        candidate = root / "node_modules" / ".bin" / "opencode"
        if candidate.exists():
            return candidate
    which = shutil.which("opencode")
    if which:
        return Path(which)
    raise FileNotFoundError(
        "opencode binary not found: run `scripts/setup` (or `npm install` / `npm ci` at the "
        f"repository root, which installs the pinned opencode-ai@{OPENCODE_VERSION}), or set "
        "ROUNDTABLED_OPENCODE_BIN"
    )
