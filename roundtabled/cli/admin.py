"""Commands that set things up: ``serve``, ``config``, ``doctor``, ``install-tool``,
``install-service``."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path

from roundtabled import config as cfg
from roundtabled.cli.client import EXIT_OK, EXIT_USAGE, CliError, control_url


def cmd_config(args: argparse.Namespace, settings: cfg.Settings) -> int:
    print(json.dumps(settings.masked(), indent=2, default=str))
    return EXIT_OK


def cmd_presets(args: argparse.Namespace, settings: cfg.Settings) -> int:
    """List the configured presets (``[presets.NAME]`` of config.toml), one line each."""
    data = settings.masked()["presets"]
    if args.json:
        print(json.dumps(data, indent=2))
        return EXIT_OK
    if not data:
        print(
            "No presets configured. Add [presets.NAME] tables to "
            f"{args.config or cfg.default_config_file()} (see examples/config.toml)."
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
    from roundtabled import install

    if args.global_ and args.project:
        raise CliError("Error: give either --project DIR or --global, not both", EXIT_USAGE)
    target = install.tool_targets(
        Path(args.project) if args.project else (None if args.global_ else Path.cwd()),
        args.global_,
        os.environ,
    )
    paths = install.install_tools(
        target, control_url=control_url(settings), token_file=settings.token_file
    )
    for p in paths:
        print(f"installed {p}")
    return EXIT_OK


def cmd_install_service(args: argparse.Namespace, settings: cfg.Settings) -> int:
    from roundtabled import service

    return service.install(settings, enable=not args.no_enable, with_opencode=args.with_opencode)


async def cmd_doctor(args: argparse.Namespace, settings: cfg.Settings) -> int:
    from roundtabled import doctor

    return await doctor.run(settings, control_url(settings))


def cmd_serve(args: argparse.Namespace, settings: cfg.Settings) -> int:
    from roundtabled import daemon
    from roundtabled.logs import setup_logging

    secrets = [settings.server_password.get_secret_value()] if settings.server_password else []
    setup_logging(settings.log_format, settings.log_level, secrets)
    return asyncio.run(daemon.serve(settings))
