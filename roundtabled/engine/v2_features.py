"""What the 2.x shell (:mod:`roundtabled.engine.v2run`) does beyond a plain debate: the reads
and writes of ``context: "recent"``, the plugin check, an extension. The decisions are the
core's (:mod:`roundtabled.core.hiding`, :mod:`roundtabled.core.deliberation`,
:mod:`roundtabled.engine.launch`'s pure checks); this module only reads and writes through the
server port (docs/design.md, "The 2.x shell").
"""

from __future__ import annotations

import logging

from roundtabled.core import hiding
from roundtabled.core.server_records import SessionRef
from roundtabled.core.state import RoundtableState
from roundtabled.errors import ValidationFailed
from roundtabled.opencode.port import V2Port

__all__ = [
    "PLUGIN_ID",
    "hidden_ids",
    "plugin_loaded",
    "plugin_missing_note",
    "plugin_notes",
    "recent_needs_plugin",
]

log = logging.getLogger("roundtabled.engine.v2")

PLUGIN_ID = "roundtabled"
"""The id the roundtabled plugin for 2.x defines (``Plugin.define({id: "roundtabled"})``)."""

INSTALL = "roundtabled install-tool --opencode 2"


def plugin_missing_note(directory: str) -> str:
    """The one line said when the roundtabled plugin is not loaded for ``directory`` on 2.x."""
    return (
        f"{hiding.PLUGIN_MISSING} for {directory}: every earlier "
        f"turn prompt stays in each seat's model request (only the plugin can leave one out on "
        f"2.x); run `{INSTALL}` in the project (or --global) and restart opencode"
    )


def recent_needs_plugin(directory: str) -> ValidationFailed:
    """The refusal of ``context: "recent"`` without the plugin (field ``context``)."""
    return ValidationFailed(
        "context",
        f"context: 'recent' needs the roundtabled plugin loaded by OpenCode 2.x for {directory} "
        f"(it leaves the hidden rounds out of each seat's model request); run `{INSTALL}` in "
        "the project (or --global) and restart opencode, or use context 'full'",
    )


async def plugin_loaded(port: V2Port, directory: str) -> bool:
    """Whether ``GET /api/plugin`` of ``directory`` lists the roundtabled plugin as active (a
    failed one, e.g. a duplicate of the global install, does not count: the other copy runs
    and is listed active).

    Raises:
        TransportError: the server could not be reached.
    """
    for plugin in await port.client.plugins(directory):
        if plugin.id == PLUGIN_ID and plugin.status == "active":
            return True
    return False


async def hidden_ids(port: V2Port, s2: SessionRef, state: RoundtableState) -> list[str]:
    """The ids S2's metadata lists for the pending turn's requests (:func:`roundtabled.core.
    hiding.hidden_ids`); S2's messages are read only when the rule needs them.

    Raises:
        TransportError: S2 could not be read.
    """
    if not hiding.needs_prompts(state):
        return hiding.hidden_ids(state)
    return hiding.hidden_ids(state, await port.prompts(s2))


async def plugin_notes(port: V2Port, context: str, directory: str) -> list[str]:
    """A start's (or an extension's) check of the plugin in ``directory`` for a call whose
    context is ``context`` (``full`` | ``recent``): ``[]`` when it is loaded, else the one line
    that says what runs without it (:func:`plugin_missing_note`).

    Raises:
        ValidationFailed: ``context: "recent"`` without the plugin (field ``context``).
        TransportError: the server could not be reached.
    """
    if await plugin_loaded(port, directory):
        return []
    if context == "recent":
        raise recent_needs_plugin(directory)
    return [plugin_missing_note(directory)]
