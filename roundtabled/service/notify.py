"""systemd notify protocol (``sd_notify``), without libsystemd.

``NOTIFY_SOCKET`` names a datagram Unix socket (a path, or ``@name`` for the abstract namespace).
Messages are newline-separated ``KEY=VALUE`` assignments: ``READY=1``, ``STATUS=…``,
``WATCHDOG=1``, ``STOPPING=1`` (see sd_notify(3)). Outside systemd (no ``NOTIFY_SOCKET``) every call
is a no-op. ``WATCHDOG_USEC`` (microseconds) tells how often the watchdog must be fed; we feed it at
half that period from the event loop itself, so a blocked loop stops feeding it and systemd restarts
the service.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


class Notifier:
    """Sends ``sd_notify`` messages.

    Args:
        env: the environment to read ``NOTIFY_SOCKET`` / ``WATCHDOG_USEC`` / ``WATCHDOG_PID`` from.
    """

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        addr = env.get("NOTIFY_SOCKET") or ""
        self.address: str | None = None
        if addr.startswith("@"):
            self.address = "\0" + addr[1:]
        elif addr.startswith("/"):
            self.address = addr
        usec = env.get("WATCHDOG_USEC")
        pid = env.get("WATCHDOG_PID")
        self.watchdog_interval: float | None = None
        if usec and usec.isdigit() and (not pid or pid == str(os.getpid())):
            self.watchdog_interval = int(usec) / 1_000_000 / 2

    @property
    def enabled(self) -> bool:
        """True when running under systemd with a notify socket."""
        return self.address is not None

    def send(self, **fields: str | int) -> bool:
        """Send ``KEY=VALUE`` lines (keys upper-cased). Returns False when not sent."""
        if self.address is None:
            return False
        msg = "\n".join(f"{k.upper()}={v}" for k, v in fields.items()).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.connect(self.address)
                sock.sendall(msg)
        except OSError:
            return False
        return True

    def ready(self, status: str) -> bool:
        """``READY=1`` with a status line."""
        return self.send(ready=1, status=status)

    def status(self, status: str) -> bool:
        """``STATUS=…``."""
        return self.send(status=status)

    def watchdog(self) -> bool:
        """``WATCHDOG=1``."""
        return self.send(watchdog=1)

    def stopping(self) -> bool:
        """``STOPPING=1``."""
        return self.send(stopping=1)
