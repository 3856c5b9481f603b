"""Command line of roundtabled.

``roundtabled serve`` runs the daemon; every other command talks to a running daemon through its
control API (docs/control-api.md), reading the same settings and token file.

Exit codes: 0 success; 1 error (daemon unreachable, server error); 2 bad input or configuration
(the message names the field); 3 the roundtable ended without a normal conclusion (every agent
failed, aborted, cancelled); 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from roundtabled import __version__
from roundtabled import config as cfg

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_UNCONCLUDED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class CliError(Exception):
    """A failure to report to the user (``code`` is the exit code)."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


# ----------------------------------------------------------------------------------------------
# Control API client
# ----------------------------------------------------------------------------------------------


class ControlClient:
    """Async client of the daemon's control API.

    Args:
        base_url: e.g. ``http://127.0.0.1:4747``.
        token_file: the daemon's token file (read per client).
    """

    def __init__(self, base_url: str, token_file: Path) -> None:
        self.base_url = base_url.rstrip("/")
        self.token_file = token_file
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ControlClient:
        try:
            token = self.token_file.read_text().strip()
        except OSError as exc:
            raise CliError(
                f"cannot read the token file {self.token_file}: {exc.strerror}. "
                "Is `roundtabled serve` running with the same configuration?"
            ) from None
        self._http = aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"})
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.close()

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> Any:
        """One request; returns decoded JSON or text. Raises :class:`CliError`."""
        assert self._http is not None
        try:
            async with self._http.request(
                method,
                self.base_url + path,
                params=params,
                data=orjson.dumps(body) if body is not None else None,
                headers={"content-type": "application/json"} if body is not None else None,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as resp:
                raw = await resp.read()
                ctype = resp.headers.get("content-type", "")
                data: Any = orjson.loads(raw) if "json" in ctype and raw else raw.decode()
                if resp.status >= 400:
                    msg = data.get("error") if isinstance(data, dict) else str(data)
                    raise CliError(
                        str(msg), EXIT_USAGE if resp.status in (400, 404) else EXIT_ERROR
                    )
                return data
        except aiohttp.ClientConnectionError:
            raise CliError(
                f"Error: roundtabled is not running at {self.base_url}. Start it "
                "with: roundtabled serve  (or: systemctl --user start roundtabled)"
            ) from None
        except TimeoutError:
            raise CliError(
                f"Error: roundtabled at {self.base_url} did not answer within {timeout:g} s"
            ) from None

    async def stream(self, path: str, opened: asyncio.Event | None = None) -> Any:
        """Iterate over the ``data:`` items of an SSE route; ``opened`` is set once the route
        answered (the daemon subscribes before it answers)."""
        assert self._http is not None
        try:
            async with self._http.get(
                self.base_url + path, timeout=aiohttp.ClientTimeout(total=None, sock_read=60)
            ) as resp:
                if resp.status >= 400:
                    data = orjson.loads(await resp.read())
                    raise CliError(str(data.get("error")), EXIT_USAGE)
                if opened is not None:
                    opened.set()
                async for line in resp.content:
                    if line.startswith(b"data: "):
                        yield orjson.loads(line[6:])
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError):
            ses = path.split("/")[3] if path.count("/") >= 4 else "SES"
            raise CliError(
                f"Error: lost the connection to roundtabled at {self.base_url} (it stopped or "
                f"restarted); the roundtable goes on when it is back: roundtabled watch {ses}"
            ) from None


def control_url(settings: cfg.Settings) -> str:
    """The daemon's control URL from the settings (``ROUNDTABLED_URL`` overrides)."""
    override = os.environ.get("ROUNDTABLED_URL")
    if override:
        return override
    return f"http://{settings.control_host}:{settings.control_port}"


# ----------------------------------------------------------------------------------------------
# Presentation
# ----------------------------------------------------------------------------------------------


def _color(hexcolor: str | None, text: str) -> str:
    if not hexcolor or not sys.stdout.isatty() or os.environ.get("NO_COLOR"):
        return text
    h = hexcolor.lstrip("#")
    if len(h) != 6:
        return text
    r, g, b = int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)
    return f"\x1b[1;38;2;{r};{g};{b}m{text}\x1b[0m"


