"""Which OpenCode server instances have the roundtable plugin loaded (docs/plugin.md).

The plugin (``roundtabled/tools/roundtable-plugin.ts``) reports itself to the daemon's control
API (``POST /v1/plugin``) when OpenCode loads it into the instance of a directory — before that
instance answers its first request, since OpenCode awaits a plugin's setup —, every
:data:`HEARTBEAT_S` after, and from its hook whenever it shapes a roundtable's request. A
report is the positive signal the plugin mode needs; a file on disk is not (installed after
the server started, ``--pure``, another config directory). Nor is the report's ``serverUrl``: a
daemon that reaches the server through a reverse proxy or an SSH tunnel knows it by another URL
than the one the server gives its plugins, and a second server (a TUI's own) in the same
directory is another process with the same directory. The server's identity comes from the
server: a directory's first report (again after each drop) is trusted only once ``verify``,
reading through the daemon's own connection, confirms that the plugin *runs* in that server's
current instance of the directory: the plugin's ``config`` hook marks the configuration of the
instance it runs in (:data:`roundtabled.opencode.v1_wire.PLUGIN_MARK`), and ``GET /config`` of the
directory answers with that instance's configuration. A server that only lists the file
(``--pure``) or another server's plugin leaves no mark there.

A report is dropped when it can no longer be trusted:

- the daemon's event stream to the server (re)connects (the server may have restarted without
  the plugin): every report is dropped and checked again against the server (above), so a
  daemon that connects after the plugin's first report does not wait for its next heartbeat;
- the server disposes the directory's instance (a config reload): that directory's report is
  dropped; the new instance is checked again at the next report.

The check also catches the plugin of a disposed instance, which keeps reporting (OpenCode 1.18.33
neither stops its timers nor tells its hooks of the disposal; docs/opencode-server.md): after a
config reload that removed the plugin, or to a daemon restarted since, a report can come from an
instance that is gone, and the current instance carries no mark.

Dropping is always the safe direction: the roundtable then runs in patch mode until the next
report.

On OpenCode 2.x the 2.x plugin (``roundtabled/tools/v2/index.ts``) reports the same way (its own
protocol, :data:`PLUGIN_VERSION_V2`) to the 2.x shell's registry
(:attr:`roundtabled.engine.v2run.V2Runner.plugins`), whose ``verify`` is ``GET /api/plugin`` of
the directory (:func:`roundtabled.engine.v2_features.plugin_loaded`: the plugin listed
``active`` in the daemon's server's instance of it); its reports are dropped and checked again
on every reconnect as on 1.x. There hiding needs no report (the daemon lists the hidden ids in
S2's metadata); the report only says the plugin also hides by the newest turn prompt's marker,
which lets a seat turn's state write follow its prompt (docs/design.md, "The 2.x shell"), and
dropping it writes the state before the prompt again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from roundtabled.errors import ValidationFailed

__all__ = [
    "HEARTBEAT_S",
    "PLUGIN_FILE",
    "PLUGIN_VERSION",
    "PLUGIN_VERSION_V2",
    "PluginRegistry",
    "PluginReport",
    "parse_report",
]

log = logging.getLogger("roundtabled.engine")

PLUGIN_FILE = "roundtable-plugin.ts"
"""The plugin's file name, as installed into a config directory's ``plugin/`` folder and as the
server lists it in ``GET /config``'s ``plugin`` (``file://…/plugin/roundtable-plugin.ts``)."""

PLUGIN_VERSION = "3"
"""The plugin protocol this daemon speaks (the ``PLUGIN_VERSION`` of the shipped plugin file):
what the marker's ``view``/``hide`` fields mean to it. Another version is not trusted."""

PLUGIN_VERSION_V2 = "v2.1"
"""The 2.x plugin protocol this daemon speaks (the ``PLUGIN_VERSION`` of the shipped
``tools/v2/index.ts``), distinct from 1.x's: a plugin that reports it hides by the newest turn
prompt's marker as well as by the ids S2's metadata lists (docs/plugin.md, "The context hook").
An earlier 2.x plugin does not report at all (it hides by the listed ids only)."""

HEARTBEAT_S = 5.0
"""How often the plugin reports itself (its ``HEARTBEAT_MS``)."""

