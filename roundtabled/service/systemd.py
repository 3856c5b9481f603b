"""``roundtabled install-service``: the systemd *user* units of roundtabled (and of
``opencode serve``), written and enabled.

The unit texts below are the source of truth; ``systemd/roundtabled.service`` and
``systemd/opencode-serve.service`` in the repository are :func:`render_units` with the defaults
(``%h/.local/bin/…``) — a test keeps them equal.

What :func:`install` does:

1. renders the units with ``ExecStart=`` pointing at *this* installation's ``roundtabled`` (the
   venv's script next to ``sys.executable``, else the one on ``PATH``) and, with
   ``with_opencode``, at the ``opencode`` found on ``PATH`` (or the repository's pinned one);
   ``XDG_CONFIG_HOME``/``XDG_STATE_HOME``/``ROUNDTABLED_CONFIG`` set at install time are carried
   into the unit, so the service reads the same configuration and token file as this shell;
2. writes them atomically (temporary file, fsync, rename) into
   ``$XDG_CONFIG_HOME/systemd/user/`` with mode 0644;
3. runs ``systemctl --user daemon-reload`` and, with ``enable``, ``systemctl --user enable --now
   …``; when ``systemctl`` or the user manager is not available (containers, SSH without a
   session bus), prints the commands to run instead.

Exit codes: 0 units written (and enabled when asked and possible); 1 a file could not be written or
``systemctl`` failed against a reachable user manager.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from roundtabled.opencode.binary import find_opencode_binary
from roundtabled.service import config as cfg

__all__ = [
    "OPENCODE_UNIT",
    "ROUNDTABLED_UNIT",
    "find_opencode",
    "find_roundtabled",
    "install",
    "render_units",
    "unit_dir",
]

ROUNDTABLED_UNIT = "roundtabled.service"
OPENCODE_UNIT = "opencode-serve.service"

_DEFAULT_RT_BIN = "%h/.local/bin/roundtabled"
_DEFAULT_OC_BIN = "%h/.local/bin/opencode"
_DEFAULT_ENV_FILE = "%h/.config/roundtabled/env"

_ROUNDTABLED_TEMPLATE = """\
# roundtabled — multi-agent roundtable debates for OpenCode (systemd *user* unit).
#
# Install: `roundtabled install-service` (writes this file into ~/.config/systemd/user/ with
# ExecStart pointing at your roundtabled, then runs daemon-reload and enable --now), or by hand:
#   cp systemd/roundtabled.service ~/.config/systemd/user/   # fix ExecStart= first
#   systemctl --user daemon-reload && systemctl --user enable --now roundtabled
# Logs: journalctl --user -u roundtabled -f      Health: roundtabled doctor
# Settings: ~/.config/roundtabled/config.toml; secrets (OPENCODE_SERVER_PASSWORD=…) in
# ~/.config/roundtabled/env (mode 0600), read below. Changes: systemctl --user edit roundtabled

[Unit]
Description=roundtabled: multi-agent roundtable debates for OpenCode
Documentation=https://github.com/roundtabled/roundtabled#service
# Start after the OpenCode server when it runs as a user unit too (opencode-serve.service);
# harmless when it does not exist (the daemon waits for the server with back-off anyway).
After=network.target opencode-serve.service
Wants=opencode-serve.service
# Restart=on-failure, but give up after 5 failures in 5 minutes (then: roundtabled doctor).
StartLimitIntervalSec=300
StartLimitBurst=5

