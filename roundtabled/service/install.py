"""Installation of the orchestrator's tools and the built-in observer agent into OpenCode.

``roundtabled install-tool --project DIR`` writes into ``DIR/.opencode``; ``--global`` into
``$XDG_CONFIG_HOME/opencode``. Files written (OpenCode 1.18.33 scans ``{tool,tools}/*.{js,ts}``
for custom tools, ``{plugin,plugins}/*.{ts,js}`` for plugins and ``{agent,agents}/**/*.md`` for
agents; we use the singular names):

- ``roundtabled/control.ts``: how the shims and the plugin reach the daemon (control URL, token
  file, auth header, the "not running" / "token rejected" errors). The one file with a generated
  constant block at the top (between :data:`BEGIN` and :data:`END`) baking in the control URL and
  the token file path; ``ROUNDTABLED_URL`` / ``ROUNDTABLED_TOKEN_FILE`` in ``opencode serve``'s
  environment override them at run time. It sits in a folder of its own because OpenCode loads
  every top-level file of ``tool/`` as tool definitions and calls every exported function of a
  top-level file of ``plugin/`` as a plugin; the others import it by the relative path
  :data:`CONTROL_IMPORT`. Written first, so a shim on disk always finds it.
- ``tool/roundtable.ts`` and ``tool/available_agents.ts``: thin shims that call the daemon's control
  API (docs/control-api.md), copied as shipped.
- ``agent/roundtable-observer.md``: the hidden, tool-less agent that runs the built-in observer.
- ``plugin/roundtable-plugin.ts``: the roundtable plugin (docs/plugin.md): it leaves the
  answered turn prompts (and, for ``context: "recent"``, the hidden rounds) out of each seat's
  model request in memory, and reports itself to the daemon. Copied as shipped.
  OpenCode waits for its npm install of ``@opencode-ai/plugin`` into a config directory before it
  loads an external plugin from it; offline that install retries for about a minute, so the
  directory is prepared as for the test servers
  (:func:`roundtabled.opencode.config_dir.prefill_config_dir`) when it has no
  ``node_modules`` yet and an installed copy of the package is found.

OpenCode 2.x (``major=2``, docs/plugin.md "OpenCode 2.x") loads no ``tool/`` and refuses 1.x
plugins; an install for it writes ``roundtabled/control.ts`` as above, the two shims beside it
(``roundtabled/roundtable.ts``, ``roundtabled/available_agents.ts``: 2.x loads nothing from that
folder), ``agents/roundtable-observer.md`` and the plugin ``plugins/roundtabled/index.ts``
(package data ``tools/v2/index.ts``), which imports the shims and registers them as 2.x tools
beside its ``context`` hook. No ``node_modules`` (2.x resolves ``@opencode/plugin`` itself). Which
major: :func:`choose_major`; the other major's files are named (:func:`other_major_line`), never
removed.

An install made before ``roundtabled/control.ts`` existed has the constant block in each shim and
in the plugin: :func:`installed_status` reads either layout, and re-installing writes the new one.

Invariants:

- Every file is written atomically (temp file in the same directory, fsync, ``os.replace``, fsync
  of the directory), so an OpenCode server loading the directory never sees a partial file, and a
  crash leaves either the old or the new file. Files are mode 0644 (they hold no secret: the token
  stays in its own 0600 file, only its *path* is baked in).
- Idempotent: re-installing with the same settings rewrites nothing (a file whose content is
  already right is left alone, so OpenCode's file watcher sees no change).
- Only our own files are touched: copies of ours found in the alternative directories
  (``tools/``, ``agents/``) are removed so OpenCode does not load two tools of the same name
  (only a file that carries our marker).

Why the shims import nothing from npm (measured on 1.18.33, see the report in the tools'
comments): OpenCode npm-installs ``@opencode-ai/plugin`` into every config directory that has
custom tools and waits for it; without network that install fails after ~70 s of npm retries, and
a tool that imports the package then fails to load *and breaks the whole tool registry* (every
tool listing answers HTTP 500). The shims use only Bun/Node built-ins and ``control.ts`` and pick
up ``zod`` dynamically when it is resolvable, so they load in every case. (A shim whose
``control.ts`` is missing fails the same way: ``roundtabled doctor`` names the missing file.)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from roundtabled.errors import RoundtableError
from roundtabled.opencode.config_dir import find_node_modules, prefill_config_dir
from roundtabled.opencode.detect import ServerFound
from roundtabled.service.config import xdg_config_home

CONTROL_DIR = "roundtabled"
CONTROL_FILE = "control.ts"
"""The shims' and the plugin's shared module (package data ``roundtabled/tools/control.ts``),
installed as ``<config dir>/roundtabled/control.ts``: the one file with the generated block."""
CONTROL_IMPORT = "../roundtabled/control.ts"
"""How the shims and the plugin import it (relative to ``tool/`` and ``plugin/``)."""
TOOL_FILES = ("roundtable.ts", "available_agents.ts")
"""Tool shims shipped as package data (``roundtabled/tools``); file name = tool name + ``.ts``."""
AGENT_FILES = ("roundtable-observer.md",)
"""Agent files shipped as package data (``roundtabled/agents``)."""
PLUGIN_FILES = ("roundtable-plugin.ts",)
"""The roundtable plugin, shipped as package data (``roundtabled/tools``)."""
TOOL_DIR = "tool"
PLUGIN_DIR = "plugin"
ALT_PLUGIN_DIR = "plugins"
AGENT_DIR = "agent"
ALT_TOOL_DIR = "tools"
ALT_AGENT_DIR = "agents"
BEGIN = "// >>> roundtabled install (generated) >>>"
END = "// <<< roundtabled install (generated) <<<"
AGENT_MARKER = "You are the impartial roundtable observer."
V2_PLUGIN_FILE = "index.ts"
"""The OpenCode 2.x plugin (package data ``roundtabled/tools/v2/index.ts``), installed as
``plugins/roundtabled/index.ts``."""
V2_TUI_FILE = "tui.ts"
"""The 2.x plugin's TUI part (package data ``roundtabled/tools/v2/tui.ts``): shows the toasts the
daemon keeps (``GET /v1/notices``; 2.x has no HTTP toast), installed beside ``index.ts``."""
V2_PLUGIN_DIR = "plugins/roundtabled"
V2_PLUGIN_ID = "roundtabled"
"""The id it defines (``Plugin.define({id})``), as ``GET /api/plugin`` lists it."""
V2_MARKER = "// The roundtabled plugin for OpenCode 2.x"
"""First words of the 2.x plugin; identifies our file."""
MAJORS = (1, 2)
"""The OpenCode majors an install is written for."""
"""First words of the observer agent's prompt; identifies our agent file."""
FILE_MODE = 0o644

