"""Export of a whole debate: topic, agents, each turn with round and agent, tool call
summaries, errors, the observer's summary and usage — as JSON or GitHub-flavoured Markdown.

The full text of every turn comes from S2's messages when the roundtable is not in memory (the
persisted final state keeps only capped previews).
"""

from __future__ import annotations

from typing import Any

from roundtabled.core import history
from roundtabled.core.result import build_result, usage_table
from roundtabled.core.sides import turn_title, turn_view
from roundtabled.core.state import HistoryEntry, RoundtableState, shown_title, tokens_in_out
from roundtabled.core.validation import unknown_roundtable
from roundtabled.core.verdict import consensus_text, deliberation_line, unstated_words
from roundtabled.engine import v2_features
from roundtabled.engine.registry import Engine
from roundtabled.engine.v2run import V2Runner
from roundtabled.errors import NotFound, StateError, ValidationFailed


async def collect(engine: Engine, s2: str) -> dict[str, Any]:
    """The export data of roundtable ``s2``.

    Raises:
        ValidationFailed: ``s2`` does not exist or is not a roundtable of this daemon.
    """
    table = engine.tables.get(s2) or engine.recent.get(s2)
    state: RoundtableState
    if table is not None:
        state = table.state
    else:
        try:
            state = await engine.load_state(s2)
        except NotFound:
            raise ValidationFailed("sessionID", unknown_roundtable(s2)) from None
        except StateError as exc:
            raise ValidationFailed("sessionID", f"{unknown_roundtable(s2)} ({exc})") from None
        views = (await engine.shell.port.session_messages(s2, engine.signer)).views
        rebuilt = history.rebuild_history(state.model_copy(update={"pending": None}), views)
        state = state.model_copy(update={"history": rebuilt})
    return to_data(state)


async def collect_v2(runner: V2Runner, s2: str) -> dict[str, Any]:
    """The export data of roundtable ``s2`` on OpenCode 2.x: from memory, else from the signed
    state in S2's metadata with each reply in full from S2's messages
    (:func:`roundtabled.engine.v2_features.stored_state`).

    Raises:
        ValidationFailed: ``s2`` does not exist or is not a roundtable of this daemon.
    """
    state = runner.state_of(s2)
    if state is None:
        try:
            ref = await runner.port.session(s2)
            state = await v2_features.stored_state(runner.port, runner.signer, ref)
        except NotFound:
            state = None
    if state is None:
        raise ValidationFailed("sessionID", unknown_roundtable(s2))
    return to_data(state)


def to_data(state: RoundtableState) -> dict[str, Any]:
    """JSON-ready export of ``state``: the result contract of docs/result.md (``version``,
    ``status``, ``verdict``, ``summary`` with its honesty header, ``usage``) plus the transcript
    (``turns``, every turn in full) and the debate's set-up. ``observerSummary`` is the observer's
    own text; ``usage`` adds ``perRound`` and ``total`` to the contract's totals."""
    usage = usage_table(state.history, state.unpriced)
    contract = build_result(state).dump()
    return {
        **contract,
        "sessionID": state.session_id,
        "parentSessionID": state.parent_session_id,
        "title": state.title,
        "topic": state.prompt,
        # fromRound is the state's 0-indexed count of rounds before the extension; a person
        # reads firstRound, the 1-based round it began with.
        "extensions": [{**e.dump(), "firstRound": e.from_round + 1} for e in state.extensions],
        "agents": state.agents,
        "observer": state.observer,
        "models": {k: v.label() for k, v in state.models.items()},
        "rounds": state.total_rounds,
        "phase": state.phase.value,
        "endReason": state.end_reason.value if state.end_reason else None,
        "errors": state.errors,
        "turns": [_turn(e, state) for e in state.history],
        "summary": contract["summary"],
        "observerSummary": state.summary,
        "usage": {
            **contract["usage"],
            "perAgent": {k: v.dump() for k, v in usage["perAgent"].items()},
            "perRound": {str(k): v.dump() for k, v in usage["perRound"].items()},
            "total": usage["total"].dump(),
        },
    }


