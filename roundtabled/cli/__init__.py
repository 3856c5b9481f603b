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

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

__all__ = ["main"]

_INTERRUPTED = 130  # EXIT_INTERRUPTED, without importing the client for it


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``roundtabled`` console script; a Ctrl-C at any point (also while
    the modules load) ends it with exit code 130 and no traceback."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return _INTERRUPTED


def unknown_arguments_error(parser: argparse.ArgumentParser, args: Any, extras: list[str]) -> None:
    """Report ``extras`` (arguments no parser took) in one line for the command they were given
    to, with a ``did you mean`` for a mistyped flag (:mod:`roundtabled.cli.usage`).

    Raises:
        SystemExit: (exit 2) always.
    """
    import argparse

    from roundtabled.cli.usage import UsageParser

    target = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and args.command in action.choices:
            target = action.choices[args.command]
    if isinstance(target, UsageParser):
        target.unknown_arguments(extras)
    target.error("unrecognized arguments: " + " ".join(extras))


def _main(argv: Sequence[str] | None) -> int:
    # Imported here, not at the top: loading them takes about a second or more (pydantic,
    # aiohttp), and a Ctrl-C during that time must reach main's handler, not print a traceback
    # from the console script's `from roundtabled.cli import main`.
    import asyncio
    import inspect
    import signal
    from pathlib import Path

    from roundtabled.cli.client import (
        EXIT_ERROR,
        EXIT_INTERRUPTED,
        EXIT_OK,
        EXIT_USAGE,
        CliError,
        session_arg,
    )
    from roundtabled.cli.debate import interrupted_note
    from roundtabled.cli.parser import build_parser, cli_overrides
    from roundtabled.service import config as cfg

    # `roundtabled list | head`: a closed pipe ends the command quietly, as for any Unix tool.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        unknown_arguments_error(parser, args, extras)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    for warning in cfg.unknown_environment():
        print(warning, file=sys.stderr)
    try:
        if getattr(args, "session", None) is not None:
            args.session = session_arg(args.session)
        settings = cfg.load_settings(
            cli_overrides(args) if args.command == "serve" else None,
            config_file=Path(args.config) if args.config else None,
        )
    except cfg.ConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CliError as exc:
        print(str(exc), file=sys.stderr)
        return exc.code
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
