"""Command line of roundtabled.

``roundtabled serve`` runs the daemon; every other command talks to a running daemon through its
control API (docs/control-api.md), reading the same settings and token file.

Modules: ``client`` (control API client, ``CliError``, exit codes), ``parser`` (one ``add_*`` per
command), ``debate`` (start, extend, watch, cancel), ``show`` (agents, list, status, export),
``admin`` (serve, config, doctor, install-tool, install-service), ``follow`` (a running
roundtable's turns and progress), ``render`` (colours, turn headers), ``topic`` (``@FILE``/``-``).

Exit codes: 0 success; 1 error (daemon unreachable, server error); 2 bad input or configuration
(the message names the field); 3 the roundtable ended without a normal conclusion (every agent
failed, aborted, cancelled); 130 interrupted.
"""

from __future__ import annotations

import asyncio
import inspect
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from roundtabled import config as cfg
from roundtabled.cli.client import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNCONCLUDED,
    EXIT_USAGE,
    CliError,
    ControlClient,
    control_url,
)
from roundtabled.cli.debate import interrupted_note
from roundtabled.cli.parser import build_parser, cli_overrides
from roundtabled.cli.topic import read_topic

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNCONCLUDED",
    "EXIT_USAGE",
    "CliError",
    "ControlClient",
    "build_parser",
    "control_url",
    "main",
    "read_topic",
]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``roundtabled`` console script."""
    # `roundtabled list | head`: a closed pipe ends the command quietly, as for any Unix tool.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    for warning in cfg.unknown_environment():
        print(warning, file=sys.stderr)
    try:
        settings = cfg.load_settings(
            cli_overrides(args) if args.command == "serve" else None,
            config_file=Path(args.config) if args.config else None,
        )
    except cfg.ConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        outcome = args.handler(args, settings)
        if inspect.iscoroutine(outcome):
            outcome = asyncio.run(outcome)
        return int(outcome)
    except CliError as exc:
        msg = str(exc)
        print(msg if msg.startswith("Error:") else f"Error: {msg}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        note = interrupted_note(args)
        if note:
            print(f"\n{note}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # last resort: a message, not a traceback
        from roundtabled.errors import RoundtableError

        if isinstance(exc, RoundtableError):
            print(f"Error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
