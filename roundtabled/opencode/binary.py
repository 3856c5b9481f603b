"""Locating the ``opencode`` executable (the daemon's service installer and the test server).

:func:`find_opencode_binary` looks at ``$ROUNDTABLED_OPENCODE_BIN`` first (``scripts/test
--opencode VERSION`` points it at another release installed by ``scripts/opencode-release``), then
the repository's pinned ``node_modules/.bin/opencode``, then ``PATH``.

OpenCode 2.x (``major=2``) is pinned separately in ``opencode-v2/`` (its own package.json and lock,
installed into ``opencode-v2/node_modules`` by ``scripts/setup``): its npm package has an
``opencode`` bin too, so it cannot share 1.x's ``node_modules`` (docs/testing.md, "OpenCode 2.x").
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["OPENCODE2_VERSION", "OPENCODE_VERSION", "find_opencode_binary", "search_roots"]

#: The pinned OpenCode version (package.json at the repository root).
OPENCODE_VERSION = "1.18.33"
#: The pinned OpenCode 2.x version (opencode-v2/package.json).
OPENCODE2_VERSION = "2.1.2"


def search_roots() -> list[Path]:
    """This file's directory and the cwd, each followed by its parents (where to look for
    ``node_modules``)."""
    roots: list[Path] = []
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        roots.extend([start, *start.parents])
    return roots


def find_opencode_binary(major: int = 1) -> Path:
    """Path of the ``opencode`` executable of OpenCode ``major`` (1 or 2).

    ``major=1``, in order: ``$ROUNDTABLED_OPENCODE_BIN``; ``<dir>/node_modules/.bin/opencode``
    for ``dir`` this file's directory or the cwd or any of their parents; ``opencode`` on
    ``PATH``.

    ``major=2``: ``$ROUNDTABLED_OPENCODE2_BIN``, else
    ``<dir>/opencode-v2/node_modules/.bin/opencode`` for ``dir`` as above (never ``PATH``: an
    ``opencode`` there may be either major).

    Raises :class:`FileNotFoundError` explaining how to install it, :class:`ValueError` for
    another major.
    """
    if major == 2:
        return _find_v2()
    if major != 1:
        raise ValueError(f"OpenCode major {major} is not supported (1 or 2)")
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


def _find_v2() -> Path:
    env = os.environ.get("ROUNDTABLED_OPENCODE2_BIN")
    if env:
        path = Path(env)
        if not path.is_file():
            raise FileNotFoundError(f"ROUNDTABLED_OPENCODE2_BIN={env} does not exist")
        return path
    for root in search_roots():
        candidate = root / "opencode-v2" / "node_modules" / ".bin" / "opencode"
        if candidate.exists():
            return candidate
    raise FileNotFoundError(
        "OpenCode 2 binary not found: run `scripts/setup` (it installs the pinned "
        f"@opencode/cli@{OPENCODE2_VERSION} into opencode-v2/node_modules), or set "
        "ROUNDTABLED_OPENCODE2_BIN"
    )