def _print_turn(entry: dict[str, Any], colors: dict[str, str]) -> None:
    kind = entry.get("kind", "turn")
    agent = str(entry.get("agent"))
    name = _color(colors.get(agent), agent)
    if kind == "user":
        head = f"── the user (round {entry.get('round')}) ──"
    elif kind == "observer":
        head = f"── observer {name} ──"
    elif kind == "interjection":
        head = f"── {name} (reply to the user) ──"
    else:
        head = f"── {name} · round {entry.get('round')} ──"
    print(head)
    if entry.get("hasError"):
        print(f"  [{'cut off' if entry.get('cutOff') else 'failed'}: {entry.get('error')}]")
    text = str(entry.get("response") or "").strip()
    if text:
        print(text if len(text) <= 4000 else text[:4000] + " …")
    for tool in entry.get("toolCalls") or []:
        print(f"  [tool {tool.get('toolName')}] {str(tool.get('outputPreview'))[:200]}")
    print(flush=True)  # stream: a pipe must see each turn when it finishes


async def _follow(
    cc: ControlClient, ses: str, *, colors: dict[str, str], show_turns: bool = True
) -> dict[str, Any]:
    """Print the turns of ``ses`` as they finish until it is done; returns the final result.

    On a terminal, stderr carries one progress line (round, agent speaking, elapsed seconds since
    the roundtable started) refreshed every second. The observer's turn is not printed: its
    summary is part of the final result text.
    """
    started = time.monotonic()
    progress: dict[str, Any] = {"round": None, "total": None, "agent": None}
    try:
        st = await cc.call("GET", f"/v1/roundtables/{ses}")
        started -= float(st.get("elapsed") or 0)
        progress.update(round=st.get("round"), total=st.get("totalRounds"), agent=st.get("agent"))
    except CliError:
        pass  # an unknown roundtable: the progress feed below reports it
    tty = sys.stderr.isatty()

    def draw() -> None:
        if not tty or not progress["agent"]:
            return
        total = f"/{progress['total']}" if progress["total"] else ""
        sys.stderr.write(
            f"\r\x1b[Kround {progress['round']}{total} · {progress['agent']} is speaking · "
            f"{time.monotonic() - started:.0f}s"
        )
        sys.stderr.flush()

    def clear() -> None:
        if tty:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    async def tick() -> None:
        while True:
            draw()
            await asyncio.sleep(1.0)

    # Subscribe first, then print the turns that finished before (a fast first turn, or `watch`
    # attaching mid-debate), then follow the feed, skipping what was already printed.
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    opened = asyncio.Event()
    failure: list[BaseException] = []

    async def pump() -> None:
        try:
            async for item in cc.stream(f"/v1/roundtables/{ses}/events", opened):
                await queue.put(item)
        except Exception as exc:
            failure.append(exc)
        finally:
            opened.set()
            await queue.put(None)

    def key(entry: dict[str, Any]) -> tuple[Any, ...]:
        return (entry.get("kind"), entry.get("agent"), entry.get("round"), entry.get("messageID"))

    pumper = asyncio.create_task(pump())
    await opened.wait()
    printed: set[tuple[Any, ...]] = set()
    if not failure:
        with contextlib.suppress(CliError):
            past = await cc.call("GET", f"/v1/roundtables/{ses}/export", params={"format": "json"})
            for entry in past.get("turns") or []:
                printed.add(key(entry))
                if show_turns and entry.get("kind") != "observer":
                    _print_turn(entry, colors)

    async def items() -> Any:
        while (item := await queue.get()) is not None:
            yield item
        if failure:
            raise failure[0]

    ticker = asyncio.create_task(tick()) if tty else None
    result: dict[str, Any] | None = None
    try:
        async for item in items():
            kind = item.get("type")
            if kind == "turn":
                progress["agent"] = None
                entry = item["entry"]
                if key(entry) in printed:
                    continue
                printed.add(key(entry))
                if show_turns and entry.get("kind") != "observer":
                    clear()
                    _print_turn(entry, colors)
            elif kind == "prompt":
                progress.update(round=item.get("round"), agent=item.get("agent"))
                if item.get("kind") == "observer":
                    progress["agent"] = f"observer {item.get('agent')}"
                draw()
            elif kind == "done":
                result = item
                break
    finally:
        pumper.cancel()
        if ticker is not None:
            ticker.cancel()
        clear()
    if result is None:
        data = await cc.call("GET", f"/v1/roundtables/{ses}/result", params={"wait": "0"})
        if not data.get("done"):
            raise CliError("Error: the progress feed ended before the roundtable finished")
        result = data
    return result


