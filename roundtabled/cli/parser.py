"""The argument parser: one ``add_*`` function per command, each binding its handler.

A handler is ``(args, settings) -> int`` or its coroutine form; ``main`` runs either. To add a
command, write its handler in the module of its kind and one ``add_*`` function here, then call
it from :func:`build_parser`.
"""

from __future__ import annotations

import argparse
from typing import get_args

from roundtabled import __version__
from roundtabled.cli import admin, debate, show
from roundtabled.cli.evaluate import add_eval
from roundtabled.cli.usage import UsageParser
from roundtabled.core import protocols
from roundtabled.core.state import DEFAULT_ADAPTIVE_THRESHOLD, ContextMode, Opening, Until


def add_session(s: argparse.ArgumentParser) -> None:
    """The ``SES`` argument of every command that names one roundtable."""
    s.add_argument(
        "session",
        metavar="SES",
        help="the roundtable: its session id (ses_…, as printed by start and list)",
    )


def add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("serve", help="run the daemon (beside `opencode serve`)")
    s.add_argument("--server-url", help="OpenCode server URL (default http://127.0.0.1:4096)")
    s.add_argument("--control-host", help="control API host (loopback) or unix:/path")
    s.add_argument("--control-port", type=int, help="control API port (default 4747)")
    s.add_argument(
        "--token-file", help="control API token file (default $XDG_CONFIG_HOME/roundtabled/token)"
    )
    s.add_argument("--turn-timeout", type=float, help="seconds per turn before abort+skip")
    s.add_argument("--loop-threshold", type=float, help="Jaccard threshold of loop detection")
    s.add_argument("--resync-period", type=float, help="seconds between resyncs")
    s.add_argument("--permission-policy", help="reject | allow-once | ask")
    s.add_argument("--log-format", help="text | json")
    s.add_argument("--log-level", help="debug | info | warning | error")
    s.add_argument(
        "--directory",
        action="append",
        dest="directories",
        metavar="DIR",
        help="project directory to scan at start-up (repeatable)",
    )
    s.set_defaults(handler=admin.cmd_serve)


def add_start(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("start", help="run a roundtable through the daemon and print it")
    s.add_argument("prompt", help="the topic; - reads it from standard input, @FILE from a file")
    s.add_argument(
        "--agents", help="comma-separated agent names in order (required unless --preset has them)"
    )
    s.add_argument("--rounds", type=int, help="rounds (1-50, default 1 or the preset's)")
    s.add_argument("--observer", help="observer agent (default: built-in)")
    s.add_argument("--title", help="S2 title (default from the topic)")
    s.add_argument("--parent", metavar="SES", help="parent session S1 to deliver the result to")
    s.add_argument("--directory", help="project directory (default: the server's)")
    s.add_argument("--turn-timeout", type=float, help="seconds per turn for this roundtable")
    add_deliberation_flags(s)
    s.add_argument(
        "--protocol",
        choices=protocols.NAMES,
        help="how the seats reach an answer: "
        + "; ".join(f"{p.name}: {p.summary}" for p in protocols.registry().values())
        + " (docs/deliberation.md, Protocols)",
    )
    s.add_argument(
        "--adaptive-threshold",
        type=float,
        metavar="SHARE",
        help="adaptive only: the confidence-weighted share (above 0.5, at most 1; default "
        f"{DEFAULT_ADAPTIVE_THRESHOLD:g}) of the opening's leading stance at which it stops "
        "without a debate",
    )
    s.add_argument(
        "--opening",
        choices=get_args(Opening),
        help="round 1: one seat after another (default), or 'independent': every seat at once, "
        "each in its own child session seeing only the topic; round 2 sees every opening",
    )
    s.add_argument(
        "--preset", metavar="NAME", help="a [presets.NAME] panel of config.toml (flags override it)"
    )
    s.add_argument(
        "--side",
        action="append",
        metavar="SEAT=SIDE",
        help="give a seat a side to argue (repeatable): for, against, neutral, or a one-line "
        "brief, e.g. --side rv=against; its position is shown but not counted toward a consensus",
    )
    s.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (seats, models, requests, estimated tokens and cost) and run nothing",
    )
    s.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no turns or notes: the result (stdout), the id and any warning (stderr)",
    )
    s.set_defaults(handler=debate.cmd_start)


def add_deliberation_flags(s: argparse.ArgumentParser) -> None:
    """``--until``, ``--budget-*`` and ``--context`` (start and extend)."""
    s.add_argument(
        "--until",
        choices=get_args(Until),
        help="stop after all rounds (default) or once the panel converged",
    )
    s.add_argument(
        "--budget-tokens", type=int, metavar="N", help="stop before N tokens (input + output)"
    )
    s.add_argument("--budget-usd", type=float, metavar="X", help="stop before X US dollars")
    s.add_argument(
        "--budget-seconds", type=float, metavar="S", help="stop before S seconds of wall time"
    )
    s.add_argument(
        "--context",
        choices=get_args(ContextMode),
        help="full: seats see every reply (default). recent: a seat's request holds the topic, "
        "round 1, a digest of the rounds between and the last round (docs/deliberation.md); it "
        "needs the roundtable plugin in the server (roundtabled install-tool) and is refused "
        "without it",
    )


