"""Commands that set things up: ``serve``, ``config``, ``doctor``, ``install-tool``,
``install-service``.

Each command imports its service module (daemon, doctor, install, systemd) when it runs, not at
the top: start-up speed, so that every other command does not load them."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path

from roundtabled.cli.client import EXIT_OK, EXIT_USAGE, CliError, control_url
from roundtabled.service import config as cfg


def cmd_config(args: argparse.Namespace, settings: cfg.Settings) -> int:
    print(json.dumps(settings.masked(), indent=2, default=str))
    return EXIT_OK


PRESET_EXAMPLE = """\
[presets.design-review]
agents = ["pm", "dev", "rv"]
rounds = 4
until = "converged"
budget = { tokens = 150000 }
title_prefix = "[design] \""""
"""A preset as the config file has it (the one of examples/config.toml in the repository,
which an installed wheel does not carry): printed where none is configured."""


def cmd_presets(args: argparse.Namespace, settings: cfg.Settings) -> int:
    """List the configured presets (``[presets.NAME]`` of config.toml), one line each."""
    data = settings.masked()["presets"]
    if args.json:
        print(json.dumps(data, indent=2))
        return EXIT_OK
    if not data:
        print(
            "No presets configured. Add [presets.NAME] tables to "
            f"{args.config or cfg.default_config_file()}, for example:\n\n{PRESET_EXAMPLE}"
        )
        return EXIT_OK
    for name, spec in sorted(data.items()):
        parts = []
        for key, value in spec.items():
            if value is None or key == "budget":
                continue
            shown = ",".join(value) if isinstance(value, list) else value
            parts.append(f"{key}={shown!r}" if key == "title_prefix" else f"{key}={shown}")
        budget = {k: v for k, v in (spec.get("budget") or {}).items() if v is not None}
        if budget:
            parts.append("budget=" + ",".join(f"{k}:{v:g}" for k, v in budget.items()))
        print(f"{name}: " + " ".join(parts))
    return EXIT_OK


DETECT_TIMEOUT_S = 3.0
"""How long install-tool asks the configured server for its major, in seconds per request."""


def cmd_install_tool(args: argparse.Namespace, settings: cfg.Settings) -> int:
    """Install the tool shims and the observer agent (OpenCode 1.x) or the roundtabled plugin
    (2.x); say which major and why, what changed and what to do next.

    The major: ``--opencode 1|2``, else the one of the server at ``server_url``, else 1
    (:func:`roundtabled.service.install.choose_major`).

    Raises:
        CliError: a bad ``--opencode``, or one contradicting the major of the server that
            answers (without ``--force``: nothing written); ``--project`` and ``--global``
            together, or a ``--project`` directory that does not exist (a typo must not install
            into a new directory nobody uses).
    """
    from roundtabled.opencode.detect import detect_server
    from roundtabled.service import install

    try:
        flag = install.parse_major(getattr(args, "opencode", None))
    except install.InstallError as exc:
        raise CliError(f"Error: {exc}", EXIT_USAGE) from exc
    if args.global_ and args.project:
        raise CliError("Error: give either --project DIR or --global, not both", EXIT_USAGE)
    project: Path | None = None
    if not args.global_:
        project = Path(args.project).expanduser() if args.project else Path.cwd()
        if not project.is_dir():
            what = "is not a directory" if project.exists() else "does not exist"
            raise CliError(
                f"Error: --project: {str(project)!r} {what}; give the root of an existing "
                "project (the directory holding its opencode.json), or --global",
                EXIT_USAGE,
            )
    target = install.tool_targets(project, args.global_, os.environ)
    password = settings.server_password.get_secret_value() if settings.server_password else None
    found = asyncio.run(
        detect_server(
            settings.server_url,
            password=password,
            username=settings.server_username,
            timeout=DETECT_TIMEOUT_S,
        )
    )
    contradiction = install.contradiction_line(flag, found, settings.server_url)
    if contradiction is not None and not getattr(args, "force", False):
        raise CliError(f"Error: {contradiction}", EXIT_USAGE)  # nothing written
    major, why = install.choose_major(flag, found, settings.server_url)
    print(why)
    before = _contents(target, major)
    paths = install.install_tools(
        target, control_url=control_url(settings), token_file=settings.token_file, major=major
    )
    changed = 0
    for p in paths:
        same = before.get(p) is not None and before.get(p) == _read(p)
        changed += not same
        print(f"{'unchanged' if same else 'installed'} {p}")
    if changed:
        where = "every project" if args.global_ else f"the project {target.parent}"
        if major == 2:
            print(
                f"Next: restart `opencode serve` so that it loads the plugin "
                f"`{install.V2_PLUGIN_ID}` (its tools and context hook) for {where}"
            )
        else:
            print(
                f"Next: restart `opencode serve` (or reopen OpenCode) so that it loads the tools "
                f"for {where}; then check with: roundtabled doctor"
                + ("" if args.global_ else f" --directory {target.parent}")
            )
    else:
        print("Nothing changed: the tools were already installed.")
    twin = install.tool_targets(Path.cwd() if args.global_ else None, not args.global_, os.environ)
    for note in (
        install.other_major_line(target, major),
        install.duplicate_plugin_line(target, twin, major),
    ):
        if note is not None:
            print(note)
    return EXIT_OK


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _contents(target: Path, major: int) -> dict[Path, bytes | None]:
    """The files an install into ``target`` for OpenCode ``major`` writes, as they are now
    (``None``: absent)."""
    from roundtabled.service import install

    return {p: _read(p) for p in install.install_paths(target, major)}


def cmd_install_service(args: argparse.Namespace, settings: cfg.Settings) -> int:
    from roundtabled.service import systemd as service

    return service.install(settings, enable=not args.no_enable, with_opencode=args.with_opencode)


async def cmd_doctor(args: argparse.Namespace, settings: cfg.Settings) -> int:
    from roundtabled.service import doctor

    directory: Path | None = None
    if args.directory:
        directory = existing_directory(args.directory)
    # the file the settings were read from (--config), not the default one
    conf = Path(args.config) if getattr(args, "config", None) else None
    return await doctor.run(settings, control_url(settings), cwd=directory, config_file=conf)


def existing_directory(value: str, flag: str = "--directory") -> Path:
    """``value`` as an absolute path of an existing directory.

    Raises:
        CliError: it does not exist or is no directory (exit code 2, the flag named).
    """
    path = Path(value).expanduser().resolve()
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise CliError(f"Error: {flag}: {str(path)!r} {what}", EXIT_USAGE)
    return path


def cmd_serve(args: argparse.Namespace, settings: cfg.Settings) -> int:
    from roundtabled.service import daemon
    from roundtabled.service.logs import setup_logging

    secrets = [settings.server_password.get_secret_value()] if settings.server_password else []
    setup_logging(settings.log_format, settings.log_level, secrets)
    return asyncio.run(daemon.serve(settings))
