"""The OpenCode server of an eval run, on either major: what the run reads from it (the version,
the seats' models, the prices) and the sessions it writes (the run's parent session, its children
for a resume, the cleanup). The major is asked of the server (:func:`detect_server`); each major's
JSON stays in its client (1.x :class:`OpenCodeClient`, 2.x :class:`V2Client`) and its server port
(:class:`V1Port`, :class:`V2Port`: the seats' models and the prices) (docs/eval.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from roundtabled.core.validation import listed_models, needs_default_model
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.opencode.detect import detect_server
from roundtabled.opencode.port import V1Port, V2Port
from roundtabled.opencode.v2 import V2Client


@dataclass(frozen=True)
class SeatModels:
    """What the run reports of the seats' models.

    Attributes:
        labels: ``provider/model`` of each seat that has one, in the seats' order.
        prices: ``provider/model`` → (input, output) USD per million tokens, of the models the
            server lists a price for (2.x lists none: every cost is unknown, never 0).
    """

    labels: list[str]
    prices: dict[str, tuple[float, float]]


class EvalServer:
    """One OpenCode server, 1.x or 2.x (:func:`open_server`). Every method raises what its
    client raises (:class:`~roundtabled.errors.TransportError` and its kinds)."""

    def __init__(self, url: str, major: int, client: OpenCodeClient | V2Client) -> None:
        self.url, self.major, self._client = url, major, client
        self._port = V2Port(client) if isinstance(client, V2Client) else V1Port(client)

    async def close(self) -> None:
        await self._client.close()

    async def version(self) -> str | None:
        """The server's release (``"1.14.3"``, ``"2.1.2"``), or ``None`` when it does not say."""
        c = self._client
        v = (await c.info() if isinstance(c, V2Client) else await c.health()).get("version")
        return str(v) if v is not None else None

    async def seat_models(self, agents: Sequence[str], directory: str | None) -> SeatModels:
        """The models ``agents`` run on in ``directory`` (``None``: the server's own): an
        agent's configured model, else the server's default, as the daemon seats them (the seat
        rule of either major, :func:`~roundtabled.core.validation.listed_models`; the default is
        read only when a seat needs it). An agent the server does not list, or one without a
        model on a server without a default, is left out (the daemon's start refuses it, naming
        it)."""
        port = self._port
        records = await port.agents(directory)
        default = (
            await port.default_model(directory)
            if needs_default_model(agents, None, records)
            else None
        )
        labels = [m.label() for m in listed_models(agents, records, default).values()]
        if isinstance(port, V2Port):
            return SeatModels(labels, {})  # 2.x lists no price
        return SeatModels(labels, dict((await port.provider_models(directory)).prices))

    async def session_exists(self, session_id: str) -> None:
        """Raises (:class:`~roundtabled.errors.NotFound` among others) unless ``session_id``
        can be read."""
        await self._client.get_session(session_id)

    async def create_parent(self, directory: str | None, title: str) -> str:
        """A new root session in ``directory`` (``None``: the server's own) titled ``title``;
        returns its id."""
        c = self._client
        if isinstance(c, V2Client):
            return (await c.create_session(directory=directory, title=title)).id
        return str((await c.create_session(directory=directory, title=title))["id"])

    async def delete_session(self, session_id: str) -> None:
        """Delete ``session_id`` and its children."""
        await self._client.delete_session(session_id)

    async def children(self, session_id: str) -> list[dict[str, Any]]:
        """The child sessions of ``session_id`` as ``[{"id", "title"}]``."""
        c = self._client
        if isinstance(c, V2Client):
            return [{"id": s.id, "title": s.title} for s in await c.children(session_id)]
        return [{"id": s.get("id"), "title": s.get("title")} for s in await c.children(session_id)]


async def open_server(
    url: str, *, username: str, password: str | None, timeout: float = 120
) -> EvalServer:
    """The server at ``url`` through the client of its major (2.x when it says so, else 1.x:
    the 1.x client's own errors then say what is wrong with the server).

    Raises:
        TransportError: never here; a server that cannot be reached fails the first call.
    """
    found = await detect_server(url, password=password, username=username)
    if found.major == 2:
        return EvalServer(
            url, 2, V2Client(url, username=username, password=password, timeout=timeout)
        )
    return EvalServer(
        url, 1, OpenCodeClient(url, username=username, password=password, timeout=timeout)
    )