def _exit_for(result: dict[str, Any]) -> int:
    if result.get("phase") == "aborted" or result.get("endReason") in ("all-failed", "cancelled"):
        return EXIT_UNCONCLUDED
    return EXIT_OK


# ----------------------------------------------------------------------------------------------
# Commands
# ----------------------------------------------------------------------------------------------


def read_topic(value: str) -> str:
    """The topic argument of ``start``/``extend``: the text itself, ``-`` for standard input, or
    ``@FILE`` for a UTF-8 file (a topic too long or multi-line for a shell argument).

    Raises:
        CliError: the file cannot be read or is not UTF-8 (exit code 2, the field named).
    """
    if value == "-":
        return sys.stdin.read()
    if value.startswith("@") and len(value) > 1:
        path = Path(value[1:]).expanduser()
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CliError(
                f"Error: prompt: cannot read {str(path)!r}: {reason} (give the topic itself, "
                "- for standard input, or @FILE)",
                EXIT_USAGE,
            ) from None
    return value


async def cmd_start(args: argparse.Namespace, settings: cfg.Settings) -> int:
    body: dict[str, Any] = {
        "agents": [a for a in args.agents.split(",")] if args.agents else None,
        "prompt": read_topic(args.prompt),
        "rounds": args.rounds,
    }
    for key, value in (
        ("observer", args.observer),
        ("title", args.title),
        ("parentSessionID", args.parent),
        ("turnTimeout", args.turn_timeout),
        ("directory", str(Path(args.directory).resolve()) if args.directory else None),
    ):
        if value is not None:
            body[key] = value
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        colors = await _colors(cc, body.get("directory"))
        created = await cc.call("POST", "/v1/roundtables", body=body, timeout=120)
        ses = created["sessionID"]
        print(f"Roundtable {ses}: {created.get('title')}", file=sys.stderr)
        result = await _follow(cc, ses, colors=colors, show_turns=not args.quiet)
        print(result.get("text") or result.get("summary") or "")
        return _exit_for(result)


async def cmd_extend(args: argparse.Namespace, settings: cfg.Settings) -> int:
    body: dict[str, Any] = {
        "sessionID": args.session,
        "prompt": read_topic(args.prompt),
        "rounds": args.rounds,
    }
    if args.mode:
        body["extendMode"] = args.mode
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        colors = await _colors(cc, None)
        await cc.call("POST", "/v1/roundtables", body=body, timeout=120)
        result = await _follow(cc, args.session, colors=colors, show_turns=not args.quiet)
        print(result.get("text") or result.get("summary") or "")
        return _exit_for(result)


async def _colors(cc: ControlClient, directory: str | None) -> dict[str, str]:
    try:
        data = await cc.call(
            "GET", "/v1/agents", params={"directory": directory} if directory else None
        )
    except CliError:
        return {}
    return {str(a["name"]): str(a["color"]) for a in data.get("agents", []) if a.get("color")}


async def cmd_agents(args: argparse.Namespace, settings: cfg.Settings) -> int:
    directory = str(Path(args.directory).resolve()) if args.directory else None
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        data = await cc.call(
            "GET", "/v1/agents", params={"directory": directory} if directory else None
        )
    if args.json:
        print(json.dumps(data["agents"], indent=2))
    else:
        print(data["text"])
    return EXIT_OK


