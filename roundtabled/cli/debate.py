"""Commands that run or follow a roundtable: ``start``, ``extend``, ``watch``, ``cancel``."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from roundtabled.cli.client import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    ControlClient,
    control_url,
    name_the_flag,
)
from roundtabled.cli.follow import exit_for, follow, turn_key
from roundtabled.cli.render import project_line
from roundtabled.cli.topic import read_topic
from roundtabled.cli.verdict import print_verdict
from roundtabled.core import validation
from roundtabled.core.prompts import infer_extend_mode
from roundtabled.core.result import (
    CANCELLED_HEADER,
    INTERRUPTION_HEADER,
    OBSERVER_FAILED_HEADER,
    verdict_lines,
)
from roundtabled.core.result_model import RoundtableResult
from roundtabled.core.state import shown_title, went_wrong
from roundtabled.errors import ValidationFailed
from roundtabled.service import config as cfg


async def agent_colors(cc: ControlClient, directory: str | None) -> dict[str, str]:
    """The configured colour of each agent (``{name: "#rrggbb"}``; empty if unavailable)."""
    try:
        data = await cc.call(
            "GET", "/v1/agents", params={"directory": directory} if directory else None
        )
    except CliError:
        return {}
    return {str(a["name"]): str(a["color"]) for a in data.get("agents", []) if a.get("color")}


def deliberation_body(args: argparse.Namespace) -> dict[str, Any]:
    """``until``, ``budget`` and ``context`` of the control API body from ``--until``,
    ``--budget-tokens/-usd/-seconds`` and ``--context`` (absent flags are left out)."""
    body: dict[str, Any] = {}
    if args.until:
        body["until"] = args.until
    budget = {
        k: v
        for k, v in (
            ("tokens", args.budget_tokens),
            ("usd", args.budget_usd),
            ("seconds", args.budget_seconds),
        )
        if v is not None
    }
    if budget:
        # JSON has no NaN or infinity (orjson would send null, which the daemon reads as
        # "not set"), so the flags are checked here by the daemon's own rule.
        try:
            validation.parse_budget(budget)
        except ValidationFailed as exc:
            key = next((k for k in budget if f"budget.{k} " in str(exc)), "")
            raise CliError(name_the_flag(str(exc), f"budget.{key}"), EXIT_USAGE) from None
        body["budget"] = budget
    if args.context:
        body["context"] = args.context
    return body


def turn_timeout_flag(value: float | str | None) -> float | None:
    """``turnTimeout`` of the control API body from ``--turn-timeout`` (``None``: not given).

    Raises:
        CliError: exit 2, a value the daemon's rule refuses
            (:func:`roundtabled.core.validation.parse_request`), ``--turn-timeout`` named. Checked
            here because JSON has no NaN or infinity: orjson sends ``nan`` as null, which the
            daemon reads as "not set" and runs on its default.
    """
    try:
        return validation.turn_timeout_value(value)
    except ValidationFailed as exc:
        raise CliError(name_the_flag(str(exc), exc.field), EXIT_USAGE) from None


def side_flags(values: list[str] | None) -> dict[str, str] | None:
    """``sides`` of the control API body from the repeatable ``--side SEAT=SIDE`` flags.

    Returns:
        ``{seat: side}``; ``None`` when no ``--side`` was given.

    Raises:
        CliError: exit 2, a flag without ``SEAT=``, a seat given twice, or a side the daemon's
            rule refuses (:func:`roundtabled.core.validation.parse_sides`); the message names
            ``--side`` and the allowed sides. A seat that is not at the table is named by the
            daemon (it knows the preset's seats).
    """
    if not values:
        return None
    sides: dict[str, str] = {}
    for value in values:
        seat, eq, side = value.partition("=")
        seat = seat.strip()
        if not eq or not seat:
            raise CliError(
                f"Error: --side takes SEAT=SIDE (e.g. --side rv=against; SIDE: for, against, "
                f"neutral, or a one-line brief), got {value!r}",
                EXIT_USAGE,
            )
        if seat in sides:
            raise CliError(
                f"Error: --side gives seat {seat!r} a side twice ({sides[seat]!r} and "
                f"{side!r}); one --side per seat",
                EXIT_USAGE,
            )
        sides[seat] = side
    try:
        return validation.parse_sides(sides)
    except ValidationFailed as exc:
        raise CliError(name_the_flag(str(exc), "sides"), EXIT_USAGE) from None


def start_body(args: argparse.Namespace) -> dict[str, Any]:
    """The control API body of ``start`` from its parsed arguments."""
    body: dict[str, Any] = {
        # `--agents "pm, dev"`: names around the commas are trimmed (an empty one stays, for the
        # daemon's error naming the field).
        "agents": [a.strip() for a in args.agents.split(",")] if args.agents else None,
        "prompt": read_topic(args.prompt),
        "rounds": args.rounds,
        **deliberation_body(args),
    }
    for key, value in (
        ("opening", args.opening),
        # Absent from a namespace built by a caller that predates them: not given.
        ("protocol", getattr(args, "protocol", None)),
        ("adaptiveThreshold", getattr(args, "adaptive_threshold", None)),
        ("preset", args.preset),
        ("sides", side_flags(args.side)),
        ("dryRun", True if args.dry_run else None),
        ("observer", args.observer),
        ("title", args.title),
        ("parentSessionID", args.parent),
        ("turnTimeout", turn_timeout_flag(args.turn_timeout)),
        ("directory", str(Path(args.directory).resolve()) if args.directory else None),
    ):
        if value is not None:
            body[key] = value
    return body


def interrupted_note(args: argparse.Namespace) -> str | None:
    """What to tell a person who pressed Ctrl-C while a command followed a roundtable: the
    roundtable goes on in the daemon (Ctrl-C only stops following it), and how to follow or stop
    it; ``None`` when no roundtable was being followed or started."""
    ses = getattr(args, "following", None)
    if ses:
        return (
            f"Stopped following; the roundtable {ses} goes on in roundtabled.\n"
            f"  follow it again: roundtabled watch {ses}\n"
            f"  stop it:         roundtabled cancel {ses}"
        )
    if getattr(args, "starting", False):
        return (
            "Interrupted while the roundtable was being started; if it started, it goes on in "
            "roundtabled: roundtabled list shows it."
        )
    return None


def start_notes(notes: list[str], quiet: bool) -> list[str]:
    """The lines ``start`` prints on stderr for the start's ``notes`` (the control API's):
    ``warning: …`` for what went wrong (:func:`roundtabled.core.state.went_wrong`), ``note:
    …`` for the rest — left out with ``--quiet``, which never hides a warning."""
    wrong = went_wrong(notes)
    return [f"{'warning' if n in wrong else 'note'}: {n}" for n in notes if n in wrong or not quiet]


async def cmd_start(args: argparse.Namespace, settings: cfg.Settings) -> int:
    body = start_body(args)
    # A server the daemon cannot drive (OpenCode 2.x, or no OpenCode) is named in one line
    # rather than as a daemon that is not running (docs/opencode-server.md, "2.x").
    from roundtabled.service import install
    from roundtabled.service.server_major import EXIT_REFUSED, detect_at, refusal

    found = await detect_at(settings, timeout=2.0)
    refused = refusal(found, settings.server_url)
    if refused is not None:
        raise CliError(f"Error: {refused}", EXIT_REFUSED)
    if found.major in install.MAJORS and found.auth == "ok":
        # Only the other major's files where the server looks: the `roundtable` tool does not
        # exist for the person (docs/plugin.md, "Which major install-tool writes for").
        where = Path(str(body.get("directory") or Path.cwd())).expanduser()
        other = install.wrong_major_line(install.project_root(where), os.environ, found.major)
        if other is not None:
            raise CliError(f"Error: {other}", EXIT_REFUSED)
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        project = project_line(body.get("directory"))
        colors = await agent_colors(cc, body.get("directory"))
        if body.get("dryRun"):
            plan = await cc.call("POST", "/v1/roundtables", body=body, timeout=120)
            print(plan.get("text") or "")
            return EXIT_OK
        args.starting = True
        created = await cc.call("POST", "/v1/roundtables", body=body, timeout=120)
        ses = created["sessionID"]
        args.following = ses
        print(f"Roundtable {ses} — {shown_title(str(created.get('title') or ''))}", file=sys.stderr)
        if not args.quiet:
            print(project, file=sys.stderr)
        for line in start_notes([str(n) for n in created.get("notes") or []], args.quiet):
            print(line, file=sys.stderr)
        result = await follow(cc, ses, colors=colors, show_turns=not args.quiet)
        print(text_before_verdict(result))
        print_verdict(result)
        return exit_for(result)


async def cmd_extend(args: argparse.Namespace, settings: cfg.Settings) -> int:
    body: dict[str, Any] = {
        "sessionID": args.session,
        "prompt": read_topic(args.prompt),
        "rounds": args.rounds,
        **deliberation_body(args),
    }
    if args.mode:
        body["extendMode"] = args.mode
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        colors = await agent_colors(cc, None)
        # The earlier debate is not printed again: only the turns this extension adds.
        try:
            past = await cc.call(
                "GET", f"/v1/roundtables/{args.session}/export", params={"format": "json"}
            )
        except CliError:
            past = {}
        earlier = {turn_key(e) for e in past.get("turns") or []}
        try:
            await cc.call("POST", "/v1/roundtables", body=body, timeout=120)
        except CliError as exc:
            if "still active" in str(exc):
                raise CliError(
                    f"{exc}, or cancel it: roundtabled cancel {args.session}", exc.code
                ) from None
            raise
        args.following = args.session
        mode = args.mode or infer_extend_mode(body["prompt"])
        rounds = f"{args.rounds} more round{'s' if args.rounds != 1 else ''}"
        print(f"Extending {args.session} by {rounds} ({mode}):", file=sys.stderr)
        print("  " + "\n  ".join(str(body["prompt"]).splitlines() or [""]), file=sys.stderr)
        result = await follow(
            cc, args.session, colors=colors, show_turns=not args.quiet, skip=earlier
        )
        print(text_before_verdict(result))
        print_verdict(result)
        return exit_for(result)


async def cmd_watch(args: argparse.Namespace, settings: cfg.Settings) -> int:
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        colors = await agent_colors(cc, None)
        args.following = args.session
        result = await follow(cc, args.session, colors=colors)
        print(text_before_verdict(result))
        print_verdict(result)
        return exit_for(result)


async def _ended_error(cc: ControlClient, ses: str, refused: CliError) -> CliError:
    """The error for a cancel the daemon refused as "no active roundtable": that it already
    ended and how (phase and end reason, from its status), or ``refused`` itself when the
    status is not known either (no such roundtable)."""
    try:
        st = await cc.call("GET", f"/v1/roundtables/{ses}")
    except CliError as unknown:
        # No such roundtable: said in the words of `status`, `watch` and `export`.
        return unknown if unknown.code == EXIT_USAGE else refused
    how = str(st.get("phase") or "ended")
    if st.get("endReason"):
        how += f": {st['endReason']}"
    return CliError(
        f"Error: roundtable {ses} already ended ({how}); nothing to cancel. "
        f"Its result: roundtabled status {ses}",
        refused.code,
    )


async def cmd_cancel(args: argparse.Namespace, settings: cfg.Settings) -> int:
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        try:
            await cc.call(
                "POST",
                f"/v1/roundtables/{args.session}/cancel",
                body={"summarize": args.summarize, "reason": "cancelled from the CLI"},
            )
        except CliError as exc:
            if "no active roundtable" in str(exc):
                raise await _ended_error(cc, args.session, exc) from None
            raise
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
            print(
                f"cancel requested; the roundtable is still {result.get('phase')}",
                file=sys.stderr,
            )
            return EXIT_ERROR
        try:
            st = await cc.call("GET", f"/v1/roundtables/{args.session}")
        except CliError:
            st = {}
    print(cancel_effect(args.session, st))
    print(result_head(str(result.get("text") or result.get("summary") or "")))
    return EXIT_OK


PARTIAL_HISTORY = (
    CANCELLED_HEADER,
    OBSERVER_FAILED_HEADER,
    INTERRUPTION_HEADER,
    "No consolidated summary. Partial history:",
)
"""The lines after which a result text pastes the debate itself (core.result)."""


def cancel_effect(ses: str, status: dict[str, Any]) -> str:
    """What a cancel did, in one line, from the roundtable's status after it (``round``,
    ``totalRounds``, ``turns``; a line without the numbers when the status is unknown)."""
    if not status:
        return f"Cancelled roundtable {ses}."
    where = f"in round {status.get('round')} of {status.get('totalRounds')}"
    return (
        f"Cancelled roundtable {ses} {where}; {status.get('turns', 0)} turn(s) kept "
        f"(the whole debate: roundtabled export {ses})."
    )


def text_before_verdict(result: dict[str, Any]) -> str:
    """A finished roundtable's result text (``text`` of the control API's result, core.result)
    as ``start``, ``extend`` and ``watch`` print it before the verdict table
    (:func:`roundtabled.cli.verdict.print_verdict`): without the text's own verdict lines
    (:func:`roundtabled.core.result.verdict_lines`), which the table shows, so the verdict is
    said once. A result without a contract keeps its text whole."""
    text = str(result.get("text") or result.get("summary") or "")
    contract = result.get("result")
    if not isinstance(contract, dict) or not isinstance(contract.get("verdict"), dict):
        return text
    try:
        said = verdict_lines(RoundtableResult.model_validate(contract))
    except ValidationError:
        return text
    lines = text.split("\n")
    for i in range(len(lines) - len(said) + 1):
        if lines[i : i + len(said)] == said:
            return "\n".join(lines[:i] + lines[i + len(said) :])
    return text


def result_head(text: str) -> str:
    """``text`` (a result text, core.result) without the partial history a result without a
    summary carries: its title and end lines, and the summary where there is one."""
    cut = min((i for i in (text.find(h) for h in PARTIAL_HISTORY) if i >= 0), default=-1)
    return text[:cut].rstrip() if cut >= 0 else text