_PLUGIN_VERSION_RE = re.compile(r'^const PLUGIN_VERSION = "([^"]*)"\s*$', re.M)
_CONST_RE = re.compile(r"^const (INSTALLED_URL|INSTALLED_TOKEN_FILE) = (\".*\")\s*$", re.M)


class InstallError(RoundtableError):
    """The tools could not be installed or removed (target not writable, package data missing)."""


def _package_text(folder: str, name: str) -> str:
    try:
        return (resources.files("roundtabled") / folder / name).read_text(encoding="utf-8")
    except OSError as exc:
        raise InstallError(
            f"package data {folder}/{name} is missing ({exc}); reinstall roundtabled"
        ) from exc


def _js_string(value: str) -> str:
    # JSON string literals are valid JS string literals (U+2028/2029 included since ES2019).
    return json.dumps(value, ensure_ascii=False)


def render_tool(source: str, *, control_url: str, token_file: Path | str) -> str:
    """``source`` (the control module) with its generated constant block set to the given values.

    Args:
        source: text containing exactly one :data:`BEGIN` … :data:`END` block (the shipped
            ``control.ts``; the shims and the plugin have none since they import it).
        control_url: e.g. ``"http://127.0.0.1:4747"``.
        token_file: path of the daemon's token file (baked in as given).

    Raises:
        InstallError: the source has no constant block.
    """
    start = source.find(BEGIN)
    stop = source.find(END)
    if start < 0 or stop < start:
        raise InstallError("the tool source has no generated constant block; reinstall roundtabled")
    block = (
        f"{BEGIN}\n"
        f"const INSTALLED_URL = {_js_string(control_url)}\n"
        f"const INSTALLED_TOKEN_FILE = {_js_string(str(token_file))}\n"
        f"{END}"
    )
    return source[:start] + block + source[stop + len(END) :]


