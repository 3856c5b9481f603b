"""The report of a run: ``report.json``, ``report.md`` and, with matplotlib, the plot of
accuracy against tokens (docs/eval.md, "The report")."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from roundtabled import __version__
from roundtabled.core import scoring
from roundtabled.eval.options import EvalOptions, protocol_names, singles_from
from roundtabled.eval.spending import without_cost


def build_report(
    opts: EvalOptions,
    run: Mapping[str, Any],
    records: Sequence[dict[str, Any]],
    total: int,
    *,
    interrupted: bool = False,
    stopped: str | None = None,
    abandoned: Sequence[Mapping[str, Any]] = (),
    unrecorded: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The JSON report (docs/eval.md): the run, the per-protocol summary and the questions.
    ``abandoned``: the roundtables the run gave up (:meth:`Journal.abandoned`), counted under
    their parents with the records' and listed; ``unrecorded``: those started for questions not
    recorded yet (:meth:`Journal.unrecorded`, a stopped run's), counted too."""
    names = protocol_names(opts)
    if run.get("costListed") is False:  # also the records of a run from before it was said
        records = [without_cost(r) for r in records]
    summary = scoring.summarise(records, names)
    complete = [r for r in records if all(p in r.get("protocols", {}) for p in names)]
    for line in summary["protocols"]:
        _add_product_reads(line, [r["protocols"][line.name] for r in complete])
    runs = [(r["id"], name, v) for r in records for name, v in r["protocols"].items()]
    estimated_runs = [f"{qid}/{name}" for qid, name, v in runs if v.get("estimated")]
    models: dict[str, str] = {}
    for r in records:
        models.update(r.get("models") or {})
    return {
        "version": 1,
        "partial": interrupted or stopped is not None or len(records) < total,
        "interrupted": interrupted,
        "stopped": stopped,
        "questions": {"done": len(records), "planned": total},
        "task": {
            "tasks": opts.tasks,
            "level": opts.level if opts.tasks in ("arithmetic", "code") else None,
            "seed": opts.seed,
            "answerLine": opts.answer_line,
        },
        "seats": opts.agents,
        "models": models,
        "opencodeVersion": run.get("opencodeVersion"),
        "roundtabledVersion": run.get("roundtabledVersion", __version__),
        "parentSessionID": run.get("parentSessionID"),
        "parents": parent_counts(run, records, [*abandoned, *unrecorded]),
        "sessions": [s for r in records for s in _sessions(r)],
        "abandoned": [
            {k: a.get(k) for k in ("id", "sessionID", "parentSessionID", "abandoned")}
            for a in abandoned
        ],
        "label": run.get("label"),
        "tokensEstimated": bool(estimated_runs),
        "tokensEstimatedRuns": {"estimated": estimated_runs, "of": len(runs)},
        "answerReads": answer_reads(records),
        "bestSingle": summary["bestSingle"],
        "singlesFrom": singles_from(opts) if "single" in opts.protocols else None,
        "protocols": [_summary_json(s) for s in summary["protocols"]],
        "records": list(records),
    }


def _sessions(record: Mapping[str, Any]) -> list[str]:
    """The roundtables of a record (one per protocol)."""
    return [str(s) for s in record.get("sessions") or ()]


