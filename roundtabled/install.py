"""Installation of the orchestrator's tools and the built-in observer agent into OpenCode.

``roundtabled install-tool --project DIR`` writes into ``DIR/.opencode``; ``--global`` into
``$XDG_CONFIG_HOME/opencode``. Files written:

- ``tool/roundtable.ts`` and ``tool/available_agents.ts``: thin shims that call the daemon's control
  API (docs/control-api.md). A generated constant block at the top bakes in the control URL and the
  token file path; ``ROUNDTABLED_URL`` / ``ROUNDTABLED_TOKEN_FILE`` override them at run time.
- ``agent/roundtable-observer.md``: the hidden, tool-less agent that runs the built-in observer.

Every file is written atomically (temp file in the same directory, fsync, ``os.replace``), so an
OpenCode server loading the directory never sees a partial file; re-installing is idempotent.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from roundtabled.config import xdg_config_home
from roundtabled.errors import RoundtableError

TOOL_FILES = ("roundtable.ts", "available_agents.ts")
AGENT_FILES = ("roundtable-observer.md",)
BEGIN = "// >>> roundtabled install (generated) >>>"
END = "// <<< roundtabled install (generated) <<<"


class InstallError(RoundtableError):
    """The tools could not be installed (target not writable, package data missing)."""


def _package_text(folder: str, name: str) -> str | None:
    try:
        return (resources.files("roundtabled") / folder / name).read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return None


def render_tool(source: str, *, control_url: str, token_file: Path) -> str:
    """``source`` with its generated constant block set to ``control_url`` / ``token_file``."""
    block = (f"{BEGIN}\nconst INSTALLED_URL = {json.dumps(control_url)}\n"
             f"const INSTALLED_TOKEN_FILE = {json.dumps(str(token_file))}\n{END}")
    if BEGIN in source and END in source:
        head, _, rest = source.partition(BEGIN)
        _, _, tail = rest.partition(END)
        return head + block + tail
    return block + "\n" + source


def atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` atomically (same-directory temp file, fsync, rename).

    Raises:
        InstallError: the directory cannot be created or written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise InstallError(f"cannot write {path}: {exc.strerror or exc}") from exc


def tool_targets(project: Path | None, global_: bool, env: Mapping[str, str]) -> Path:
    """The ``.opencode``-like directory to install into (``--global`` or a project)."""
    if global_:
        return xdg_config_home(env) / "opencode"
    return (project or Path.cwd()).resolve() / ".opencode"


def install_tools(target: Path, *, control_url: str, token_file: Path) -> list[Path]:
    """Install the tool shims and the observer agent into ``target``; returns the paths written.

    Raises:
        InstallError: package data missing or the target not writable.
    """
    written: list[Path] = []
    for name in TOOL_FILES:
        source = _package_text("tools", name)
        if source is None:
            continue
        path = target / "tool" / name
        atomic_write(path, render_tool(source, control_url=control_url, token_file=token_file))
        written.append(path)
    for name in AGENT_FILES:
        source = _package_text("agents", name)
        if source is None:
            raise InstallError(f"package data agents/{name} is missing; reinstall roundtabled")
        path = target / "agent" / name
        atomic_write(path, source)
        written.append(path)
    return written


def uninstall_tools(target: Path) -> list[Path]:
    """Remove what :func:`install_tools` wrote; returns the paths removed."""
    removed = []
    for sub, names in (("tool", TOOL_FILES), ("agent", AGENT_FILES)):
        for name in names:
            p = target / sub / name
            if p.exists():
                p.unlink()
                removed.append(p)
    return removed


def installed_status(project: Path | None, env: Mapping[str, str]) -> dict[str, Any]:
    """Which tools are installed where, and the control URL each one has baked in."""
    out: dict[str, Any] = {}
    for label, target in (("project", tool_targets(project, False, env)),
                          ("global", tool_targets(None, True, env))):
        entry: dict[str, Any] = {"path": str(target), "tools": {}, "observer": False}
        for name in TOOL_FILES:
            p = target / "tool" / name
            if p.exists():
                text = p.read_text(encoding="utf-8", errors="replace")
                url = None
                for line in text.splitlines():
                    if line.startswith("const INSTALLED_URL = "):
                        url = json.loads(line.split("=", 1)[1].strip())
                entry["tools"][name] = {"url": url}
        entry["observer"] = (target / "agent" / AGENT_FILES[0]).exists()
        out[label] = entry
    return out