def read_constants(text: str) -> dict[str, str | None]:
    """The values baked into an installed ``control.ts`` (or a shim or plugin of the layout
    before it): ``{"url": str | None, "tokenFile": str | None}``, ``None`` where absent."""
    out: dict[str, str | None] = {"url": None, "tokenFile": None}
    start, stop = text.find(BEGIN), text.find(END)
    if start < 0 or stop < start:
        return out
    for m in _CONST_RE.finditer(text[start:stop]):
        try:
            value = json.loads(m.group(2))
        except ValueError:
            continue
        if isinstance(value, str):
            out["url" if m.group(1) == "INSTALLED_URL" else "tokenFile"] = value
    return out


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, text: str, mode: int = FILE_MODE) -> bool:
    """Write ``text`` to ``path`` atomically; returns ``False`` if it already had that content.

    The content goes to a temp file in the same directory, is fsynced, gets ``mode``, and is
    renamed over ``path`` (then the directory is fsynced). A crash at any point leaves ``path``
    either absent/old or complete, plus at most a stray ``.<name>.*.tmp`` file.

    Raises:
        InstallError: the directory cannot be created or written.
    """
    data = text.encode("utf-8")
    try:
        if path.is_file() and path.read_bytes() == data:
            if (path.stat().st_mode & 0o777) != mode:
                os.chmod(path, mode)
            return False
    except OSError:
        pass  # unreadable: rewrite it
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InstallError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise InstallError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise
    _fsync_dir(path.parent)
    return True


def tool_targets(project: Path | None, global_: bool, env: Mapping[str, str]) -> Path:
    """The config directory to install into.

    Args:
        project: project root (``None`` = the current directory); ignored when ``global_``.
        global_: install for every project: ``$XDG_CONFIG_HOME/opencode`` (from ``env``).
        env: environment to read ``XDG_CONFIG_HOME`` / ``HOME`` from.

    Returns:
        ``<project>/.opencode`` or ``$XDG_CONFIG_HOME/opencode`` (absolute).
    """
    if global_:
        return xdg_config_home(env) / "opencode"
    return (project or Path.cwd()).resolve() / ".opencode"


def _is_ours_text(text: str) -> bool:
    """A file install-tool wrote: the control module or a shim or plugin importing it, a shim or
    plugin of the layout before it (the block), or the observer agent."""
    return BEGIN in text or CONTROL_IMPORT in text or AGENT_MARKER in text or V2_MARKER in text


