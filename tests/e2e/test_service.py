"""roundtabled as a systemd service: the real ``roundtabled serve`` process under a
fake manager — a real ``AF_UNIX`` datagram socket passed as ``NOTIFY_SOCKET`` — against the real
OpenCode server.

Proves: ``READY=1`` is sent only after the first successful resync with the server (not while the
server is down, though the control API already answers; and after the recovery scan has adopted a
roundtable left active by a crashed daemon: its ``STATUS=`` already counts it); ``STATUS=`` follows
the number of active roundtables; ``WATCHDOG=1`` arrives every ``WATCHDOG_USEC/2``; SIGTERM gives
``STOPPING=1`` and exit 0 within the shutdown window; with ``--log-format json`` every line is
JSON and every line about a roundtable carries ``session_id``, ``round`` and ``agent``.
``install-service`` (through the CLI, with a recording ``systemctl`` first on ``PATH``) writes
both user units with this venv's ``roundtabled`` and enables them; the units pass
``systemd-analyze verify``; the repository's ``systemd/*.service`` equal the rendered defaults.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roundtabled.offline.opencode_server import OpenCodeServer, free_port
from roundtabled.offline.scripted_actions import Hang, Text
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.service import install
from roundtabled.service import systemd as service

from .conftest import RT, roundtable_config

RT_BIN = Path(sys.executable).parent / "roundtabled"
REPO = Path(__file__).resolve().parents[2]


class Manager:
    """The notify socket systemd would own: collects every datagram with its arrival time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.messages: list[tuple[float, dict[str, str]]] = []
        asyncio.get_running_loop().add_reader(self.sock.fileno(), self._read)

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(4096)
            except BlockingIOError:
                return
            fields = dict(line.split("=", 1) for line in data.decode().split("\n") if "=" in line)
            self.messages.append((time.monotonic(), fields))

    def with_key(self, key: str) -> list[tuple[float, dict[str, str]]]:
        return [(t, m) for t, m in self.messages if key in m]

    async def wait(self, key: str, value: str | None = None, timeout: float = 30) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for _, m in self.messages:
                if key in m and (value is None or m[key] == value):
                    return m
            await asyncio.sleep(0.05)
        raise AssertionError(f"no {key}={value} from the daemon in {timeout} s: {self.messages}")

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.sock.fileno())
        self.sock.close()


class ServeProcess:
    """``roundtabled serve`` as a child process with the given environment."""

    def __init__(self, proc: asyncio.subprocess.Process, log_path: Path, port: int) -> None:
        self.proc = proc
        self.log_path = log_path
        self.url = f"http://127.0.0.1:{port}"

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def stop(self) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        assert self.proc.returncode is not None
        return self.proc.returncode


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[Manager]:
    m = Manager(tmp_path / "notify.sock")
    try:
        yield m
    finally:
        m.close()


async def spawn_serve(
    tmp_path: Path, env_base: dict[str, str], server_url: str, manager: Manager, **extra: str
) -> ServeProcess:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROUNDTABLED_", "OPENCODE_"))}
    env.update(env_base)
    env.update(
        NOTIFY_SOCKET=str(manager.path),
        WATCHDOG_USEC="1000000",  # feed every 0.5 s
        ROUNDTABLED_SERVER_URL=server_url,
        ROUNDTABLED_CONTROL_PORT=str(port),
        ROUNDTABLED_LOG_FORMAT="json",
        ROUNDTABLED_LOG_LEVEL="debug",
        ROUNDTABLED_RESYNC_PERIOD="2",
        ROUNDTABLED_SHUTDOWN_WINDOW="5",
    )
    env.update(extra)
    log_path = tmp_path / f"serve-{port}.log"
    with open(log_path, "wb") as log:  # noqa: ASYNC230 (a local file, instantaneous)
        proc = await asyncio.create_subprocess_exec(
            str(RT_BIN), "serve", env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL
        )
    return ServeProcess(proc, log_path, port)


async def ping(url: str) -> bool:
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(url + "/v1/ping", timeout=aiohttp.ClientTimeout(total=1)) as resp,
        ):
            return resp.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def api(url: str, token_file: Path, method: str, path: str, body: Any = None) -> Any:
    token = token_file.read_text().strip()
    async with (
        aiohttp.ClientSession() as http,
        http.request(
            method,
            url + path,
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=aiohttp.ClientTimeout(total=60),
        ) as resp,
    ):
        assert resp.status == 200, await resp.text()
        return await resp.json()


def xdg_env(tmp_path: Path) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "rt-config"),
        "XDG_STATE_HOME": str(tmp_path / "rt-state"),
    }


async def start_server(tmp_path: Path, llm: ScriptedLLM, opencode_factory: Any) -> OpenCodeServer:
    staging = tmp_path / "staging"
    files = {
        ".opencode/" + p.relative_to(staging).as_posix(): p.read_text()
        for p in install.install_tools(
            staging, control_url="http://127.0.0.1:9", token_file=tmp_path / "unused-token"
        )
    }
    server: OpenCodeServer = await opencode_factory(roundtable_config(llm), files=files)
    return server