def _fmt_elapsed(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


async def cmd_list(args: argparse.Namespace, settings: cfg.Settings) -> int:
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        data = await cc.call("GET", "/v1/roundtables")
    rows = data["roundtables"]
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print("No roundtables.")
        return EXIT_OK
    print(f"{'SESSION':32} {'PHASE':10} {'ROUND':7} {'AGENT':12} {'ELAPSED':8} TOPIC")
    for r in rows:
        topic = " ".join(str(r.get("prompt") or r.get("title")).split())[:50]
        print(
            f"{r['sessionID']:32} {r['phase']:10} {r['round']!s:>3}/{r['totalRounds']!s:3} "
            f"{r.get('agent') or '-'!s:12} {_fmt_elapsed(r.get('elapsed')):8} {topic}"
        )
    return EXIT_OK


async def cmd_status(args: argparse.Namespace, settings: cfg.Settings) -> int:
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        st = await cc.call("GET", f"/v1/roundtables/{args.session}")
    if args.json:
        print(json.dumps(st, indent=2))
        return EXIT_OK
    print(f"Roundtable {st['sessionID']} — {st['title']}")
    print(f"  phase:    {st['phase']}" + (f" ({st['endReason']})" if st.get("endReason") else ""))
    print(f"  round:    {st['round']}/{st['totalRounds']}   current: {st.get('agent') or '-'}")
    print(f"  agents:   {' → '.join(st['agents'])}   observer: {st['observer']}")
    print(f"  elapsed:  {_fmt_elapsed(st.get('elapsed'))}   turns: {st.get('turns')}")
    usage = st.get("usage") or {}
    rows = [(name, u) for name, u in (usage.get("perAgent") or {}).items()]
    rows += [(f"round {r}", u) for r, u in (usage.get("perRound") or {}).items()]
    if usage.get("total"):
        rows.append(("total", usage["total"]))
    for name, u in rows:
        print(
            f"  usage     {name:22} {u.get('input', 0):>8} in {u.get('output', 0):>7} out  "
            f"${float(u.get('cost', 0)):.4f}"
        )
    for err in st.get("errors") or []:
        print(f"  error:    {err}")
    return EXIT_OK


async def cmd_watch(args: argparse.Namespace, settings: cfg.Settings) -> int:
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        colors = await _colors(cc, None)
        result = await _follow(cc, args.session, colors=colors)
        print(result.get("text") or "")
        return _exit_for(result)


async def cmd_cancel(args: argparse.Namespace, settings: cfg.Settings) -> int:
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        await cc.call(
            "POST",
            f"/v1/roundtables/{args.session}/cancel",
            body={"summarize": args.summarize, "reason": "cancelled from the CLI"},
        )
        # Without --summarize no model request follows and the result comes at once; with it,
        # the observer consolidates what exists first.
        deadline = time.monotonic() + (300 if args.summarize else 60)
        while True:
            result = await cc.call(
                "GET", f"/v1/roundtables/{args.session}/result", params={"wait": "25"}, timeout=40
            )
            if result.get("done") or time.monotonic() > deadline:
                break
    if not result.get("done"):
        print(f"cancel requested; the roundtable is still {result.get('phase')}", file=sys.stderr)
        return EXIT_ERROR
    print(result.get("text") or result.get("summary") or "cancelled")
    return EXIT_OK


async def cmd_export(args: argparse.Namespace, settings: cfg.Settings) -> int:
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        data = await cc.call(
            "GET", f"/v1/roundtables/{args.session}/export", params={"format": args.format}
        )
    text = (
        json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        if args.format == "json"
        else str(data)
    )
    if args.output:
        try:
            Path(args.output).write_text(text)
        except OSError as exc:
            raise CliError(f"Error: cannot write {args.output}: {exc.strerror}") from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_config(args: argparse.Namespace, settings: cfg.Settings) -> int:
    print(json.dumps(settings.masked(), indent=2, default=str))
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


async def cmd_doctor(args: argparse.Namespace, settings: cfg.Settings) -> int:
    from roundtabled import doctor

    return await doctor.run(settings, control_url(settings))


def cmd_serve(args: argparse.Namespace, settings: cfg.Settings) -> int:
    from roundtabled import daemon
    from roundtabled.logs import setup_logging

    secrets = [settings.server_password.get_secret_value()] if settings.server_password else []
    setup_logging(settings.log_format, settings.log_level, secrets)
    return asyncio.run(daemon.serve(settings))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (every command has ``--help``)."""
    p = argparse.ArgumentParser(
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
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

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

    s = sub.add_parser("start", help="run a roundtable through the daemon and print it")
    s.add_argument("prompt", help="the topic; - reads it from standard input, @FILE from a file")
    s.add_argument("--agents", required=True, help="comma-separated agent names in order")
    s.add_argument("--rounds", type=int, default=1, help="rounds (1-50, default 1)")
    s.add_argument("--observer", help="observer agent (default: built-in)")
    s.add_argument("--title", help="S2 title (default from the topic)")
    s.add_argument("--parent", metavar="SES", help="parent session S1 to deliver the result to")
    s.add_argument("--directory", help="project directory (default: the server's)")
    s.add_argument("--turn-timeout", type=float, help="seconds per turn for this roundtable")
    s.add_argument("-q", "--quiet", action="store_true", help="print only the result")

    s = sub.add_parser("extend", help="continue a concluded roundtable")
    s.add_argument("session", metavar="SES")
    s.add_argument("prompt", help="what to discuss next; - for standard input, @FILE for a file")
    s.add_argument("--rounds", type=int, default=1)
    s.add_argument(
        "--mode", choices=["continuation", "new-topic"], help="override the prefix heuristic"
    )
    s.add_argument("-q", "--quiet", action="store_true")

    s = sub.add_parser("agents", help="list the agents a roundtable can seat")
    s.add_argument("--directory")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("list", help="active and recent roundtables")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("status", help="one roundtable's status")
    s.add_argument("session", metavar="SES")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("watch", help="stream turns as they finish")
    s.add_argument("session", metavar="SES")
    s = sub.add_parser("cancel", help="stop a roundtable (abort the turn in flight)")
    s.add_argument("session", metavar="SES")
    s.add_argument(
        "--summarize",
        action="store_true",
        help="let the observer consolidate what exists (one more model request)",
    )
    s = sub.add_parser("export", help="export a debate as Markdown or JSON")
    s.add_argument("session", metavar="SES")
    s.add_argument("--format", choices=["md", "json"], default="md")
    s.add_argument("-o", "--output", metavar="FILE")

    sub.add_parser("config", help="print the effective configuration (secrets masked)")
    sub.add_parser("doctor", help="check the server, auth, stream, tools, agents, daemon")

    s = sub.add_parser("install-tool", help="install the roundtable/available_agents tools")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--project", metavar="DIR", help="install into DIR/.opencode (default: cwd)")
    g.add_argument(
        "--global",
        dest="global_",
        action="store_true",
        help="install into $XDG_CONFIG_HOME/opencode",
    )

    s = sub.add_parser("install-service", help="install and enable the systemd user units")
    s.add_argument("--no-enable", action="store_true", help="only write the unit files")
    s.add_argument(
        "--with-opencode", action="store_true", help="also install opencode-serve.service"
    )
    return p


def _cli_overrides(args: argparse.Namespace) -> dict[str, object]:
    keys = (
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
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``roundtabled`` console script."""
    # `roundtabled list | head`: a closed pipe ends the command quietly, as for any Unix tool.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = build_parser().parse_args(argv)
    for warning in cfg.unknown_environment():
        print(warning, file=sys.stderr)
    try:
        settings = cfg.load_settings(
            _cli_overrides(args) if args.command == "serve" else None,
            config_file=Path(args.config) if args.config else None,
        )
    except cfg.ConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    handlers: dict[str, Any] = {
        "start": cmd_start,
        "extend": cmd_extend,
        "agents": cmd_agents,
        "list": cmd_list,
        "status": cmd_status,
        "watch": cmd_watch,
        "cancel": cmd_cancel,
        "export": cmd_export,
        "doctor": cmd_doctor,
    }
    try:
        if args.command == "serve":
            return cmd_serve(args, settings)
        if args.command == "config":
            return cmd_config(args, settings)
        if args.command == "install-tool":
            return cmd_install_tool(args, settings)
        if args.command == "install-service":
            from roundtabled import service

            return service.install(
                settings, enable=not args.no_enable, with_opencode=args.with_opencode
            )
        return int(asyncio.run(handlers[args.command](args, settings)))
    except CliError as exc:
        msg = str(exc)
        print(msg if msg.startswith("Error:") else f"Error: {msg}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # last resort: a message, not a traceback
        from roundtabled.errors import RoundtableError

        if isinstance(exc, RoundtableError):
            print(f"Error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
