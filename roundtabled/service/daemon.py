"""``roundtabled serve``: wiring of client, engine, event stream, control API, signals, systemd.

Start-up order:
0. which OpenCode major answers (:mod:`roundtabled.service.server_major`): anything but 1.x (2.x,
   which removed every 1.x route, or no OpenCode at all) is refused in one line on stderr, exit
   2, nothing started; an unreachable server is waited for (step 2), and refused the same way if
   it comes up as another major;
1. control API up on loopback (so the tool shims get an answer instead of a refused connection
   while the daemon starts: until step 3's recovery has loaded every roundtable, a request about
   one is answered "starting", never "unknown", docs/control-api.md);
2. the OpenCode server is checked (``/global/health``); a 401 is reported naming
   ``OPENCODE_SERVER_PASSWORD`` and retried with backoff, never in a tight loop;
3. the event stream connects; on its first ``server.connected`` the start-up recovery scan runs
   (every roundtable left active is resumed), then ``READY=1`` is sent to systemd;
4. on every reconnect every roundtable is resynced; a periodic status/watchdog task keeps
   ``STATUS=`` and ``WATCHDOG=1`` going from the event loop;
5. the server's major is asked again after every reconnect and while the event stream is down
   (a server upgraded or replaced in place behind the same URL): when another major (or, on 2.x,
   another release) answers, the daemon logs one line naming the change and switches driver
   (1.x engine ↔ 2.x shell, :meth:`Daemon._switch`); the roundtables the old server held end
   with that reason in their result (the other major keeps its sessions in another database),
   and the new driver resumes the unfinished roundtables the new server holds
   (docs/design.md, "The server port").

SIGTERM/SIGINT: stop within ``shutdown_window`` seconds and exit 0; the state of every roundtable
is already persisted in its S2, so a restart resumes them. Open result long-polls end at once
with "restarting" (:meth:`ControlAPI.stop_accepting`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import secrets
import signal
import sys
import time
from pathlib import Path
from typing import Any

from roundtabled import __version__
from roundtabled.core import failures, lifecycle
from roundtabled.core.state import Signer
from roundtabled.engine.registry import Engine
from roundtabled.engine.table import status_of
from roundtabled.engine.v2run import V2Runner
from roundtabled.errors import AuthFailed, TransportError
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.opencode.events import BODY_UNUSED
from roundtabled.opencode.port import (
    ServerPort,
    UnsupportedServer,
    V2Port,
    port_after_reconnect,
    port_for,
)
from roundtabled.opencode.stream import EventStream
from roundtabled.opencode.v2 import v2_event_stream
from roundtabled.service import config as cfg
from roundtabled.service.control import ControlAPI, ensure_token, private_draft, serve_control
from roundtabled.service.notify import Notifier
from roundtabled.service.server_major import (
    EXIT_REFUSED,
    detect_at,
    ended_by_replacement,
    refusal,
    refusal_for,
    replaced_reason,
    switch_line,
)

log = logging.getLogger("roundtabled")


def freeze_heap() -> float:
    """Collect garbage once, then exempt every object alive now from later collections
    (``gc.freeze``); returns the milliseconds spent.

    Why: CPython 3.11's full (generation 2) collection walks every tracked object, on the event
    loop. Objects alive once the daemon is up (modules, classes, pydantic schemas, aiohttp) live
    as long as the process, yet each full collection walked them again, in the daemon's own
    process and longer when the daemon runs inside a test process (measured with
    ``gc.callbacks``: bench/README.md). Such a pause in the middle of a handoff is daemon-side
    handoff time (bench figure 2; regression "huge events under load"). After the freeze a full
    collection walks only objects made later.

    Embedding (the tests run the daemon in-process): the embedding process's objects are frozen
    too; they are reclaimed normally by reference counting, only cyclic garbage among them is
    never collected. Called once per :meth:`Daemon.run`, before the event stream starts.
    """
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    return (time.perf_counter() - started) * 1000


def load_signer(path: Path) -> Signer:
    """The daemon's signer, from its key file ``path`` (hex of 32 random bytes, mode 0600),
    creating the file when missing. Two daemons starting at once end with one key: the file is
    linked into place only if absent, and the one that loses reads the winner's.

    Raises:
        OSError: the file cannot be read or created.
        ValueError: the file holds no hex key of at least 16 bytes.
    """
    try:
        return Signer(bytes.fromhex(path.read_text().strip()))
    except FileNotFoundError:
        pass
    key = secrets.token_bytes(32)
    tmp = private_draft(path, key.hex())
    try:
        os.link(tmp, path)  # fails if another process created it first
    except FileExistsError:
        tmp.unlink()
        return Signer(bytes.fromhex(path.read_text().strip()))
    tmp.unlink()
    return Signer(key)


def listen_error(settings: cfg.Settings, exc: OSError) -> str:
    """Why the control API could not listen, naming what to change: the port of a TCP host,
    the socket's path of a ``unix:/path`` host."""
    why = exc.strerror or str(exc)
    host = settings.control_host
    if host.startswith("unix:"):
        return (
            f"cannot listen on the unix socket {host[5:]} for the control API ({why}): does its "
            "directory exist and is it writable, or is another roundtabled running on it? Set "
            "control_host / ROUNDTABLED_CONTROL_HOST to another unix:/path."
        )
    return (
        f"cannot listen on {host}:{settings.control_port} for the control API ({why}): is "
        "another roundtabled running? Set control_port / ROUNDTABLED_CONTROL_PORT to another port."
    )