# ------------------------------------------------------------------------------------------------
# notify protocol, end to end
# ------------------------------------------------------------------------------------------------


async def test_ready_only_after_the_first_resync_then_status_watchdog_and_stop(
    tmp_path: Path, scripted_llm: ScriptedLLM, opencode_factory: Any, manager: Manager
) -> None:
    server = await start_server(tmp_path, scripted_llm, opencode_factory)
    await server.stop()  # the server is down when the service starts
    env = xdg_env(tmp_path)
    serve = await spawn_serve(
        tmp_path, env, server.url, manager, ROUNDTABLED_DIRECTORIES=str(server.project_dir)
    )
    try:
        deadline = time.monotonic() + 30
        while not await ping(serve.url):
            assert time.monotonic() < deadline, serve.log
            await asyncio.sleep(0.1)
        # The daemon is up and its health check has been refused twice (a retry after the first):
        # past the first refusal, it must not have claimed readiness.
        while serve.log.count("not reachable") < 2:
            assert time.monotonic() < deadline, serve.log
            await asyncio.sleep(0.1)
        assert manager.with_key("READY") == [], manager.messages
        assert manager.with_key("WATCHDOG") == []  # the watchdog starts with readiness

        await server.restart()  # same port
        ready = await manager.wait("READY", "1", timeout=60)
        assert ready["STATUS"] == "0 active roundtables"
        t_ready = manager.with_key("READY")[0][0]
        # the daemon's view: ready, connected
        token_file = Path(env["XDG_CONFIG_HOME"]) / "roundtabled" / "token"
        health = await api(serve.url, token_file, "GET", "/v1/health")
        assert health["ready"] is True

        # WATCHDOG=1 from the event loop, at WATCHDOG_USEC/2 = 0.5 s
        await asyncio.sleep(3.0)
        beats = [t for t, _ in manager.with_key("WATCHDOG") if t > t_ready]
        assert len(beats) >= 3, manager.messages

        # STATUS follows the number of active roundtables
        scripted_llm.script(Text(text="PM speaks."), agent="pm")
        scripted_llm.script(Hang(), agent="dev")
        created = await api(
            serve.url,
            token_file,
            "POST",
            "/v1/roundtables",
            {"agents": ["pm", "dev"], "prompt": "notify me", "directory": str(server.project_dir)},
        )
        s2 = created["sessionID"]
        await manager.wait("STATUS", "1 active roundtable", timeout=30)
        await scripted_llm.wait_for_requests(1, 30, agent="dev")
        await api(serve.url, token_file, "POST", f"/v1/roundtables/{s2}/cancel", {})
        n = len(manager.messages)
        deadline = time.monotonic() + 30
        while not any(m.get("STATUS") == "0 active roundtables" for _, m in manager.messages[n:]):
            assert time.monotonic() < deadline, manager.messages[n:]
            await asyncio.sleep(0.1)

        # SIGTERM: STOPPING=1, exit 0 within the shutdown window (5 s) plus start-up slack
        t0 = time.monotonic()
        code = await serve.stop()
        assert code == 0, serve.log
        assert time.monotonic() - t0 < 5 + 5
        assert manager.with_key("STOPPING"), manager.messages
    finally:
        await serve.stop()

    # JSON lines for journald: every line parses; every line about the roundtable names it
    lines = [json.loads(line) for line in serve.log.splitlines() if line.strip()]
    about = [rec for rec in lines if s2 in rec["message"]]
    assert about, "no log line about the roundtable"
    for rec in about:
        assert rec.get("session_id") == s2, rec
        assert "round" in rec and "agent" in rec, rec
    assert any(rec.get("agent") == "dev" for rec in about)


async def test_ready_status_counts_a_roundtable_recovered_from_a_crashed_daemon(
    rt: RT, manager: Manager
) -> None:
    rt.llm.script(Text(text="PM speaks."), agent="pm")
    rt.llm.script(Hang(), agent="dev")
    s2 = await rt.start(agents=["pm", "dev"], prompt="survive a crash")
    await rt.llm.wait_for_requests(1, 30, agent="dev")
    await rt.kill_daemon()

    serve = await spawn_serve(
        rt.tmp, rt.settings_env, rt.server.url, manager, ROUNDTABLED_DIRECTORIES=rt.directory
    )
    try:
        ready = await manager.wait("READY", "1", timeout=60)
        # READY came after the recovery scan: the roundtable left active is already counted
        assert ready["STATUS"] == "1 active roundtable", manager.messages
        token_file = Path(rt.settings_env["XDG_CONFIG_HOME"]) / "roundtabled" / "token"
        listing = await api(serve.url, token_file, "GET", "/v1/roundtables")
        assert [r["sessionID"] for r in listing["roundtables"]] == [s2]
    finally:
        assert await serve.stop() == 0


