"""Pre-filling config directories for a private test server, so that it downloads nothing.

Used by :class:`roundtabled.offline.opencode_server.OpenCodeServer` (the binary it runs is
:func:`roundtabled.opencode.binary.find_opencode_binary`'s):

- :func:`find_node_modules` — the repository's installed npm packages (``@opencode-ai/plugin``).
- :func:`prefill_config_dir` — makes the server skip its ``npm install @opencode-ai/plugin``
  into a config directory, so nothing is downloaded. The server (``Npm.install`` in the 1.18.33
  bundle) skips the install when ``<dir>/node_modules`` exists *and* every dependency named in
  ``<dir>/package.json`` (plus ``@opencode-ai/plugin``) is listed in ``<dir>/package-lock.json``
  → ``packages[""]``; so both files are written and a ``node_modules`` holding symlinks to the
  repository's installed ``@opencode-ai/plugin`` and its dependency closure.
"""

from __future__ import annotations

import json
from pathlib import Path

from roundtabled.opencode.binary import search_roots

__all__ = [
    "PLUGIN_PACKAGE",
    "PREFILL_MARKER",
    "find_node_modules",
    "prefill_config_dir",
]

PLUGIN_PACKAGE = "@opencode-ai/plugin"
#: Extra key in the pre-filled ``package-lock.json``; an npm install by the server rewrites the
#: lock and drops it (the server's INFO log does not mention installs, so this is the evidence).
PREFILL_MARKER = "roundtabled-prefill"


# ----------------------------------------------------------------------------------------------
# Locating the binary and the installed npm packages
# ----------------------------------------------------------------------------------------------


def find_node_modules() -> Path | None:
    """The repository's ``node_modules`` holding ``@opencode-ai/plugin`` (searched upward from
    this file, then from the cwd), or ``None``."""
    for root in search_roots():
        candidate = root / "node_modules"
        if (candidate / PLUGIN_PACKAGE / "package.json").is_file():
            return candidate
    return None


def _dependency_closure(node_modules: Path, name: str) -> list[str]:
    """``name`` and its transitive ``dependencies`` that exist in the flat ``node_modules``."""
    seen: list[str] = []
    todo = [name]
    while todo:
        pkg = todo.pop()
        if pkg in seen:
            continue
        manifest = node_modules / pkg / "package.json"
        if not manifest.is_file():
            continue
        seen.append(pkg)
        deps = json.loads(manifest.read_text()).get("dependencies") or {}
        todo.extend(deps)
    return seen


def prefill_config_dir(config_dir: Path, node_modules: Path | None = None) -> bool:
    """Make OpenCode skip its ``npm install @opencode-ai/plugin`` into ``config_dir``.

    Writes ``package.json``, ``package-lock.json`` (listing the plugin under ``packages[""]``),
    ``.gitignore`` and a ``node_modules`` of symlinks into the repository's ``node_modules``.
    Returns ``False`` (and writes nothing) when no installed plugin is found.
    """
    source = node_modules or find_node_modules()
    if source is None:
        return False
    version = json.loads((source / PLUGIN_PACKAGE / "package.json").read_text())["version"]
    deps = {PLUGIN_PACKAGE: version}
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "package.json").write_text(json.dumps({"dependencies": deps}, indent=2) + "\n")
    lock = {
        "name": config_dir.name,
        "lockfileVersion": 3,
        "requires": True,
        "packages": {"": {"dependencies": deps}},
        PREFILL_MARKER: True,  # dropped if the server's Arborist ever rewrites this file
    }
    (config_dir / "package-lock.json").write_text(json.dumps(lock, indent=2) + "\n")
    gitignore = config_dir / ".gitignore"
    if not gitignore.exists():
        gitignore.write_text(
            "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore\n"
        )
    target = config_dir / "node_modules"
    target.mkdir(exist_ok=True)
    for pkg in _dependency_closure(source, PLUGIN_PACKAGE):
        link = target / pkg
        if link.exists() or link.is_symlink():
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(source / pkg, target_is_directory=True)
    return True