class Daemon:
    """The running service.

    Args:
        settings: effective settings (see :mod:`roundtabled.service.config`).
        notifier: systemd notifier (default: from the environment).
    """

    def __init__(self, settings: cfg.Settings, notifier: Notifier | None = None) -> None:
        self.settings = settings
        self.notifier = notifier or Notifier()
        password = settings.server_password.get_secret_value() if settings.server_password else None
        self.client = OpenCodeClient(
            settings.server_url,
            username=settings.server_username,
            password=password,
            timeout=settings.http_timeout,
            max_concurrency=settings.max_concurrency,
        )
        self.signer = load_signer(settings.key_file)
        self.token = ensure_token(settings.token_file)
        self.engine, self.stream = self._new_engine()
        self.api = ControlAPI(
            self.engine,
            self.token,
            stream=self.stream,
            presets=settings.presets,
            default_budget=settings.default_budget(),
        )
        self.control_address: str | None = None
        self._stop = asyncio.Event()
        self._recovered = False
        #: the one line refusing a server of another major that came up while we waited
        self.refused: str | None = None
        #: the OpenCode major answering (2: the 2.x shell runs the roundtables)
        self.major = 1
        self.v2: V2Runner | None = None
        #: set by the event stream's disconnect: the major watch asks what answers meanwhile
        self._lost = asyncio.Event()
        #: set when another major (or 2.x release) answers: the run loop switches driver
        self._switch_due = asyncio.Event()
        self._switch_to: tuple[int, str | None, ServerPort | None] | None = None

    def _new_engine(self) -> tuple[Engine, EventStream]:
        """A fresh 1.x engine and its event stream (at start, and after a switch back from
        2.x: a closed engine does not start again)."""
        settings = self.settings
        password = settings.server_password.get_secret_value() if settings.server_password else None
        engine = Engine(self.client, self.signer, settings.engine_settings())
        stream = EventStream(
            settings.server_url,
            username=settings.server_username,
            password=password,
            on_event=engine.on_event,
            on_connect=self._on_connect,
            on_disconnect=self._on_disconnect,
            # The engine reads replies over REST: a huge message.part.* event is only a hint.
            lazy_types=BODY_UNUSED,
        )
        engine.shell.on_change = self._report_status
        return engine, stream

    async def _on_connect(self) -> None:
        if self._recovered and await self._recheck():
            return  # another major answers now: the run loop switches driver
        if not self._recovered:
            await self._check_server()
            counters = await self.engine.recover()
            self._recovered = True
            self.engine.ready.set()
            log.info(
                "ready: %d roundtable(s) active (scanned %d session(s))",
                len(self.engine.tables),
                counters["scanned"],
            )
            self.notifier.ready(self._status_line())
        await self.engine.on_connect()

    def _on_disconnect(self, reason: str) -> None:
        self._lost.set()
        if "disposed" in reason or "closed" in reason:
            log.info("event stream closed: %s; reconnecting and resyncing", reason)
        else:
            log.warning("event stream lost: %s; reconnecting and resyncing", reason)

    async def _check_server(self) -> None:
        try:
            health = await self.client.health()
            self.engine.server_version = str(health.get("version"))
            self.engine.last_error = None
        except AuthFailed as exc:
            self.engine.last_error = str(exc)
            raise
        except TransportError as exc:
            self.engine.last_error = str(exc)

    def _status_line(self) -> str:
        n = len(self.engine.tables)
        return f"{n} active roundtable{'s' if n != 1 else ''}"

    def _report_status(self) -> None:
        if self.engine.ready.is_set():
            self.notifier.status(self._status_line())

    async def _wait_for_server(self) -> None:
        """Health-check until the server answers: every 0.5 s backing off to 5 s while nothing
        answers, to 30 s while the credentials are refused (:func:`failures.next_server_wait`)."""
        delay = failures.SERVER_WAIT_FIRST_S
        warned: str | None = None
        while not self._stop.is_set():
            refused_credentials = False
            try:
                await self._check_server()
                if self.engine.last_error is None:
                    log.info(
                        "OpenCode server %s is up (version %s)",
                        self.settings.server_url,
                        self.engine.server_version,
                    )
                    return
                # 2.x answers /global/health with its web app: it is up, and driven by the 2.x
                # shell (docs/design.md, "The 2.x shell"); anything else is refused. Asked before
                # any warning: the 1.x probe failing is how 2.x is told apart, not a fault.
                found = await detect_at(self.settings)
                if found.reachable and found.major == 2 and found.auth == "ok":
                    self.major = 2
                    self.engine.server_version = found.version
                    self.engine.last_error = None
                    log.info(
                        "OpenCode server %s is up (version %s): driven by the 2.x shell",
                        self.settings.server_url,
                        found.version,
                    )
                    return
                self.refused = refusal(found, self.settings.server_url)
                if self.refused is not None:
                    log.error("%s", self.refused)
                    return
                # said once per cause, not at every ask (every 5 s)
                log.log(
                    logging.DEBUG if warned == self.engine.last_error else logging.WARNING,
                    "OpenCode server %s not reachable: %s",
                    self.settings.server_url,
                    self.engine.last_error,
                )
                warned = self.engine.last_error
            except AuthFailed as exc:
                log.error("%s (setting: server_password / OPENCODE_SERVER_PASSWORD)", exc)
                refused_credentials = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)
            delay = failures.next_server_wait(delay, credentials_refused=refused_credentials)

    async def _start_v2(self, port: ServerPort | None = None) -> EventStream:
        """The 2.x shell over the server's port (``port``, else one asked for now), and its
        event stream: roundtables started from now on run on 2.x (docs/design.md, "The 2.x
        shell"). Roundtables a previous daemon (or driver) left unfinished are resumed at the
        first connect (:meth:`V2Runner.recover`)."""
        password = self.settings.server_password
        if port is None:
            port = await port_for(
                self.settings.server_url,
                password=password.get_secret_value() if password else None,
                username=self.settings.server_username,
                timeout=self.settings.http_timeout,
            )
        if not isinstance(port, V2Port):
            raise UnsupportedServer(f"{self.settings.server_url} no longer answers as 2.x")
        runner = self.v2 = V2Runner(port, self.signer, self.settings.engine_settings())
        # 2.x has no HTTP toast: the toasts wait for the plugin's TUI part (/v1/notices)
        notices = self.api.notices
        notices.progress = self.settings.engine_settings().progress_toasts
        runner.on_toast = runner.delivery.on_toast = notices.toast
        self.api.v2 = runner

        async def connected() -> None:
            if self._recovered and await self._recheck():
                return  # another server answers now: the run loop switches driver
            if not self._recovered:
                # recovery before answers: until it ends, a request about a roundtable is
                # answered "starting", never "unknown" (the engine's ready is the API's signal)
                resumed = await runner.recover()
                for s2 in list(runner.tables):
                    state = runner.state_of(s2)
                    if state is not None and state.active:
                        notices.add(
                            state, f"Roundtable resumed after a restart: {state.title}", "info"
                        )
                self._recovered = True
                self.engine.ready.set()
                log.info(
                    "ready on OpenCode %s: %d roundtable(s) resumed",
                    port.capabilities.version,
                    resumed,
                )
                self.notifier.ready(self._status_line())
            await runner.on_connect()

        stream = v2_event_stream(
            self.settings.server_url,
            runner.on_event,
            password=password.get_secret_value() if password else None,
            on_connect=connected,
            on_disconnect=self._on_disconnect,
        )
        self.stream = stream
        self.api.stream = stream
        return stream

    # ── the server's major, again after every reconnect ─────────────────────────────────────────

    def _ask_switch(self, major: int, version: str | None, port: ServerPort | None) -> None:
        if self._switch_to is None:
            self._switch_to = (major, version, port)
            self._switch_due.set()

    async def _recheck(self) -> bool:
        """Ask which server answers now that the event stream reconnected; ``True`` when it is
        another major (or, on 2.x, another release: :func:`port_after_reconnect`) and a switch
        of driver is asked for. A server that cannot be driven (another product, a refused
        password) is logged, not switched to: the stream keeps failing and says why."""
        url = self.settings.server_url
        password = self.settings.server_password
        secret = password.get_secret_value() if password else None
        if self.v2 is not None:
            try:
                port = await port_after_reconnect(
                    self.v2.port,
                    url,
                    password=secret,
                    username=self.settings.server_username,
                    timeout=self.settings.http_timeout,
                )
            except UnsupportedServer as exc:
                log.warning("after the reconnect: %s", exc)
                return False
            if port is self.v2.port:
                return False
            self._ask_switch(port.capabilities.major, port.capabilities.version, port)
            return True
        found = await detect_at(self.settings)
        if found.reachable and found.auth == "ok" and found.major == 2:
            self._ask_switch(2, found.version, None)
            return True
        return False

    async def _watch_major(self) -> None:
        """While the event stream is down, ask which major answers (every 0.5 s, backing off
        to 5 s): the other major's server answers none of this major's event routes, so the
        stream alone would retry forever. Runs for the life of one driver."""
        while True:
            await self._lost.wait()
            delay = failures.SERVER_WAIT_FIRST_S
            while not self.stream.connected:
                found = await detect_at(self.settings, timeout=min(5.0, self.settings.http_timeout))
                if (
                    found.reachable
                    and found.auth == "ok"
                    and found.major in (1, 2)
                    and found.major != self.major
                ):
                    self._ask_switch(found.major, found.version, None)
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
                delay = failures.next_server_wait(delay)
            self._lost.clear()

    def _driving(self) -> str:
        if self.v2 is not None:
            return f"OpenCode {self.v2.port.capabilities.version}"
        return f"OpenCode {self.engine.server_version or '1.x'}"

    def _end_unfinished(self, reason: str) -> int:
        """End the roundtables of the driver that was just closed (their server is gone: another
        major answers): each one not over gets :func:`ended_by_replacement` and its result is
        released to pollers; every roundtable it held stays answerable through the control API
        (``ControlAPI.ended_elsewhere``). Returns how many were ended."""
        now = int(time.time() * 1000)
        ended = 0
        if self.v2 is not None:
            runner = self.v2
            for s2, run in list(runner.tables.items()):
                if run.result is None:
                    run.state = ended_by_replacement(run.state, reason, now)
                    run.result = lifecycle.result_payload(run.state)
                    run.done.set()
                    run.feed.publish({"type": "done", **run.result})
                    ended += 1
                self.api.ended_elsewhere[s2] = (runner.status(s2) or {}, run.result)
            return ended
        tables = {**self.engine.recent, **self.engine.tables}
        for s2, table in tables.items():
            if table.result is None:
                table.state = ended_by_replacement(table.state, reason, now)
                table.result = lifecycle.result_payload(table.state)
                table.done.set()
                table.publish({"type": "done", **table.result})
                ended += 1
            self.api.ended_elsewhere[s2] = (status_of(table, now, result=True), table.result)
        return ended

    async def _switch(self) -> EventStream:
        """Close the driver of the server that is gone and start the one of the server that
        answers now (docs/design.md, "The server port"); returns the new event stream. Another
        major holds other sessions: the old driver's roundtables end (:meth:`_end_unfinished`)
        and the new one resumes what the new server holds. The same major in another release
        (2.x upgraded in place) keeps the sessions: its roundtables are resumed, not ended."""
        assert self._switch_to is not None
        major, version, port = self._switch_to
        self._switch_to = None
        self._switch_due.clear()
        self._lost.clear()
        url = self.settings.server_url
        was = self._driving()
        now = f"OpenCode {version or f'{major}.x'}"
        other_major = major != self.major
        if self.v2 is not None:
            runner, self.v2 = self.v2, None
            await runner.close()
            if runner.port is not port:
                with contextlib.suppress(Exception):
                    await runner.port.close()
            self.v2 = runner  # still read by _end_unfinished
        else:
            await self.engine.close(window=2.0)
        ended = self._end_unfinished(replaced_reason(url, was, now)) if other_major else 0
        self.v2 = self.api.v2 = None
        self._recovered = False
        # A fresh engine: its ``ready`` (the control API's "starting" signal) is unset until the
        # new driver's recovery ran.
        self.engine, self.stream = self._new_engine()
        self.api.engine = self.engine
        self.api.stream = self.stream
        self.major = major
        driver = "the 2.x shell" if major == 2 else "the 1.x engine"
        log.warning("%s", switch_line(url, was, now, driver, ended))
        if major == 2:
            return await self._start_v2(port)
        if port is not None:
            with contextlib.suppress(Exception):
                await port.close()
        self.engine.server_version = version
        return self.stream

    async def _switch_safely(self) -> EventStream:
        """:meth:`_switch`, and if the new server cannot be driven after all (gone again, or a
        refused password between the check and the start), wait for what answers next."""
        while True:
            try:
                return await self._switch()
            except (UnsupportedServer, TransportError, AuthFailed) as exc:
                log.warning("cannot drive the server at %s yet: %s", self.settings.server_url, exc)
            delay = failures.SERVER_WAIT_FIRST_S
            while self._switch_to is None and not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
                delay = failures.next_server_wait(delay)
                found = await detect_at(self.settings)
                if found.reachable and found.auth == "ok" and found.major in (1, 2):
                    self._ask_switch(found.major, found.version, None)
            if self._switch_to is None:
                return self.stream  # stopping

    async def _heartbeat(self) -> None:
        interval = self.notifier.watchdog_interval or 5.0
        while True:
            await asyncio.sleep(interval)
            if self.notifier.watchdog_interval:
                self.notifier.watchdog()
            self._report_status()

    def request_stop(self) -> None:
        """Begin a graceful stop (signal handler)."""
        self._stop.set()

    async def run(self) -> int:
        """Run until stopped. Returns the process exit code (0 on a clean stop)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.request_stop)
        try:
            runner = await serve_control(
                self.api, self.settings.control_host, self.settings.control_port
            )
        except OSError as exc:
            log.error("%s", listen_error(self.settings, exc))
            return 1
        addrs = runner.addresses
        if addrs and isinstance(addrs[0], tuple):
            self.control_address = f"http://{addrs[0][0]}:{addrs[0][1]}"
        else:
            self.control_address = self.settings.control_host
        log.info("roundtabled %s control API on %s", __version__, self.control_address)
        tasks: list[asyncio.Task[Any]] = []
        try:
            await self._wait_for_server()
            if self.refused is not None:
                return EXIT_REFUSED
            if not self._stop.is_set():
                spent = freeze_heap()
                log.debug("heap frozen (%d objects) in %.1f ms", gc.get_freeze_count(), spent)
                stream = self.stream if self.major == 1 else await self._start_v2()
                tasks.append(asyncio.create_task(self._heartbeat(), name="heartbeat"))
                while True:
                    driving = [
                        asyncio.create_task(stream.run(), name="event-stream"),
                        asyncio.create_task(self._watch_major(), name="major-watch"),
                    ]
                    tasks.extend(driving)
                    stopping = asyncio.ensure_future(self._stop.wait())
                    switching = asyncio.ensure_future(self._switch_due.wait())
                    await asyncio.wait({stopping, switching}, return_when=asyncio.FIRST_COMPLETED)
                    stopping.cancel()
                    switching.cancel()
                    if self._stop.is_set():
                        break
                    for t in driving:
                        t.cancel()
                    await asyncio.gather(*driving, return_exceptions=True)
                    tasks = [t for t in tasks if t not in driving]
                    stream = await self._switch_safely()
        finally:
            started = time.monotonic()
            # New roundtables are refused (503) before the engine closes: one accepted now
            # would be cut before its first turn.
            self.api.stop_accepting()
            self.notifier.stopping()
            log.info("stopping (window %.1f s)", self.settings.shutdown_window)
            for t in tasks:
                t.cancel()
            await self.engine.close(window=max(0.5, self.settings.shutdown_window - 2))
            if self.v2 is not None:
                await self.v2.close()
                await self.v2.port.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(runner.cleanup(), 2.0)
            await self.client.close()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            log.info("stopped in %.2f s", time.monotonic() - started)
        return 0


async def serve(settings: cfg.Settings) -> int:
    """Run the daemon with ``settings`` (what ``roundtabled serve`` does). A server of another
    OpenCode major than 1 (or no OpenCode) is refused first: one line on stderr, exit 2."""
    line = await refusal_for(settings)
    if line is not None:
        print(f"Error: {line}", file=sys.stderr)
        return EXIT_REFUSED
    return await Daemon(settings).run()