def _is_ours(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return _is_ours_text(text)


def _check_target(
    target: Path, subs: tuple[str, ...] = (CONTROL_DIR, TOOL_DIR, AGENT_DIR, PLUGIN_DIR)
) -> None:
    if target.exists() and not target.is_dir():
        raise InstallError(f"cannot install into {target}: it exists and is not a directory")
    for sub in subs:
        d = target / sub
        if d.exists() and not d.is_dir():
            raise InstallError(f"cannot install into {target}: {d} is not a directory")


# What an install writes, in this order: (folder in the config directory, file, package folder,
# whether the control URL and token file are filled in). The control module comes first: the
# shims and the plugin import it, so none is on disk without it.
_LAYOUT: tuple[tuple[str, str, str, bool], ...] = (
    (CONTROL_DIR, CONTROL_FILE, "tools", True),
    *((TOOL_DIR, name, "tools", False) for name in TOOL_FILES),
    *((AGENT_DIR, name, "agents", False) for name in AGENT_FILES),
    *((PLUGIN_DIR, name, "tools", False) for name in PLUGIN_FILES),
)
# OpenCode 2.x: the same control module; the shims beside it (2.x loads nothing from that folder;
# the plugin imports them), the observer agent in the directory 2.x prefers, then the plugin.
_LAYOUT_V2: tuple[tuple[str, str, str, bool], ...] = (
    (CONTROL_DIR, CONTROL_FILE, "tools", True),
    *((CONTROL_DIR, name, "tools", False) for name in TOOL_FILES),
    *((ALT_AGENT_DIR, name, "agents", False) for name in AGENT_FILES),
    (V2_PLUGIN_DIR, V2_PLUGIN_FILE, "tools/v2", False),
    (V2_PLUGIN_DIR, V2_TUI_FILE, "tools/v2", False),
)


def _layout(major: int) -> tuple[tuple[str, str, str, bool], ...]:
    if major not in MAJORS:
        raise InstallError(f"OpenCode major must be 1 or 2, got {major!r}")
    return _LAYOUT if major == 1 else _LAYOUT_V2


def install_paths(target: Path, major: int = 1) -> list[Path]:
    """The files :func:`install_tools` writes into ``target`` for OpenCode ``major``, in its
    order (see there)."""
    return [Path(target) / sub / name for sub, name, _, _ in _layout(major)]


def major_files(target: Path, major: int) -> list[Path]:
    """The files of an install for OpenCode ``major`` that are in ``target`` now and are ours:
    1.x: ``tool[s]/roundtable.ts``, ``tool[s]/available_agents.ts``,
    ``plugin[s]/roundtable-plugin.ts``; 2.x: ``plugins/roundtabled/index.ts``. The shared files
    (``roundtabled/control.ts``, the observer agent) belong to neither."""
    target = Path(target)
    if major == 1:
        candidates = [
            target / sub / name
            for names, subs in (
                (TOOL_FILES, (TOOL_DIR, ALT_TOOL_DIR)),
                (PLUGIN_FILES, (PLUGIN_DIR, ALT_PLUGIN_DIR)),
            )
            for name in names
            for sub in subs
        ]
    else:
        candidates = [
            target / d / V2_PLUGIN_FILE for d in (V2_PLUGIN_DIR, f"{PLUGIN_DIR}/roundtabled")
        ]
    return [p for p in candidates if p.is_file() and _is_ours(p)]


def other_major_line(target: Path, major: int) -> str | None:
    """One line when ``target`` holds our files for the other OpenCode major than ``major``
    (what OpenCode ``major`` makes of them and what to do), else ``None``.

    1.x files on 2.x: ``tool/`` is ignored and ``plugin/roundtable-plugin.ts`` is listed as a
    failed plugin. The 2.x plugin on 1.x: never loaded (1.x loads only top-level files of
    ``plugin[s]/``)."""
    other = 2 if major == 1 else 1
    found = major_files(target, other)
    if not found:
        return None
    names = ", ".join(str(p.relative_to(target)) for p in found)
    effect = (
        "OpenCode 2.x ignores the 1.x tools and fails the 1.x plugin"
        if major == 2
        else "OpenCode 1.x does not load the 2.x plugin"
    )
    return (
        f"Note: {target} also holds the OpenCode {other}.x files of roundtabled ({names}); "
        f"{effect}: remove them if no OpenCode {other}.x server uses this directory, or run "
        f"`roundtabled install-tool --opencode {other}` if the server is {other}.x"
    )


def install_tools(
    target: Path, *, control_url: str, token_file: Path, major: int = 1
) -> list[Path]:
    """Install the control module, the tool shims, the observer agent and the plugin into
    ``target``, for OpenCode ``major``.

    Args:
        target: an OpenCode config directory (see :func:`tool_targets`); created if missing.
        control_url: the daemon's control API base URL, ``http(s)://host:port``.
        token_file: path of the daemon's token file (made absolute).
        major: 1 (OpenCode 1.x) or 2 (2.x, docs/plugin.md "OpenCode 2.x"). Files of the other
            major's install are left in place (:func:`other_major_line` words them).

    Returns:
        The paths of the installed files (:func:`install_paths`), also when unchanged. 1.x:
        ``roundtabled/control.ts``, ``tool/roundtable.ts``, ``tool/available_agents.ts``,
        ``agent/roundtable-observer.md``, ``plugin/roundtable-plugin.ts``. 2.x:
        ``roundtabled/control.ts``, ``roundtabled/roundtable.ts``,
        ``roundtabled/available_agents.ts``, ``agents/roundtable-observer.md``,
        ``plugins/roundtabled/index.ts``.

    Raises:
        InstallError: bad ``control_url`` or ``major``, package data missing, or ``target`` not
            writable.
    """
    layout = _layout(major)
    if not re.match(r"^https?://[^/\s]+/?$", control_url):
        raise InstallError(
            f"control URL must look like http://127.0.0.1:4747 (scheme, host, port), "
            f"got {control_url!r}"
        )
    target = Path(target)
    _check_target(target, tuple(dict.fromkeys(sub for sub, _, _, _ in layout)))
    token_path = Path(token_file).expanduser()
    if not token_path.is_absolute():
        token_path = Path.cwd() / token_path
    written: list[Path] = []
    for sub, name, folder, rendered in layout:
        text = _package_text(folder, name)
        if rendered:
            text = render_tool(text, control_url=control_url.rstrip("/"), token_file=token_path)
        path = target / sub / name
        atomic_write(path, text)
        written.append(path)
    if major == 2:
        # 2.x installs nothing from npm and needs no node_modules; an observer of ours in the
        # other agent directory would be a second agent of the same name.
        stale_dirs: tuple[tuple[str, tuple[str, ...]], ...] = ((AGENT_DIR, AGENT_FILES),)
    else:
        prepare_offline(target)
        # Stale copies of ours in the alternative directory names would be loaded twice.
        stale_dirs = (
            (ALT_TOOL_DIR, TOOL_FILES),
            (ALT_AGENT_DIR, AGENT_FILES),
            (ALT_PLUGIN_DIR, PLUGIN_FILES),
        )
    for sub, names in stale_dirs:
        for name in names:
            stale = target / sub / name
            if stale.is_file() and _is_ours(stale):
                with contextlib.suppress(OSError):
                    stale.unlink()
    return written


def prepare_offline(target: Path) -> bool:
    """Pre-fill ``target``'s ``node_modules`` so that OpenCode skips its npm install there (and
    loads the plugin at once, also offline), when it has none yet and an installed
    ``@opencode-ai/plugin`` is found next to roundtabled; returns whether it did."""
    if (target / "node_modules").exists():
        return False
    source = find_node_modules()
    if source is None:
        return False
    try:
        return prefill_config_dir(target, source)
    except OSError as exc:
        raise InstallError(f"cannot prepare {target} for offline use: {exc}") from exc


def plugin_version(text: str) -> str | None:
    """The ``PLUGIN_VERSION`` a plugin file declares, or ``None``."""
    m = _PLUGIN_VERSION_RE.search(text)
    return m.group(1) if m else None


def v2_plugin_versions(
    project: Path | None, env: Mapping[str, str]
) -> list[tuple[Path, str | None]]:
    """The 2.x plugin files installed for ``project`` and globally (:func:`major_files`), each
    with the ``PLUGIN_VERSION`` it declares (``None``: a plugin from before the 2.x plugin
    reported itself to the daemon), project first."""
    return [
        (p, plugin_version(_read_text(p)))
        for target in (tool_targets(project, False, env), tool_targets(None, True, env))
        for p in major_files(target, 2)
    ]


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _baked(text: str, control_text: str) -> dict[str, Any]:
    """Where a shim or the plugin (``text``) gets the daemon's URL and token file: the installed
    control module it imports (``control_text``, ``""`` when absent), else its own block (the
    layout before ``control.ts``). ``{"url", "tokenFile", "needsControl": bool}``."""
    needs = BEGIN not in text and CONTROL_IMPORT in text
    return {**read_constants(control_text if needs else text), "needsControl": needs}


def installed_status(
    project: Path | None, env: Mapping[str, str], *, control_url: str | None = None
) -> dict[str, Any]:
    """Which tools are installed where (for ``roundtabled doctor``).

    Args:
        project: project root whose ``.opencode`` is inspected (``None`` = current directory).
        env: environment (``XDG_CONFIG_HOME``/``HOME`` for the global directory,
            ``ROUNDTABLED_URL`` as the current URL when ``control_url`` is not given).
        control_url: the daemon's current control URL to compare the baked one with.

    Returns:
        ``{"project": entry, "global": entry}`` with ``entry = {"path": str, "control":
        {"path": str, "url": str | None, "tokenFile": str | None} | None, "tools": {file name:
        {"path": str, "url": str | None, "tokenFile": str | None, "ours": bool,
        "needsControl": bool, "urlMatches": bool | None}}, "observer": bool, "observerPath":
        str | None, "plugin": {"path": str, "version": str | None, "url": str | None,
        "needsControl": bool} | None}``. ``control`` is the installed ``roundtabled/control.ts``;
        a tool's or the plugin's ``url``/``tokenFile`` are the ones it uses (from that module when
        it imports it, ``needsControl``; from its own block in the layout before it), ``None``
        when it imports a missing module. Only installed tools appear in ``tools``;
        ``urlMatches`` is ``None`` when no current URL is known or the file has no baked URL.
    """
    current = control_url or env.get("ROUNDTABLED_URL") or None
    out: dict[str, Any] = {}
    for label, target in (
        ("project", tool_targets(project, False, env)),
        ("global", tool_targets(None, True, env)),
    ):
        control_path = target / CONTROL_DIR / CONTROL_FILE
        control_text = _read_text(control_path) if control_path.is_file() else ""
        entry: dict[str, Any] = {
            "path": str(target),
            "control": (
                {"path": str(control_path), **read_constants(control_text)}
                if control_path.is_file()
                else None
            ),
            "tools": {},
            "observer": False,
            "observerPath": None,
        }
        for name in TOOL_FILES:
            for sub in (TOOL_DIR, ALT_TOOL_DIR):
                p = target / sub / name
                if not p.is_file():
                    continue
                text = _read_text(p)
                baked = _baked(text, control_text)
                url = baked["url"]
                matches = (
                    None
                    if current is None or url is None
                    else url.rstrip("/") == current.rstrip("/")
                )
                entry["tools"][name] = {
                    "path": str(p),
                    "url": url,
                    "tokenFile": baked["tokenFile"],
                    "ours": _is_ours_text(text),
                    "needsControl": baked["needsControl"],
                    "urlMatches": matches,
                }
                break
        for name in AGENT_FILES:
            for sub in (AGENT_DIR, ALT_AGENT_DIR):
                p = target / sub / name
                if p.is_file():
                    entry["observer"] = True
                    entry["observerPath"] = str(p)
                    break
        entry["plugin"] = None
        for name in PLUGIN_FILES:
            for sub in (PLUGIN_DIR, ALT_PLUGIN_DIR):
                p = target / sub / name
                if p.is_file():
                    text = _read_text(p)
                    baked = _baked(text, control_text)
                    entry["plugin"] = {
                        "path": str(p),
                        "version": plugin_version(text),
                        "url": baked["url"],
                        "needsControl": baked["needsControl"],
                    }
                    break
        out[label] = entry
    return out


def parse_major(value: str | None) -> int | None:
    """``--opencode``'s value as a major (``None`` when not given).

    Raises:
        InstallError: anything but ``1`` or ``2`` (the message names ``--opencode`` and 1|2).
    """
    if value is None:
        return None
    text = value.strip().lower().removesuffix(".x")
    if text in ("1", "2"):
        return int(text)
    return _bad_major(value)


def _bad_major(value: str) -> int:
    raise InstallError(
        f"--opencode must be 1 or 2 (the OpenCode major to install for: 1 = opencode-ai 1.x, "
        f"2 = @opencode/cli 2.x), got {value!r}"
    )


def choose_major(flag: int | None, found: ServerFound | None, url: str) -> tuple[int, str]:
    """Which OpenCode major to install for, and the line saying why (printed by install-tool).

    Args:
        flag: ``--opencode`` (:func:`parse_major`), ``None`` when not given.
        found: what answers at ``url`` (:func:`~roundtabled.opencode.detect.detect_server`), or
            ``None`` when it was not asked.
        url: the configured ``server_url``, for the line.

    Returns:
        ``(major, line)``. The flag wins (a server of the other major is named in the line); else
        the major of the server that answers; else 1 (the major the daemon drives), with a line
        saying that nothing answered and how to install for 2.x. Rule: docs/plugin.md
        "OpenCode 2.x".
    """
    known = found is not None and found.reachable and found.major in MAJORS
    if flag is not None:
        line = f"Installing for OpenCode {flag}.x (--opencode {flag})"
        if known and found is not None and found.major != flag:
            what = found.version or f"{found.major}.x"
            line += (
                f"; note: the server at {url} is OpenCode {what}, which will not load these "
                f"files (run install-tool without --opencode to install for it)"
            )
        return flag, line
    if known and found is not None and found.major is not None:
        what = found.version or f"{found.major}.x"
        return found.major, (
            f"Installing for OpenCode {found.major}.x (detected: OpenCode {what} at {url}; "
            f"for the other major give --opencode {3 - found.major})"
        )
    why = (
        "nothing answers there"
        if found is None or not found.reachable
        else f"it is no OpenCode 1.x or 2.x ({found.detail})"
    )
    return 1, (
        f"Installing for OpenCode 1.x (the default: the major could not be detected at {url}, "
        f"{why}); for OpenCode 2.x run: roundtabled install-tool --opencode 2"
    )


def contradiction_line(flag: int | None, found: ServerFound | None, url: str) -> str | None:
    """The one line refusing ``--opencode flag`` when the server that answers at ``url`` is
    OpenCode of the other major (it would not load the files: installing the wrong one must be
    impossible to miss, docs/plugin.md "Which major install-tool writes for"), else ``None``.
    ``install-tool --force`` installs anyway (a directory also served by the other major)."""
    if flag is None or found is None or not found.reachable or found.major not in MAJORS:
        return None
    if found.major == flag:
        return None
    what = found.version or f"{found.major}.x"
    return (
        f"--opencode {flag} contradicts the server at {url}, which is OpenCode {what} and would "
        f"not load these files: run roundtabled install-tool --opencode {found.major} (or without "
        f"--opencode), or add --force to install for OpenCode {flag}.x anyway"
    )


def project_root(cwd: Path) -> Path:
    """The directory whose ``.opencode`` OpenCode loads for ``cwd``: the nearest ancestor (up to
    the git root) that has one, else ``cwd``."""
    for d in (cwd, *cwd.parents):
        if (d / ".opencode").is_dir():
            return d
        if (d / ".git").exists():
            break
    return cwd


def wrong_major_line(project: Path | None, env: Mapping[str, str], major: int) -> str | None:
    """One line for ``roundtabled doctor`` when neither the project's ``.opencode`` nor the global
    config directory holds roundtabled's files for the server's OpenCode ``major`` but one of
    them holds the other major's (what to run instead); else ``None``.

    Args:
        project: project root (``None`` = the current directory).
        env: environment for the global directory (``XDG_CONFIG_HOME``/``HOME``).
        major: the server's major, 1 or 2.
    """
    targets = (tool_targets(project, False, env), tool_targets(None, True, env))
    if any(major_files(t, major) for t in targets):
        return None
    other = 2 if major == 1 else 1
    holding = [t for t in targets if major_files(t, other)]
    if not holding:
        return None
    flag = "--global" if holding[0] == targets[1] else f"--project {holding[0].parent}"
    return (
        f"{holding[0]} holds roundtabled's files for OpenCode {other}.x only, but the server is "
        f"OpenCode {major}.x, which does not load them: run roundtabled install-tool {flag} "
        f"--opencode {major}"
    )


def duplicate_plugin_line(target: Path, other: Path, major: int) -> str | None:
    """One line when an install for OpenCode 2.x into ``target`` has a twin in ``other`` (the
    global config directory for a project install, the project's for a global one), else
    ``None``.

    OpenCode 2.x loads one plugin per id: with the plugin in both directories, the global copy
    runs and the project's is listed as failed (``Duplicate plugin ID: roundtabled``, seen on
    2.1.2), so the project's ``roundtabled/control.ts`` (its daemon URL and token file) is not
    used. 1.x runs both copies (docs/plugin.md), so there is nothing to say."""
    if major != 2 or Path(target) == Path(other) or not major_files(other, 2):
        return None
    return (
        f"Note: {other} holds the roundtabled plugin for OpenCode 2.x too; 2.x loads one plugin "
        f"per id (the global one) and lists the other as failed (`Duplicate plugin ID: "
        f"{V2_PLUGIN_ID}`): keep one of them (remove the other's "
        f"{V2_PLUGIN_DIR}/{V2_PLUGIN_FILE})"
    )