[Service]
# READY=1 is sent only after the first successful resync with the OpenCode server (the recovery
# scan of every roundtable left active); STATUS= shows the number of active roundtables.
Type=notify
NotifyAccess=main
ExecStart={exec_start} serve
Environment=PYTHONUNBUFFERED=1
# JSON lines for journald (journalctl --user -u roundtabled -o cat | jq); set text in the env file.
Environment=ROUNDTABLED_LOG_FORMAT=json
{extra_env}EnvironmentFile=-{env_file}
# The server may be down for a while at login: the daemon waits for it with back-off (0.5 → 30 s)
# and is restarted if it is still not ready after TimeoutStartSec.
TimeoutStartSec=120
# WATCHDOG=1 comes from the daemon's event loop every WatchdogSec/2: a blocked loop is restarted.
WatchdogSec=30
Restart=on-failure
RestartSec=3
# SIGTERM → the daemon stops within its shutdown window (shutdown_window, default 8 s) and exits
# 0; every roundtable's state is already persisted in its session and resumes at the next start.
TimeoutStopSec={timeout_stop}
KillMode=mixed

# Hardening that works in user units without unprivileged user namespaces (seccomp and
# no_new_privs based). Namespace-based options (ProtectSystem=, ProtectHome=, PrivateTmp=, …)
# need unprivileged user namespaces in a user manager and are left out on purpose; the daemon
# writes only under ~/.config/roundtabled and ~/.local/state/roundtabled.
NoNewPrivileges=yes
UMask=0077
LockPersonality=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
RestrictNamespaces=yes
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallFilter=~@privileged @resources
SystemCallErrorNumber=EPERM
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK

[Install]
WantedBy=default.target
"""

_OPENCODE_TEMPLATE = """\
# Example user unit for the OpenCode server itself (`opencode serve`), next to roundtabled.
#
# Install: `roundtabled install-service --with-opencode` (sets ExecStart to your `opencode`), or
# copy it to ~/.config/systemd/user/, fix ExecStart= and WorkingDirectory=, then
#   systemctl --user daemon-reload && systemctl --user enable --now opencode-serve
# Password: put OPENCODE_SERVER_PASSWORD=… in ~/.config/roundtabled/env (mode 0600); roundtabled
# reads the same file, so both sides agree.
# The TUI can attach to this server: opencode attach http://127.0.0.1:4096

[Unit]
Description=OpenCode server (opencode serve) for roundtabled
Documentation=https://opencode.ai/docs/server/
After=network.target
Before=roundtabled.service

[Service]
Type=simple
# The working directory is the default project of requests without ?directory=.
WorkingDirectory=%h
ExecStart={exec_start} serve --hostname {host} --port {port}
{extra_env}EnvironmentFile=-{env_file}
Restart=on-failure
RestartSec=3
TimeoutStopSec=20
KillMode=mixed

# No MemoryDenyWriteExecute=: the server runs on a JIT (Bun). Agents run tools (bash, edit) through
# this process, so it keeps the user's normal file access; only privilege escalation is closed.
NoNewPrivileges=yes
LockPersonality=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
SystemCallArchitectures=native

[Install]
WantedBy=default.target
"""

_CARRIED_ENV = ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "ROUNDTABLED_CONFIG")
"""Variables that decide where the configuration and token live; carried into the unit when
set at install time, so the service and the CLI agree."""


def _quote(arg: str) -> str:
    """One ExecStart= argument: ``%`` escaped, quoted when it holds whitespace or quotes."""
    if arg.startswith("%h/"):
        return arg  # a specifier we put there on purpose
    arg = arg.replace("%", "%%")
    if any(c.isspace() for c in arg) or '"' in arg or "\\" in arg:
        return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return arg


def _env_line(name: str, value: str) -> str:
    value = value.replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"')
    return f'Environment="{name}={value}"\n'


def unit_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/systemd/user`` (where the user manager looks for units)."""
    return cfg.xdg_config_home(env) / "systemd" / "user"


def find_roundtabled() -> str:
    """Absolute path of this installation's ``roundtabled`` script: next to ``sys.executable``
    (a venv's ``bin/``; not resolved, so the venv stays in the path), else on ``PATH``, else the
    default ``%h/.local/bin/roundtabled`` (pipx, ``pip install --user``)."""
    beside = Path(sys.executable).parent / "roundtabled"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.absolute())
    found = shutil.which("roundtabled")
    return str(Path(found).absolute()) if found else _DEFAULT_RT_BIN


