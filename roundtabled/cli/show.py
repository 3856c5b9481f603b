"""Commands that look at roundtables and agents: ``agents``, ``list``, ``status``, ``export``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from roundtabled.cli.admin import existing_directory
from roundtabled.cli.client import EXIT_OK, CliError, ControlClient, control_url
from roundtabled.cli.render import color, fmt_elapsed, project_line
from roundtabled.cli.verdict import degraded_line, print_verdict, turns_text
from roundtabled.core.state import shown_title, tokens_in_out
from roundtabled.service import config as cfg


async def cmd_agents(args: argparse.Namespace, settings: cfg.Settings) -> int:
    directory = str(existing_directory(args.directory)) if args.directory else None
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        data = await cc.call(
            "GET", "/v1/agents", params={"directory": directory} if directory else None
        )
    if args.json:
        print(json.dumps(data["agents"], indent=2))
        return EXIT_OK
    print(data["text"])
    print()
    print(agents_table(data["agents"]))
    print(project_line(directory))
    print()
    print(
        "● a debater (an agent of your configuration); ○ a built-in agent of OpenCode: it can "
        "be seated, but has no debater prompt of its own."
    )
    return EXIT_OK


def _model_text(model: object) -> str:
    if isinstance(model, dict):
        prov, mid = model.get("providerID"), model.get("modelID")
        if prov and mid:
            return f"{prov}/{mid}"
    if isinstance(model, str) and model:
        return model
    return "(default)"


def agents_table(agents: list[dict[str, Any]]) -> str:
    """One line per agent (``GET /v1/agents`` items): debaters first, then OpenCode's built-ins;
    name in its colour, mode, model, colour, description (cut at 60 characters)."""
    rows = sorted(agents, key=lambda a: (bool(a.get("native")), str(a.get("name"))))
    width = max([len(str(a.get("name"))) for a in rows] + [5])
    lines = [f"  {'AGENT':{width}}  {'MODE':9} {'MODEL':28} {'COLOUR':8} DESCRIPTION"]
    for a in rows:
        name = str(a.get("name"))
        mark = "○" if a.get("native") else "●"
        desc = " ".join(str(a.get("description") or "").split())
        desc = desc if len(desc) <= 60 else desc[:59] + "…"
        padded = color(a.get("color"), name) + " " * (width - len(name))
        lines.append(
            f"{mark} {padded}  {a.get('mode') or '-'!s:9} {_model_text(a.get('model')):28} "
            f"{a.get('color') or '-'!s:8} {desc}"
        )
    return "\n".join(lines)


def list_label(row: dict[str, Any]) -> str:
    """What ``list`` names a roundtable by: its title as every command shows it
    (:func:`roundtabled.core.prompts.shown_title`: the ``--title`` given at its start, or the
    topic's start), else its topic. Whitespace is collapsed to single spaces.

    Args:
        row: one row of ``GET /v1/roundtables`` (``title``, ``prompt``; either may be absent).
    """
    title = str(row.get("title") or "")
    return shown_title(title) if title else " ".join(str(row.get("prompt") or "").split())


def list_progress(row: dict[str, Any]) -> tuple[str, str]:
    """``(status, rounds)`` of one ``list`` row in the words of the roundtable's result
    (``Status: cancelled, 6/50 rounds``): a finished one by its end reason and the rounds that
    ran in full (``roundsCompleted``), one that runs by its phase and the round it is in
    (``active``, ``3/5``).

    Args:
        row: one row of ``GET /v1/roundtables`` (``phase``, ``endReason``, ``round``,
            ``roundsCompleted``, ``totalRounds``).
    """
    total = row.get("totalRounds")
    if row.get("phase") == "done" and isinstance(row.get("roundsCompleted"), int):
        return str(row.get("endReason") or "done"), f"{row['roundsCompleted']}/{total}"
    return str(row.get("phase")), f"{row.get('round')}/{total}"


def _row(cells: tuple[str, ...], widths: list[int], *, head: bool = False) -> str:
    """One line of ``list``: each cell padded to its column's width, ROUND (the third)
    right-aligned but in the ``head`` line, the last (TITLE) as it is."""
    padded = [
        c.rjust(w) if i == 2 and not head else c.ljust(w)
        for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    ]
    return " ".join([*padded[:-1], cells[-1]])


async def cmd_list(args: argparse.Namespace, settings: cfg.Settings) -> int:
    params = {"all": "true"} if args.all else {"limit": str(args.limit)}
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        data = await cc.call("GET", "/v1/roundtables", params=params, timeout=60)
    rows = data["roundtables"]
    more = int(data.get("more") or 0)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print("No roundtables.")
        return EXIT_OK
    cells = [
        (
            str(r["sessionID"]),
            *list_progress(r),
            str(r.get("agent") or "-"),
            fmt_elapsed(r.get("elapsed")),
            list_label(r)[:50],
        )
        for r in rows
    ]
    # Each column as wide as its widest cell (a status such as observer-failed, a long agent
    # name), never narrower than the header's width: the columns stay aligned.
    head = ("SESSION", "STATUS", "ROUND", "AGENT", "ELAPSED", "TITLE")
    least = (32, 10, 7, 12, 8, 0)
    widths = [
        max(n, len(h), *(len(c[i]) for c in cells))
        for i, (h, n) in enumerate(zip(head, least, strict=True))
    ]
    print(_row(head, widths, head=True))
    for line in cells:
        print(_row(line, widths))
    if more:
        print(f"… and {more} older (roundtabled list --all)")
    return EXIT_OK


async def cmd_status(args: argparse.Namespace, settings: cfg.Settings) -> int:
    async with ControlClient(control_url(settings), settings.token_file) as cc:
        st = await cc.call("GET", f"/v1/roundtables/{args.session}")
    if args.json:
        print(json.dumps(st, indent=2))
        return EXIT_OK
    print("\n".join(status_lines(st)))
    print_verdict(st)
    return EXIT_OK


def status_lines(st: dict[str, Any], *, tty: bool | None = None) -> list[str]:
    """The head of ``roundtabled status``: ``st`` is the control API's status of one roundtable
    (``result`` is the contract of a finished one, docs/result.md). A degraded result says so
    right after the phase line, in the warning colour (``tty`` as in
    :func:`roundtabled.cli.verdict.render_verdict`), and the turns count says what they were."""
    reason = f" ({st['endReason']})" if st.get("endReason") else ""
    out = [
        f"Roundtable {st['sessionID']} — {shown_title(str(st['title']))}",
        f"  phase:    {st['phase']}{reason}",
    ]
    result = st.get("result") if isinstance(st.get("result"), dict) else None
    if warning := degraded_line(result, tty=tty):
        out.append(warning)
    stage = {"observer": " (observer)", "ended": " (ended)"}.get(str(st.get("stage")), "")
    done = ((result or {}).get("status") or {}).get("roundsCompleted")
    if stage == " (ended)" and isinstance(done, int) and done != st.get("round"):
        # Ended inside a round: the result's "N/M rounds" counts the complete ones.
        stage = f" (ended; {done} complete)"
    out.append(
        f"  round:    {st['round']}/{st['totalRounds']}{stage}   current: {st.get('agent') or '-'}"
    )
    out.append(f"  agents:   {' → '.join(st['agents'])}   observer: {st['observer']}")
    turns = turns_text(st.get("turns"), result)
    out.append(f"  elapsed:  {fmt_elapsed(st.get('elapsed'))}   turns: {turns}")
    usage = st.get("usage") or {}
    rows = [(name, u) for name, u in (usage.get("perAgent") or {}).items()]
    rows += [(f"round {r}", u) for r, u in (usage.get("perRound") or {}).items()]
    if usage.get("total"):
        rows.append(("total", usage["total"]))
    for name, u in rows:
        out.append(f"  usage     {name:22} {usage_cells(u)}")
    for err in st.get("errors") or []:
        out.append(f"  error:    {err}")
    return out


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


def usage_cells(u: dict[str, Any]) -> str:
    """One usage row of ``status`` (``u``: a usage total of the control API, docs/result.md):
    ``unknown`` where the server reported no usage, ``≥`` before a lower bound; in and out as
    :func:`roundtabled.core.state.tokens_in_out` counts them (the result's footer's rule)."""
    if u.get("input") is None:
        if not u.get("unreportedTurns"):
            return f"{'unknown':>8} (no usage recorded)"
        return f"{'unknown':>8} (no usage reported for {u['unreportedTurns']} turn(s))"
    at_least = "≥" if u.get("unreportedTurns") else " "
    cost = "cost unknown" if u.get("cost") is None else f"${float(u['cost']):.4f}"
    tokens_in, tokens_out = tokens_in_out(u)
    row = f"{at_least}{tokens_in:>7} in {tokens_out:>7} out  {cost}"
    if u.get("unreportedTurns"):
        row += f"  (usage of {u['unreportedTurns']} turn(s) unknown)"
    return row