def add_extend(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("extend", help="continue a concluded roundtable")
    add_session(s)
    s.add_argument("prompt", help="what to discuss next; - for standard input, @FILE for a file")
    s.add_argument("--rounds", type=int, default=1, help="rounds to add (default 1)")
    s.add_argument(
        "--mode",
        choices=["continuation", "new-topic"],
        help="continuation: the same question, taken further; new-topic: PROMPT is a new "
        "question for the same panel (default: continuation when PROMPT starts with words such "
        "as 'continue', 'dig deeper' or 'keep going', else new-topic)",
    )
    add_deliberation_flags(s)
    s.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no turns or notes: the result (stdout), the id and any warning (stderr)",
    )
    s.set_defaults(handler=debate.cmd_extend)


def add_agents(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "agents",
        help="list the agents a roundtable can seat (description, mode, model, colour)",
    )
    s.add_argument(
        "--directory",
        metavar="DIR",
        help="the project whose agents to list (default: the server's directory)",
    )
    s.add_argument("--json", action="store_true", help="print the agents as JSON")
    s.set_defaults(handler=show.cmd_agents)


def add_list(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "list",
        help="active and recent roundtables (read from the OpenCode server: also after a "
        "daemon restart)",
    )
    s.add_argument("--all", action="store_true", help="every roundtable, not only the latest")
    s.add_argument(
        "--limit",
        type=int,
        default=20,
        help="how many recent roundtables (1-1000, default 20; active ones are always listed)",
    )
    s.add_argument("--json", action="store_true", help="print the rows as JSON")
    s.set_defaults(handler=show.cmd_list)


def add_status(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("status", help="one roundtable's status (also after a daemon restart)")
    add_session(s)
    s.add_argument("--json", action="store_true", help="print the status as JSON")
    s.set_defaults(handler=show.cmd_status)


def add_watch(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "watch", help="print turns as they finish, then the result (Ctrl-C stops watching only)"
    )
    add_session(s)
    s.set_defaults(handler=debate.cmd_watch)


def add_cancel(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("cancel", help="stop a roundtable (abort the turn in flight)")
    add_session(s)
    s.add_argument(
        "--summarize",
        action="store_true",
        help="let the observer consolidate what exists (one more model request)",
    )
    s.set_defaults(handler=debate.cmd_cancel)


def add_export(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("export", help="export a debate as Markdown or JSON")
    add_session(s)
    s.add_argument("--format", choices=["md", "json"], default="md", help="md (default) or json")
    s.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE (default: standard output)"
    )
    s.set_defaults(handler=show.cmd_export)


def add_presets(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("presets", help="list the panels configured as [presets.NAME]")
    s.add_argument("--json", action="store_true", help="print them as JSON")
    s.set_defaults(handler=admin.cmd_presets)


def add_config(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("config", help="print the effective configuration (secrets masked)")
    s.set_defaults(handler=admin.cmd_config)


def add_doctor(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "doctor",
        help="check the server, auth, stream, tools, agents, daemon (for the project in the "
        "current directory, or --directory)",
    )
    s.add_argument(
        "--directory",
        metavar="DIR",
        help="the project to check the tools and agents for (default: the current directory)",
    )
    s.set_defaults(handler=admin.cmd_doctor)


def add_install_tool(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("install-tool", help="install the roundtable/available_agents tools")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--project", metavar="DIR", help="install into DIR/.opencode (default: cwd)")
    g.add_argument(
        "--global",
        dest="global_",
        action="store_true",
        help="install into $XDG_CONFIG_HOME/opencode",
    )
    s.add_argument(
        "--opencode",
        metavar="1|2",
        help="the OpenCode major to install for (default: the major of the server at server_url; "
        "1 when none answers)",
    )
    s.add_argument(
        "--force",
        action="store_true",
        help="install for --opencode N even though the server at server_url is the other major",
    )
    s.set_defaults(handler=admin.cmd_install_tool)


def add_install_service(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("install-service", help="install and enable the systemd user units")
    s.add_argument("--no-enable", action="store_true", help="only write the unit files")
    s.add_argument(
        "--with-opencode", action="store_true", help="also install opencode-serve.service"
    )
    s.set_defaults(handler=admin.cmd_install_service)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (every command has ``--help``; usage errors are one line, see
    :mod:`roundtabled.cli.usage`)."""
    p: argparse.ArgumentParser = UsageParser(
        prog="roundtabled",
        description="Multi-agent roundtable debates for OpenCode: a daemon beside `opencode "
        "serve` and the commands that drive it.",
    )
    p.add_argument("--version", action="version", version=f"roundtabled {__version__}")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="TOML config file (default: $XDG_CONFIG_HOME/roundtabled/config.toml)",
    )
    # Not required: a bare `roundtabled` prints this help (main) instead of a usage error.
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for add in (
        add_serve,
        add_start,
        add_extend,
        add_agents,
        add_list,
        add_status,
        add_watch,
        add_cancel,
        add_export,
        add_presets,
        add_config,
        add_doctor,
        add_eval,
        add_install_tool,
        add_install_service,
    ):
        add(sub)
    for command in sub.choices.values():
        if isinstance(command, UsageParser):
            command.commands = dict(sub.choices)
    return p


# Settings `serve` takes from its flags (the other commands read the configuration only).
SERVE_OVERRIDES = (
    "server_url",
    "control_host",
    "control_port",
    "token_file",
    "turn_timeout",
    "loop_threshold",
    "resync_period",
    "permission_policy",
    "log_format",
    "log_level",
    "directories",
)


def cli_overrides(args: argparse.Namespace) -> dict[str, object]:
    """The settings given as ``serve`` flags (``{key: value}``, only those given)."""
    return {k: getattr(args, k) for k in SERVE_OVERRIDES if getattr(args, k, None) is not None}