def _add_product_reads(line: scoring.ProtocolSummary, entries: Sequence[Mapping[str, Any]]) -> None:
    """Complete a protocol's summary from its per-question ``entries`` (the questions it was
    summarised over): ``flips`` summed over the questions whose roundtable ran more than one
    round (``None`` when none did), and in ``extra`` how many did (``deliberated``), the
    roundtables the product reported degraded, observer calls per question and where the
    answers were read (``undecided``: questions on which the product decided nothing, a tie
    or no stance; ``readFrom``: ``count``, ``tally`` or ``decision``,
    :func:`roundtabled.eval.question.product_answer`)."""
    counted = [e["flips"] for e in entries if e.get("flips") is not None]
    if counted:
        flips = scoring.Flips()
        for w2r, r2w in counted:
            flips = scoring.Flips(flips.wrong_to_right + int(w2r), flips.right_to_wrong + int(r2w))
        line.flips = flips
        line.extra["deliberated"] = len(counted)
    line.extra["degraded"] = sum(1 for e in entries if e.get("degraded"))
    if entries and "readFrom" in entries[0]:
        line.extra["undecided"] = sum(1 for e in entries if e.get("label") is None)
    line.extra["observerCallsPerQuestion"] = (
        sum(int(e.get("observerCalls") or 0) for e in entries) / len(entries) if entries else None
    )
    reads: dict[str, int] = {}
    for e in entries:
        if e.get("readFrom"):
            reads[str(e["readFrom"])] = reads.get(str(e["readFrom"]), 0) + 1
    if reads:
        line.extra["readFrom"] = reads


def parent_counts(
    run: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    abandoned: Sequence[Mapping[str, Any]] = (),
) -> dict[str, int]:
    """``{parent session id: roundtables of ``records`` (each of its ``runs``) and of the journal
    lines ``abandoned`` (given up, or started and not recorded yet) under it}``, the run's
    current parent first, then the earlier ones a resume could no longer reach (``run.json``
    ``earlierParentSessionIDs``). A record names its parent (``parentSessionID``); one written
    before records did is counted under the first parent of the run."""
    earlier = [str(p) for p in run.get("earlierParentSessionIDs") or ()]
    current = run.get("parentSessionID")
    order = [*earlier, *([str(current)] if current else [])]
    counts: dict[str, int] = {p: 0 for p in order}
    # Each roundtable once: a record's (one per protocol, ``runs``; one record of a run from
    # before that is one roundtable) and each given up.
    tables = [t for r in records for t in (list((r.get("runs") or {}).values()) or [r])]
    for r in [*tables, *abandoned]:
        p = r.get("parentSessionID") or (order[0] if order else None)
        if p is not None:
            counts[str(p)] = counts.get(str(p), 0) + 1
    if current:
        counts = {str(current): counts.pop(str(current)), **counts}
    return counts