_VERSION_RE = re.compile(r"^[0-9A-Za-z.+-]{1,32}$")


@dataclass(frozen=True, slots=True)
class PluginReport:
    """One report of the plugin: its ``version``, the instance's ``directory`` and the
    ``server_url`` OpenCode gave it (``""`` when that release gives none; logged, never trusted:
    module docstring), ``at`` epoch ms, and the plugin's own ``file`` (``""`` when not given: the
    1.x plugin; the 2.x plugin's ``import.meta.path``, which the server lists as the plugin's
    source path)."""

    version: str
    directory: str
    server_url: str
    at: int
    file: str = ""


def parse_report(body: Any, now: int) -> PluginReport:
    """The report in a ``POST /v1/plugin`` body ``{"version", "directory", "serverUrl"?,
    "file"?}``.

    Raises:
        ValidationFailed: a field is missing or malformed (named in the error).
    """
    if not isinstance(body, dict):
        raise ValidationFailed("body", "the body must be a JSON object")
    unknown = sorted(set(body) - {"version", "directory", "serverUrl", "worktree", "file"})
    if unknown:
        raise ValidationFailed(unknown[0], f"unknown field {unknown[0]!r}")
    version = body.get("version")
    if not isinstance(version, str) or not _VERSION_RE.match(version):
        raise ValidationFailed("version", "version must be a short version string like '1'")
    directory = body.get("directory")
    if not isinstance(directory, str) or not directory.startswith("/") or len(directory) > 4096:
        raise ValidationFailed("directory", "directory must be an absolute path")
    url = body.get("serverUrl") or ""
    if not isinstance(url, str) or len(url) > 2048:
        raise ValidationFailed("serverUrl", "serverUrl must be a URL string")
    file = body.get("file") or ""
    if not isinstance(file, str) or (file and not file.startswith("/")) or len(file) > 4096:
        raise ValidationFailed("file", "file must be an absolute path")
    return PluginReport(version, directory, url, now, file)


def directory_key(directory: str) -> str:
    """``directory``'s real path: two names of one directory (a link and its target) compare
    equal."""
    return os.path.realpath(directory)


Verify = Callable[["PluginReport"], Awaitable[bool]]
"""``await verify(report)``: whether the plugin that sent ``report`` runs in the daemon's
server's current instance of ``report.directory``, read through the daemon's own connection
(module docstring; on 2.x the active plugin's file is the report's ``file``); may raise (counted
as not running)."""