def find_opencode() -> str | None:
    """Absolute path of ``opencode``: ``PATH`` first, else the repository's pinned one, else
    ``None``."""
    found = shutil.which("opencode")
    if found:
        return str(Path(found).absolute())
    try:
        return str(find_opencode_binary().absolute())
    except FileNotFoundError:
        return None


def _server_host_port(server_url: str) -> tuple[str, int]:

    parts = urlsplit(server_url)
    return parts.hostname or "127.0.0.1", parts.port or 4096


def render_units(
    *,
    roundtabled_bin: str = _DEFAULT_RT_BIN,
    opencode_bin: str = _DEFAULT_OC_BIN,
    env_file: str = _DEFAULT_ENV_FILE,
    carried_env: Mapping[str, str] | None = None,
    server_url: str = "http://127.0.0.1:4096",
    shutdown_window: float = 8.0,
) -> dict[str, str]:
    """The two unit files (name → text).

    Args:
        roundtabled_bin: ``ExecStart`` of the daemon (absolute path or a ``%h/…`` specifier).
        opencode_bin: ``ExecStart`` of ``opencode serve``.
        env_file: optional environment file both units read (``EnvironmentFile=-…``).
        carried_env: extra ``Environment=`` assignments for both units.
        server_url: the OpenCode server URL; its host and port go to ``opencode serve``.
        shutdown_window: the daemon's shutdown window (s); ``TimeoutStopSec`` is at least 22 s
            longer (and at least 30 s), so systemd never SIGKILLs a clean stop.
    """
    extra = "".join(_env_line(k, v) for k, v in sorted((carried_env or {}).items()))
    host, port = _server_host_port(server_url)
    path_dirs: list[str] = []
    if not opencode_bin.startswith("%"):
        # The npm launcher of opencode may need `node`; the user manager's PATH is minimal.
        for tool in (opencode_bin, shutil.which("node")):
            if tool:
                d = str(Path(tool).parent)
                if d not in path_dirs:
                    path_dirs.append(d)
    oc_extra = extra
    if path_dirs:
        oc_extra = _env_line("PATH", ":".join([*path_dirs, "/usr/local/bin", "/usr/bin", "/bin"]))
        oc_extra += extra
    return {
        ROUNDTABLED_UNIT: _ROUNDTABLED_TEMPLATE.format(
            exec_start=_quote(roundtabled_bin),
            extra_env=extra,
            env_file=env_file,
            timeout_stop=max(30, math.ceil(shutdown_window) + 22),
        ),
        OPENCODE_UNIT: _OPENCODE_TEMPLATE.format(
            exec_start=_quote(opencode_bin),
            extra_env=oc_extra,
            env_file=env_file,
            host=host,
            port=port,
        ),
    }


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same directory (fsync + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _systemctl(
    systemctl: str, args: Sequence[str], env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [systemctl, "--user", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


_NO_MANAGER = (
    "failed to connect to bus",
    "no medium found",
    "xdg_runtime_dir",
    "not been booted with systemd",
    "system has not been booted",
    "connection refused",
    "no such file or directory",
)


def _password_hint(settings: cfg.Settings, env: Mapping[str, str]) -> str | None:
    """A hint when the password comes only from this shell's environment (the service will not
    see it)."""
    if settings.server_password is None:
        return None
    base = cfg.xdg_config_home(env) / "roundtabled"
    for candidate in (base / "env", cfg.default_config_file(env)):
        try:
            if "PASSWORD" in candidate.read_text().upper():
                return None
        except OSError:
            continue
    return (
        "note: the OpenCode server password is set in this shell only; the service does not "
        f"see your shell's environment. Put OPENCODE_SERVER_PASSWORD=… into {base / 'env'} "
        "(chmod 600) or server_password into config.toml."
    )


def install(
    settings: cfg.Settings,
    *,
    enable: bool,
    with_opencode: bool,
    env: Mapping[str, str] | None = None,
    out: TextIO | None = None,
) -> int:
    """Install the user units (see the module docstring). Returns the exit code.

    Args:
        settings: effective settings (the server URL decides ``opencode serve``'s host/port).
        enable: run ``systemctl --user enable --now`` (else only write + daemon-reload).
        with_opencode: also install ``opencode-serve.service``.
        env: the environment (default ``os.environ``): XDG directories, ``PATH`` for
            ``systemctl``.
        out: where messages go (default ``sys.stdout``; errors to ``sys.stderr``).
    """
    env = dict(os.environ if env is None else env)
    out = out or sys.stdout
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    carried = {k: env[k] for k in _CARRIED_ENV if env.get(k)}
    if carried.get("XDG_CONFIG_HOME") == str(home / ".config"):
        del carried["XDG_CONFIG_HOME"]
    if carried.get("XDG_STATE_HOME") == str(home / ".local/state"):
        del carried["XDG_STATE_HOME"]
    env_file_path = cfg.xdg_config_home(env) / "roundtabled" / "env"
    env_file = (
        _DEFAULT_ENV_FILE
        if env_file_path == home / ".config/roundtabled/env"
        else str(env_file_path)
    )
    opencode_bin = find_opencode() if with_opencode else None
    units = render_units(
        roundtabled_bin=find_roundtabled(),
        opencode_bin=opencode_bin or _DEFAULT_OC_BIN,
        env_file=env_file,
        carried_env=carried,
        server_url=settings.server_url,
        shutdown_window=settings.shutdown_window,
    )
    names = [ROUNDTABLED_UNIT] + ([OPENCODE_UNIT] if with_opencode else [])
    target = unit_dir(env)
    for name in names:
        path = target / name
        try:
            _write_atomic(path, units[name])
        except OSError as exc:
            print(f"Error: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(f"wrote {path}", file=out)
    if with_opencode and opencode_bin is None:
        print(
            f"note: `opencode` was not found on PATH; edit ExecStart= in {target / OPENCODE_UNIT}",
            file=out,
        )
    hint = _password_hint(settings, env)
    if hint:
        print(hint, file=out)
    shell_only = sorted(
        k
        for k in env
        if k.startswith(cfg.ENV_PREFIX) and k not in (*_CARRIED_ENV, "ROUNDTABLED_URL")
    )
    if shell_only:
        print(
            f"note: {', '.join(shell_only)} set in this shell will not reach the service; put "
            f"them into {env_file_path} or config.toml.",
            file=out,
        )

    commands = [["daemon-reload"]]
    if enable:
        commands.append(["enable", "--now", *reversed(names)])
    manual = "\n".join("  systemctl --user " + " ".join(c) for c in commands)
    systemctl = shutil.which("systemctl", path=env.get("PATH"))
    if systemctl is None:
        print(f"systemctl not found; run these in your login session:\n{manual}", file=out)
        return 0
    for args in commands:
        try:
            proc = _systemctl(systemctl, args, env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"Error: systemctl --user {' '.join(args)} failed: {exc}", file=sys.stderr)
            return 1
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip()
            if args == commands[0] and any(s in detail.lower() for s in _NO_MANAGER):
                print(
                    f"the systemd user manager is not reachable here ({detail.splitlines()[0]}); "
                    f"run these in your login session:\n{manual}",
                    file=out,
                )
                return 0
            print(f"Error: systemctl --user {' '.join(args)} failed: {detail}", file=sys.stderr)
            return 1
        print(f"ran systemctl --user {' '.join(args)}", file=out)
    if enable:
        print(
            "enabled. Logs: journalctl --user -u roundtabled -f   Check: roundtabled doctor\n"
            "To keep it running after you log out: loginctl enable-linger $USER",
            file=out,
        )
    else:
        print(
            "not enabled; to start it now and at login:\n  systemctl --user enable --now "
            + " ".join(reversed(names)),
            file=out,
        )
    return 0
