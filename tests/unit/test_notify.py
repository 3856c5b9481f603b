"""The systemd notify protocol of :class:`roundtabled.service.notify.Notifier`, against a real
``AF_UNIX`` datagram socket set as ``NOTIFY_SOCKET`` (a filesystem path and the abstract
namespace), exactly what systemd's manager listens on: one datagram per call, newline-separated
``KEY=VALUE`` lines; ``WATCHDOG_USEC``/``WATCHDOG_PID`` decide the watchdog period; outside
systemd every call is a silent no-op. (That the daemon sends ``READY=1`` only after its first
resync, ``STATUS=`` and ``WATCHDOG=1`` is proved end to end in ``tests/e2e/test_service.py``.)
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from roundtabled.service.notify import Notifier


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """A bound datagram socket (the "manager") and its path."""
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(2.0)
    try:
        yield sock, path
    finally:
        sock.close()


def _recv(sock: socket.socket) -> dict[str, str]:
    data = sock.recv(4096).decode()
    return dict(line.split("=", 1) for line in data.split("\n"))


def test_ready_status_watchdog_stopping_arrive_as_datagrams(
    notify_socket: tuple[socket.socket, str],
) -> None:
    sock, path = notify_socket
    n = Notifier({"NOTIFY_SOCKET": path})
    assert n.enabled
    assert n.ready("0 active roundtables")
    assert _recv(sock) == {"READY": "1", "STATUS": "0 active roundtables"}
    assert n.status("2 active roundtables")
    assert _recv(sock) == {"STATUS": "2 active roundtables"}
    assert n.watchdog()
    assert _recv(sock) == {"WATCHDOG": "1"}
    assert n.stopping()
    assert _recv(sock) == {"STOPPING": "1"}


def test_abstract_namespace_socket_is_used_for_an_at_address() -> None:
    name = f"roundtabled-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(2.0)
    try:
        n = Notifier({"NOTIFY_SOCKET": "@" + name})
        assert n.ready("ok")
        assert _recv(sock)["READY"] == "1"
    finally:
        sock.close()


def test_without_notify_socket_every_call_is_a_no_op() -> None:
    n = Notifier({})
    assert not n.enabled
    assert n.watchdog_interval is None
    assert n.ready("x") is False
    assert n.status("x") is False
    assert n.watchdog() is False


def test_a_relative_or_garbage_notify_socket_is_ignored() -> None:
    assert not Notifier({"NOTIFY_SOCKET": "relative/path"}).enabled


def test_a_vanished_socket_is_reported_not_raised(tmp_path: Path) -> None:
    n = Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})
    assert n.enabled
    assert n.ready("x") is False  # the manager went away: no exception in the daemon


def test_watchdog_is_fed_at_half_the_watchdog_usec_period() -> None:
    n = Notifier({"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "30000000"})
    assert n.watchdog_interval == pytest.approx(15.0)


def test_watchdog_pid_of_another_process_disables_the_watchdog() -> None:
    other = str(os.getpid() + 1)
    n = Notifier({"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": other})
    assert n.watchdog_interval is None
    mine = Notifier(
        {"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": str(os.getpid())}
    )
    assert mine.watchdog_interval == pytest.approx(0.5)