class PluginRegistry:
    """The reports the daemon trusts now, per instance directory.

    Args:
        clock: epoch ms now.
        verify: checks the first report of a directory against the server (module docstring);
            ``None`` trusts every well-formed report at once (tests of the registry alone).
        speaks: the plugin version trusted (:data:`PLUGIN_VERSION` on 1.x,
            :data:`PLUGIN_VERSION_V2` for the 2.x shell); a report of any other is refused.
        install: the command a refusal names (``roundtabled install-tool``, with ``--opencode
            2`` for the 2.x shell).
    """

    def __init__(
        self,
        clock: Callable[[], int],
        verify: Verify | None = None,
        *,
        speaks: str = PLUGIN_VERSION,
        install: str = "roundtabled install-tool",
    ) -> None:
        self.clock = clock
        self.verify = verify
        self.speaks = speaks
        self.install = install
        self.reports: dict[str, PluginReport] = {}
        self._arrived = asyncio.Event()
        self._checking: dict[str, tuple[asyncio.Task[None], int, PluginReport]] = {}
        """Per directory key: the check in flight, the drop count it began at, its report."""
        self._drops = 0
        """How many times reports were dropped: a check that began before a drop is void."""

    def register(self, report: PluginReport) -> tuple[bool, str]:
        """Record ``report``; returns ``(accepted, why not)``. A directory without a trusted
        report is trusted only once ``verify`` confirms it (in the background: the plugin's
        first report is sent while its instance is still loading, and the check reads that
        instance); until then the report is accepted as pending."""
        if report.version != self.speaks:
            return False, (
                f"plugin version {report.version!r}, the daemon speaks {self.speaks!r}: "
                f"run `{self.install}` again and restart opencode serve"
            )
        key = directory_key(report.directory)
        if self.verify is None or key in self.reports:
            self._trust(report)
        elif key not in self._checking or self._checking[key][1] != self._drops:
            task = asyncio.get_running_loop().create_task(self._check(report, self._drops))
            self._checking[key] = (task, self._drops, report)
        return True, ""

    def checking(self, directory: str | None) -> bool:
        """Whether a report of ``directory`` is being checked now (its mode is then decided
        only once the check has ended: :meth:`current`)."""
        # Asked on every fast handoff: no realpath (syscalls) unless a check is in flight.
        return (
            bool(self._checking)
            and directory is not None
            and directory_key(directory) in self._checking
        )

    async def current(self, directory: str | None) -> str | None:
        """:meth:`version_for` once a check of ``directory``'s report in flight has ended (a
        reconnect re-checks every report: the next turn waits for that answer, never for a
        heartbeat)."""
        if (
            self._checking
            and directory is not None
            and (c := self._checking.get(directory_key(directory))) is not None
        ):
            await asyncio.gather(c[0], return_exceptions=True)
        return self.version_for(directory)

    async def checked(self) -> None:
        """Return once every check of a report in flight now has ended."""
        await asyncio.gather(*(c[0] for c in self._checking.values()), return_exceptions=True)

    def _trust(self, report: PluginReport) -> None:
        self.reports[report.directory] = self.reports[directory_key(report.directory)] = report
        self._arrived.set()

    async def _check(self, report: PluginReport, drops: int) -> None:
        assert self.verify is not None
        try:
            loaded = await self.verify(report)
        except Exception as exc:  # the server is unreachable: the next report checks again
            loaded = False
            log.info("plugin report from %s not checked: %s", report.directory, exc)
        finally:
            key = directory_key(report.directory)
            if key in self._checking and self._checking[key][1] == drops:
                del self._checking[key]
        if drops != self._drops:
            return  # the reports were dropped meanwhile: the next report is checked again
        if loaded:
            self._trust(report)
        else:
            log.info(
                "plugin report from %s (server %s) refused: the daemon's server's instance of "
                "that directory has not loaded the plugin (another server's plugin, a server "
                "that lists the file but runs no plugin, or a disposed instance)",
                report.directory,
                report.server_url or "not given",
            )

    def version_for(self, directory: str | None) -> str | None:
        """The version of the plugin loaded in ``directory``'s instance, or ``None``."""
        if directory is None:
            return None
        # The exact string first: the handoff asks this per turn, realpath costs syscalls.
        report = self.reports.get(directory) or self.reports.get(directory_key(directory))
        return report.version if report is not None else None

    async def wait_for(self, directory: str | None, seconds: float) -> str | None:
        """:meth:`version_for`, waiting up to ``seconds`` for a report (the plugin reports
        every few seconds: a daemon that just started or reconnected hears from it soon)."""
        found = self.version_for(directory)
        if found is not None or seconds <= 0:
            return found
        self._arrived.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while (found := self.version_for(directory)) is None:
                    await self._arrived.wait()
                    self._arrived.clear()
        return found

    def forget(self, directory: str | None = None) -> None:
        """Drop the report of ``directory`` (``None``: every report)."""
        self._drops += 1
        if directory is None:
            self.reports.clear()
            return
        key = directory_key(directory)
        for name, report in list(self.reports.items()):
            if name in (directory, key) or directory_key(report.directory) == key:
                del self.reports[name]

    def recheck(self) -> None:
        """Drop every report and check each directory's again against the server (``verify``;
        without it, every report is dropped): trusted again only where the instance still has
        the plugin loaded (a report whose check is in flight included)."""
        reports = {id(r): r for r in self.reports.values()}
        reports.update({id(c[2]): c[2] for c in self._checking.values()})
        self.forget()
        if self.verify is None:
            return
        for report in reports.values():
            self.register(report)

    def snapshot(self) -> list[dict[str, Any]]:
        """The reports for ``GET /v1/health`` / doctor: ``[{directory, version, at}]``."""
        unique = {id(r): r for r in self.reports.values()}.values()
        return [{"directory": r.directory, "version": r.version, "at": r.at} for r in unique]
