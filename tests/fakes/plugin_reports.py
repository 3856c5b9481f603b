"""A control endpoint that takes only the plugin's reports (``POST /v1/plugin``), for tests that
run the 2.x shell (:class:`~roundtabled.engine.v2run.V2Runner`) without the daemon: the plugin
installed with its URL reports itself there, and each report goes to the runner's registry as
the control API's route hands it (``roundtabled/service/control.py``, docs/plugin.md).
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Callable

from aiohttp import web

from roundtabled.engine.plugins import PluginRegistry, parse_report


class PluginReports:
    """``POST /v1/plugin`` on ``127.0.0.1:port``, checked against ``token`` like the control
    API; each report is registered in ``registry()`` (the registry of the runner in use).
    ``refused``: the reasons of the reports the registry refused, in order."""

    def __init__(self, registry: Callable[[], PluginRegistry], token: str, port: int) -> None:
        self.registry = registry
        self.token = token.encode()
        self.port = port
        self.refused: list[str] = []
        self._refusal = asyncio.Event()
        self._runner: web.AppRunner | None = None

    async def next_refusal(self, seconds: float) -> str:
        """The reason of the next report the registry refuses (one that comes after this call).

        Raises:
            TimeoutError: none within ``seconds``.
        """
        self._refusal.clear()
        async with asyncio.timeout(seconds):
            await self._refusal.wait()
        return self.refused[-1]

    async def _report(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        given = auth[7:].strip().encode() if auth.startswith("Bearer ") else b""
        if not hmac.compare_digest(given, self.token):
            return web.json_response({"error": "token"}, status=401)
        plugins = self.registry()
        accepted, why = plugins.register(parse_report(await request.json(), plugins.clock()))
        if not accepted:
            self.refused.append(why)
            self._refusal.set()
        return web.json_response({"accepted": accepted})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/plugin", self._report)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
