"""The OpenCode server of an eval run, on either major: what the run reads from it (the version,
the seats' models, the prices) and the sessions it writes (the run's parent session, its children
for a resume, the cleanup). The major is asked of the server (:func:`detect_server`); each major's
JSON stays in its client (1.x :class:`OpenCodeClient`, 2.x :class:`V2Client`) (docs/eval.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from roundtabled.opencode import v1_wire
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.opencode.detect import detect_server
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

    async def close(self) -> None:
        await self._client.close()

    async def version(self) -> str | None:
        """The server's release (``"1.14.3"``, ``"2.1.2"``), or ``None`` when it does not say."""
        c = self._client
        v = (await c.info() if isinstance(c, V2Client) else await c.health()).get("version")
        return str(v) if v is not None else None

    async def seat_models(self, agents: Sequence[str], directory: str | None) -> SeatModels:
        """The models ``agents`` run on in ``directory`` (``None``: the server's own): an
        agent's configured model, else the server's default, as the daemon seats them (either
        major: core.validation.seat_models). An agent the
        server does not list is left out (the daemon refuses the start, naming it)."""
        c = self._client
        if isinstance(c, V2Client):
            records = {a.id: a for a in await c.agents(directory)}
            labels: list[str] = []
            default: str | None = None
            for name in agents:
                agent = records.get(name)
                if agent is None:
                    continue
                if agent.model is not None:
                    labels.append(f"{agent.model.provider_id}/{agent.model.id}")
                    continue
                if default is None:
                    d = await c.default_model(directory)
                    default = f"{d.provider_id}/{d.id}"
                labels.append(default)
            return SeatModels(labels, {})
        providers = await c.providers(directory)
        models = v1_wire.agent_models(await c.agents(directory))
        default_model = v1_wire.model_ref((await c.config(directory)).get("model"))
        return SeatModels(
            [m.label() for a in agents if (m := models.get(a) or default_model) is not None],
            v1_wire.model_prices(providers),
        )

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