def _turn(e: HistoryEntry, state: RoundtableState) -> dict[str, Any]:
    """One history entry as the export lists it (:func:`roundtabled.core.sides.turn_view`:
    its seat's ``side``): ``usageUnknown`` when the server reported no usage for it, and its
    ``usage.cost`` ``null`` when its model lists no price (docs/result.md, usage)."""
    d = {**turn_view(e, state), **({"usageUnknown": True} if e.usage_unreported else {})}
    if e.agent in state.unpriced and isinstance(d.get("usage"), dict):
        d["usage"] = {**d["usage"], "cost": None}
    return d


def _md_cell(value: object) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def _verdict_section(data: dict[str, Any]) -> list[str]:
    """The ``## Verdict`` section: degraded notes, positions table, consensus, decision, what
    deliberation changed, minority views."""
    verdict, status = data.get("verdict"), data.get("status") or {}
    if not isinstance(verdict, dict):
        return []
    lines = ["## Verdict", ""]
    # A degraded result's notes are at the top of the document (:func:`_degraded_block`).
    if not status.get("degraded") and status.get("notes"):
        lines += [f"- _{n}_" for n in status["notes"]] + [""]
    lines += ["| agent | position | confidence | changed? |", "|---|---|---:|---|"]
    for p in verdict.get("positions") or []:
        label = p.get("label") or f"_({unstated_words(p)})_"
        conf = p.get("confidence")
        changes = p.get("changes") or []
        changed = "; ".join(
            f"round {c['round']}: from {c['from']}" + (f" ({c['why']})" if c.get("why") else "")
            for c in changes
        )
        lines.append(
            f"| {_md_cell(p['agent'])} | {_md_cell(label)} | "
            f"{'' if conf is None else f'{round(conf * 10)}/10'} | {_md_cell(changed or 'no')} |"
        )
    lines.append("")
    line = f"**Consensus:** {consensus_text(verdict)}"
    lines += [line, "", f"**Decision:** {verdict.get('decision') or '_none_'}", ""]
    if (deliberated := deliberation_line(verdict)) is not None:
        head, _, rest = deliberated.partition(": ")
        lines += [f"**{head}:** {rest}", ""]
    for d in verdict.get("disagreements") or []:
        who = ", ".join(d.get("minority") or []) or "—"
        lines.append(f"- **Minority ({who})** on {d.get('point')}: {d.get('view')}")
    if verdict.get("disagreements"):
        lines.append("")
    return lines


def _degraded_block(data: dict[str, Any]) -> list[str]:
    """The notes of a degraded result, shown right after the title and outcome so the document
    never reads like a healthy debate first (docs/result.md); nothing for a healthy one."""
    status = data.get("status") or {}
    if not status.get("degraded"):
        return []
    notes = status.get("notes") or ["(no notes recorded)"]
    return ["> ⚠️ **Degraded result**", ">", *[f"> - {n}" for n in notes], ""]