# ------------------------------------------------------------------------------------------------
# install-service and the unit files
# ------------------------------------------------------------------------------------------------


def _fake_systemctl(bin_dir: Path, record: Path, fail_with: str | None = None) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "systemctl"
    body = f'echo "$@" >> {record}\n'
    if fail_with:
        body += f'echo "{fail_with}" >&2\nexit 1\n'
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)


def _install_env(tmp_path: Path, bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROUNDTABLED_", "OPENCODE_"))}
    env.update(xdg_env(tmp_path))
    env["PATH"] = f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


def test_install_service_writes_both_units_and_enables_them(tmp_path: Path) -> None:
    bin_dir, record = tmp_path / "bin", tmp_path / "systemctl.log"
    _fake_systemctl(bin_dir, record)
    env = _install_env(tmp_path, bin_dir)
    proc = subprocess.run(
        [str(RT_BIN), "install-service", "--with-opencode"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc
    unit_dir = tmp_path / "rt-config" / "systemd" / "user"
    rt_unit = (unit_dir / "roundtabled.service").read_text()
    oc_unit = (unit_dir / "opencode-serve.service").read_text()
    assert f"ExecStart={RT_BIN} serve\n" in rt_unit
    assert "Type=notify" in rt_unit and "WatchdogSec=" in rt_unit
    # the service reads the same configuration (and token file) as this shell
    assert f'Environment="XDG_CONFIG_HOME={tmp_path / "rt-config"}"' in rt_unit
    assert "ExecStart=" in oc_unit and " serve --hostname 127.0.0.1 --port 4096" in oc_unit
    assert oct((unit_dir / "roundtabled.service").stat().st_mode & 0o777) == "0o644"
    assert not list(unit_dir.glob(".*tmp"))  # atomic: no temporary file left behind
    calls = record.read_text().splitlines()
    assert calls == [
        "--user daemon-reload",
        "--user enable --now opencode-serve.service roundtabled.service",
    ]
    assert "enabled" in proc.stdout


def test_install_service_without_a_user_manager_prints_the_commands(tmp_path: Path) -> None:
    bin_dir, record = tmp_path / "bin", tmp_path / "systemctl.log"
    _fake_systemctl(bin_dir, record, fail_with="Failed to connect to bus: No medium found")
    env = _install_env(tmp_path, bin_dir)
    proc = subprocess.run(
        [str(RT_BIN), "install-service"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc
    assert (tmp_path / "rt-config" / "systemd" / "user" / "roundtabled.service").is_file()
    assert "systemctl --user daemon-reload" in proc.stdout
    assert "systemctl --user enable --now roundtabled.service" in proc.stdout


def test_install_service_no_enable_only_reloads(tmp_path: Path) -> None:
    bin_dir, record = tmp_path / "bin", tmp_path / "systemctl.log"
    _fake_systemctl(bin_dir, record)
    proc = subprocess.run(
        [str(RT_BIN), "install-service", "--no-enable"],
        env=_install_env(tmp_path, bin_dir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc
    assert record.read_text().splitlines() == ["--user daemon-reload"]
    assert not (tmp_path / "rt-config" / "systemd" / "user" / "opencode-serve.service").exists()


def test_repository_unit_files_are_the_rendered_defaults() -> None:
    for name, text in service.render_units().items():
        assert (REPO / "systemd" / name).read_text() == text, name


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_installed_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    units = service.render_units(
        roundtabled_bin=str(RT_BIN),
        opencode_bin=service.find_opencode() or "/bin/true",
    )
    for name, text in units.items():
        (tmp_path / name).write_text(text)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    proc = subprocess.run(
        ["systemd-analyze", "--user", "verify", *(str(tmp_path / n) for n in units)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 and "Failed to initialize manager" in output:
        pytest.skip(f"systemd-analyze cannot run here: {output.splitlines()[-1]}")
    assert proc.returncode == 0, output
    # unknown keys and bad values are only warnings: there must be none
    assert output == "", output


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: a typo in the unit is reported."""
    text = service.render_units(roundtabled_bin=str(RT_BIN))["roundtabled.service"]
    (tmp_path / "roundtabled.service").write_text(text.replace("Type=notify", "Type=notfy"))
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    proc = subprocess.run(
        ["systemd-analyze", "--user", "verify", str(tmp_path / "roundtabled.service")],
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "Failed to initialize manager" in proc.stderr:
        pytest.skip("systemd-analyze cannot run here")
    assert "notfy" in proc.stdout + proc.stderr


@pytest.mark.parametrize("window", [0.0, 8.0, 60.0, 600.0])
def test_the_stop_timeout_is_longer_than_the_shutdown_window(window: float) -> None:
    text = service.render_units(shutdown_window=window)["roundtabled.service"]
    line = next(x for x in text.splitlines() if x.startswith("TimeoutStopSec="))
    assert int(line.split("=")[1]) >= max(30, window + 20)