def answer_reads(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How the seats' turns were read, over every question: ``{source: turns}`` with the sources
    of :class:`roundtabled.core.scoring.ReadAnswer` (``placeholder``: the turn wrote the
    instruction's ``<…>`` back instead of an answer; also in records read before that source
    existed). Rounds in which a seat had no turn are not counted."""
    counts: dict[str, int] = {}
    for r in records:
        # A record has its seats' reads per roundtable (``runs``); one of a run from before
        # eval ran a roundtable per protocol, under ``seats``.
        runs = list((r.get("runs") or {}).values()) or [
            {"reads": {a: s.get("reads") or () for a, s in (r.get("seats") or {}).items()}}
        ]
        for run in runs:
            for reads in (run.get("reads") or {}).values():
                for read in reads:
                    if read.get("turn"):
                        src = read["source"]
                        if scoring.is_placeholder(read.get("answer")):
                            src = "placeholder"
                        counts[src] = counts.get(src, 0) + 1
    return counts


_READ_WORDS = {
    "position": "a `Position:` label",
    "answer": "an `Answer:` line",
    "boxed": "a boxed answer",
    "placeholder": "the instruction's placeholder written back (no answer)",
    "none": "no answer line",
}


def _summary_json(s: scoring.ProtocolSummary) -> dict[str, Any]:
    d = asdict(s)
    d["wilson95"] = list(s.wilson95) if s.wilson95 else None
    return d


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def render_markdown(report: Mapping[str, Any]) -> str:
    """``report.md``: the set-up, the table, the paired tests and flips, what is estimated."""
    lines = ["# roundtabled eval", ""]
    if report["partial"]:
        why = (
            "interrupted (Ctrl-C)"
            if report["interrupted"]
            else report["stopped"] or "not every question ran"
        )
        lines += [
            f"**Partial report**: {report['questions']['done']} of "
            f"{report['questions']['planned']} questions ({why}). Run the same command again to "
            "resume.",
            "",
        ]
    t = report["task"]
    lines += [
        f"- task: {t['tasks']}"
        + (f" (level {t['level']})" if t["level"] else "")
        + f", seed {t['seed']}, answer line: {t['answerLine']}",
        f"- seats: {', '.join(report['seats'])}; models: "
        + (", ".join(f"{k}={v}" for k, v in report["models"].items()) or "unknown"),
        f"- OpenCode {report['opencodeVersion']}, roundtabled {report['roundtabledVersion']}",
        f"- questions: {report['questions']['done']} of {report['questions']['planned']}",
    ]
    parents = report.get("parents") or {}
    if not parents and report.get("parentSessionID"):
        parents = {report["parentSessionID"]: len(report["sessions"])}
    for i, (p, n) in enumerate(parents.items()):
        lines.append(
            f"- parent session: {p} ({n} roundtables under it; `--cleanup` deletes them)"
            if i == 0
            else f"- earlier parent session: {p} ({n} roundtables under it; not reachable when "
            "the run resumed, so `--cleanup` cannot delete them)"
        )
    for a in report.get("abandoned") or ():
        lines.append(
            f"- abandoned roundtable of {a['id']}: {a['sessionID']}, which {a['abandoned']}; "
            "the question ran again"
        )
    resumed = sum(1 for r in report["records"] if r.get("resumed"))
    if resumed:
        lines.append(
            f"- {resumed} question(s) went on with the roundtable an earlier run had started; "
            "their seconds count from the resume"
        )
    if report.get("label"):
        lines.append(f"- note: {report['label']}")
    lines += [
        "",
        "| protocol | accuracy | 95% Wilson | vs best single (Δ, b/c, p) | vs vote (Δ, b/c, p) | "
        "flips w→r / r→w | seat calls/q | observer calls/q | tokens/q | USD/q | s/q |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def vs(p: Mapping[str, Any] | None) -> str:
        if not p or p["diff"] is None:
            return "–"
        return f"{100 * p['diff']:+.1f} pts, {p['only_a']}/{p['only_b']}, p={p['p']:.3f}"

    for s in report["protocols"]:
        w = s["wilson95"]
        fl = s["flips"]
        lines.append(
            f"| {s['name']} | {s['correct']}/{s['n']} = {_pct(s['accuracy'])} | "
            + (f"{_pct(w[0])}–{_pct(w[1])}" if w else "–")
            + f" | {vs(s['vs_best_single'])} | {vs(s['vs_vote'])} | "
            + (f"{fl['wrong_to_right']} / {fl['right_to_wrong']}" if fl else "–")
            + f" | {_num(s['calls_per_question'])} | "
            + f"{_num((s.get('extra') or {}).get('observerCallsPerQuestion'))} | "
            + f"{_num(s['tokens_per_question'], 0)} | "
            + (f"{s['cost_per_question']:.5f}" if s["cost_per_question"] is not None else "unknown")
            + f" | {_num(s['seconds_per_question'])} |"
        )
    lines += [
        "",
        f"Best single seat: {report['bestSingle'] or '–'}. Each protocol is one roundtable the "
        "daemon ran with that protocol, its answer read from the product's result (vote, and "
        "self-consistency, a vote of one seat's copies: its count's leader; adaptive: that count "
        "when it stopped at the opening, else the final tally's leader; debate: the final "
        "tally's leader; council: the chair's decision); a single seat is its answer alone in "
        "the independent round of "
        f"{report.get('singlesFrom') or 'vote'}. b/c: questions right only under the "
        "protocol / only under the other; p: exact McNemar (two-sided). Flips: each seat's "
        "opening answer against its last answer, over the questions whose roundtable ran more "
        "than one round (no answer counts as wrong). Tokens, cost and seconds are the whole "
        "roundtable's (seats and observer); a single seat's are its own turn's, its seconds "
        "the round's.",
    ]
    for s in report["protocols"]:
        extra = s.get("extra") or {}
        if extra.get("degraded"):
            lines.append(
                f"- {s['name']}: the product reported {extra['degraded']} of {s['n']} "
                "roundtables degraded (report.json `records[].runs[].notes` says how)"
            )
        if extra.get("undecided"):
            lines.append(
                f"- {s['name']}: the product decided nothing (a tie, or no stance stated) in "
                f"{extra['undecided']} of {s['n']} questions; counted wrong"
            )
        if extra.get("deliberated") is not None:
            lines.append(
                f"- {s['name']}: deliberated (more than one round) in {extra['deliberated']} of "
                f"{s['n']} questions"
            )
    reads = report.get("answerReads") or {}
    if reads:
        lines += [
            "",
            "The seats' turns were read as: "
            + "; ".join(
                f"{_READ_WORDS.get(k, k)} {v}"
                for k, v in sorted(reads.items(), key=lambda kv: (-kv[1], kv[0]))
            )
            + ".",
        ]
    if report["tokensEstimated"]:
        lines += ["", _estimated_words(report)]
    if not report.get("plot"):
        lines += [
            "",
            "The plot of accuracy against tokens per question needs matplotlib: `pip install "
            "'roundtabled[plot]'`, then run the same command again (it resumes and only redraws).",
        ]
    else:
        lines += ["", "![accuracy vs tokens per question](accuracy-vs-tokens.png)"]
    return "\n".join(lines) + "\n"


def _estimated_words(report: Mapping[str, Any]) -> str:
    """What the report says of estimated tokens: every count, or which of them (a report of
    before ``tokensEstimatedRuns`` was written counts as every one)."""
    runs = report.get("tokensEstimatedRuns") or {}
    estimated, of = list(runs.get("estimated") or ()), int(runs.get("of") or 0)
    how = "counted from the texts each turn saw and wrote at 4 characters a token"
    if not estimated or len(estimated) >= of:
        return (
            "**Tokens are estimated**: the provider reported no usage (0 tokens on every turn), "
            f"so tokens are {how}, and the cost is unknown."
        )
    shown = ", ".join(estimated[:12]) + (
        f", and {len(estimated) - 12} more" if len(estimated) > 12 else ""
    )
    return (
        f"**Tokens are estimated in {len(estimated)} of {of} counts** ({shown}): the provider "
        "reported no usage for a turn of theirs (an observer's turn that failed reports none), "
        f"so their tokens are {how}, and their cost is unknown; every other count is the "
        "provider's."
    )


def _num(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def write_reports(out: Path, report: dict[str, Any]) -> None:
    """Write ``report.json``, ``report.md`` and, with matplotlib installed, the plot."""
    report["plot"] = _plot(out / "accuracy-vs-tokens.png", report)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(render_markdown(report))


def _plot(path: Path, report: Mapping[str, Any]) -> str | None:
    try:
        os.environ.setdefault("MPLBACKEND", "Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    pts = [
        (s["tokens_per_question"], s["accuracy"], s["name"])
        for s in report["protocols"]
        if s["tokens_per_question"] is not None and s["accuracy"] is not None
    ]
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    span = max(x for x, _, _ in pts) - min(x for x, _, _ in pts) or 1.0
    placed: list[tuple[float, float]] = []
    for x, y, name in pts:
        ax.scatter([x], [100 * y])
        # Protocols at (nearly) the same point (seats of one model) get their labels stacked,
        # not printed over each other.
        near = sum(1 for px, py in placed if abs(px - x) < 0.08 * span and abs(py - y) < 0.03)
        placed.append((x, y))
        ax.annotate(
            name, (x, 100 * y), textcoords="offset points", xytext=(4, 4 - 10 * near), fontsize=8
        )
    ax.set_xlabel("tokens per question" + (" (estimated)" if report["tokensEstimated"] else ""))
    ax.set_ylabel("accuracy (%)")
    ax.set_title("roundtabled eval")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name
