"""The engine's knobs: what the daemon's configuration sets for the engine's rooms.

The daemon's configuration (:class:`roundtabled.service.config.Settings`) is the one source of
settings: its :meth:`~roundtabled.service.config.Settings.engine_settings` builds these, and its
fields take their defaults from here and from :class:`roundtabled.core.state.Options` (the
defaults of a roundtable's options), so each default is written once. Tests and benchmarks build one
directly. A module of its own (no I/O, no engine import) so that the configuration can name it
without loading the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from roundtabled.core.state import Options


@dataclass(frozen=True)
class Settings:
    """The engine's knobs. Seconds throughout.

    ``roundtable``: the options a new roundtable starts with; a call's own turn timeout,
    permission policy, ``until``, opening, context and budget override them
    (:func:`roundtabled.engine.launch.new_state`).
    ``resync_period``: seconds between two full resyncs of the active roundtables with the server.
    ``progress_toasts``: a TUI toast per finished turn (at most one per 2 s per roundtable) and per
    phase change.
    ``state_dir``: the daemon's local directory (it remembers the project directories of the
    roundtables it started there); ``None``: remember none.
    ``directories``: project directories whose sessions the start-up recovery scans.
    ``recovery_concurrency``: roundtables the start-up recovery reads at once.
    """

    roundtable: Options = field(default_factory=Options)
    resync_period: float = 15.0
    progress_toasts: bool = True
    state_dir: Path | None = None
    directories: tuple[str, ...] = ()
    recovery_concurrency: int = 8