def _fmt_tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def to_markdown(data: dict[str, Any]) -> str:
    """GitHub-flavoured Markdown of :func:`to_data`'s output."""
    lines = [f"# {shown_title(str(data['title']))}", ""]
    lines += [f"- **Roundtable:** `{data['sessionID']}`"]
    if data.get("parentSessionID"):
        lines += [f"- **Requested from:** `{data['parentSessionID']}`"]
    lines += [
        f"- **Agents:** {' → '.join(data['agents'])}",
        f"- **Observer:** {data['observer']}",
        f"- **Rounds:** {data['rounds']}",
        f"- **Outcome:** {data['phase']}"
        + (f" ({data['endReason']})" if data.get("endReason") else "")
        + (" — **degraded**" if (data.get("status") or {}).get("degraded") else ""),
        "",
        *_degraded_block(data),
        "## Topic",
        "",
        data["topic"],
        "",
    ]
    for ext in data.get("extensions") or []:
        lines += [
            f"**Extension from round {ext['fromRound'] + 1} ({ext['mode']}):** {ext['prompt']}",
            "",
        ]
    lines += ["## Debate", ""]
    for turn in data["turns"]:
        kind = turn.get("kind", "turn")
        if (
            kind == "observer"
            and not turn.get("hasError")
            and turn.get("response") == (data.get("observerSummary", data.get("summary")) or "")
        ):
            continue  # shown once, under "Summary" (its usage is in the tables)
        if kind == "user":
            head = f"### The user (round {turn['round']})"
        elif kind == "observer":
            head = f"### Observer: {turn['agent']}"
        elif kind == "interjection":
            head = f"### {turn['agent']} (reply to the user, round {turn['round']})"
        else:
            head = "### " + turn_title(turn["agent"], turn["round"], turn.get("side"))
        lines += [head, ""]
        if turn.get("hasError"):
            note = "cut off" if turn.get("cutOff") else "failed"
            lines += [f"> ⚠️ {note}: {turn.get('error')}", ""]
        if turn.get("response"):
            lines += [turn["response"], ""]
        for tool in turn.get("toolCalls") or []:
            preview = str(tool.get("outputPreview", "")).replace("```", "ʼʼʼ")
            lines += [
                f"<details><summary>tool <code>{tool.get('toolName')}</code></summary>",
                "",
                "```",
                preview,
                "```",
                "",
                "</details>",
                "",
            ]
        usage = turn.get("usage") or {}
        if turn.get("usageUnknown"):
            lines += ["<sub>usage unknown (the server reported none)</sub>", ""]
        elif any(tokens_in_out(usage)):
            cost = (
                "cost unknown"
                if usage.get("cost") is None
                else f"${float(usage.get('cost', 0)):.4f}"
            )
            tokens_in, tokens_out = tokens_in_out(usage)
            lines += [
                f"<sub>{_fmt_tokens(tokens_in)} in · {_fmt_tokens(tokens_out)} out · {cost}</sub>",
                "",
            ]
    if data.get("errors"):
        lines += ["## Errors", ""] + [f"- {e}" for e in data["errors"]] + [""]
    lines += _verdict_section(data)
    summary = data.get("observerSummary", data.get("summary"))
    lines += ["## Summary", "", summary or "_(no summary)_", ""]
    lines += ["## Usage", ""]
    tot = data["usage"]["total"]
    if tot.get("unreportedTurns"):
        lines += [
            f"The server reported no usage for {tot['unreportedTurns']} answered turn(s): their "
            'usage is unknown, so a number marked ≥ is a lower bound and "unknown" means '
            "nothing was reported.",
            "",
        ]
    lines += ["| agent | input | output | cost (USD) |", "|---|---:|---:|---:|"]
    for name, u in data["usage"]["perAgent"].items():
        lines.append(f"| {name} | {_usage_cells(u)} |")
    lines.append(f"| **total** | {_usage_cells(tot)} |")
    per_round = data["usage"].get("perRound") or {}
    if per_round:
        lines += ["", "| round | input | output | cost (USD) |", "|---|---:|---:|---:|"]
        for rnd, u in per_round.items():
            lines.append(f"| {rnd} | {_usage_cells(u)} |")
    return "\n".join(lines) + "\n"


def _usage_cells(u: dict[str, Any]) -> str:
    """The input, output and cost cells of one usage row: ``unknown`` where the server reported
    nothing, ``≥`` before a lower bound (docs/result.md, usage)."""
    if u.get("input") is None:
        return "unknown | unknown | unknown"
    at_least = "≥ " if u.get("unreportedTurns") else ""
    cost = "unknown" if u.get("cost") is None else f"{at_least}{float(u['cost']):.4f}"
    tokens_in, tokens_out = tokens_in_out(u)
    return f"{at_least}{tokens_in} | {at_least}{tokens_out} | {cost}"
