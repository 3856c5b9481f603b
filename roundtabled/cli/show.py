"""Commands that look at roundtables and agents: ``agents``, ``list``, ``status``, ``export``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from roundtabled import config as cfg
from roundtabled.cli.client import EXIT_OK, CliError, ControlClient, control_url
from roundtabled.cli.render import fmt_elapsed


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
            f"{r.get('agent') or '-'!s:12} {fmt_elapsed(r.get('elapsed')):8} {topic}"
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
    print(f"  elapsed:  {fmt_elapsed(st.get('elapsed'))}   turns: {st.get('turns')}")
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
