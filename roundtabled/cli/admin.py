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


def cmd_install_tool(args: argparse.Namespace, settings: cfg.Settings) -> int:
    """Install the tool shims and the observer agent; say what changed and what to do next.

    Raises:
        CliError: ``--project`` and ``--global`` together, or a ``--project`` directory that
            does not exist (a typo must not install into a new directory nobody uses).
    """
    from roundtabled.service import install

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
    before = _contents(target)
    paths = install.install_tools(
        target, control_url=control_url(settings), token_file=settings.token_file
    )
    changed = 0
    for p in paths:
        same = before.get(p) is not None and before.get(p) == _read(p)
        changed += not same
        print(f"{'unchanged' if same else 'installed'} {p}")
    if changed:
        where = "every project" if args.global_ else f"the project {target.parent}"
        print(
            f"Next: restart `opencode serve` (or reopen OpenCode) so that it loads the tools for "
            f"{where}; then check with: roundtabled doctor"
            + ("" if args.global_ else f" --directory {target.parent}")
        )
    else:
        print("Nothing changed: the tools were already installed.")
    return EXIT_OK


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _contents(target: Path) -> dict[Path, bytes | None]:
    """The files an install into ``target`` writes, as they are now (``None``: absent)."""
    from roundtabled.service import install

    return {p: _read(p) for p in install.install_paths(target)}


def cmd_install_service(args: argparse.Namespace, settings: cfg.Settings) -> int:
    from roundtabled.service import systemd as service

    return service.install(settings, enable=not args.no_enable, with_opencode=args.with_opencode)


async def cmd_doctor(args: argparse.Namespace, settings: cfg.Settings) -> int:
    from roundtabled.service import doctor

    directory: Path | None = None
    if args.directory:
        directory = existing_directory(args.directory)
    return await doctor.run(settings, control_url(settings), cwd=directory)


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
