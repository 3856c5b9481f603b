"""Which closing request lets a small local model state its answer as its position's label
(bench/README.md, "eval"; docs/deliberation.md, "The closing line").

Usage (from the repository root, a local OpenAI-compatible server already running)::

    .venv/bin/python -m bench.closing_forms --base-url http://127.0.0.1:18080/v1 --model local \\
        [--tasks arithmetic,code] [--limit 20] [--samples 1] [--max-tokens 384] \\
        [--forms A,B] [--out FILE]

Straight to the model server (no OpenCode, no daemon): each form costs one request per question
and sample. The system message is the seat prompt ``eval --model`` writes
(:data:`roundtabled.service.provider.SEAT_PROMPT`) with the lines OpenCode 1.x appends to it
(:data:`bench.prompt_forms.OPENCODE_SYSTEM_TAIL`); the user message is the daemon's real opening
turn prompt (:func:`roundtabled.core.prompts.turn_prompt`) of a three-round roundtable on the
eval's topic (the question and the ``position`` instruction, as ``eval`` sends it), whose last
line — the closing request — is each form of :data:`roundtabled.core.prompts.CLOSING_FORMS`
and of :data:`CANDIDATES` (forms tried here, not the product's).
The answer is read as the eval reads it (:func:`roundtabled.core.scoring.read_answer`, the
``Position:`` label) and compared with the question's answer.

Prints one JSON document: per task family and form, right answers / asked, how many replies had a
``Position:`` line at all, a confidence on it, and a label that was a number while the answer was
another number of the turn's own working (e.g. ``Position: 2 — … is 27``: an index, not the
answer).
"""

from __future__ import annotations

import argparse
import asyncio
import re
from typing import Any

import aiohttp

from bench.env import emit_json
from bench.prompt_forms import OPENCODE_SYSTEM_TAIL, SEATS, ask
from roundtabled.core import prompts, scoring
from roundtabled.core.scoring import Question
from roundtabled.core.state import RoundtableState
from roundtabled.eval.code import code_questions
from roundtabled.eval.options import topic_for
from roundtabled.service.provider import SEAT_PROMPT

_POSITION = re.compile(r"^\W*position\W*:", re.IGNORECASE)

CANDIDATES: dict[str, str] = {
    "argue-then-answer": (
        "Make your argument first, reasoning it through in full. Then, as the very last line "
        "of your reply, write: Position: <your answer, in a few words> — <one sentence why> "
        "(confidence N/10)"
    ),
    "work-then-answer": (
        "Work it out in full first. Then end with one line that starts with Position: and gives "
        "your answer itself, a dash, one sentence why, and your confidence, like this: "
        "Position: <your answer> — <why> (confidence N/10)"
    ),
}
"""Closing requests tried against the product's (:data:`roundtabled.core.prompts.CLOSING_FORMS`):
the label asked for as "your answer" rather than "a short label". Not the product's: neither
decided better (bench/README.md, "eval")."""
FORMS = {**prompts.CLOSING_FORMS, **CANDIDATES}


def turn_text(q: Question, form: str) -> str:
    """The daemon's opening turn prompt for ``q`` (three rounds, seat 1) with the closing
    request of ``form`` (a key of :data:`FORMS`: the product's forms and :data:`CANDIDATES`)."""
    state = RoundtableState.model_validate(
        {
            "session_id": "ses_bench",
            "title": "eval",
            "agents": SEATS,
            "total_rounds": 3,
            "prompt": topic_for(q, "position"),
        }
    )
    text = prompts.turn_prompt(state, round_index=0, seat=0, since=(), opening=True)
    head, sep, _ = text.rpartition(prompts.CLOSING_LINE)
    assert sep, "the turn prompt ends with the closing request"
    return head + FORMS[form]


def questions(task: str, limit: int, code_level: str = "easy") -> list[Question]:
    if task == "code":
        return code_questions(limit, 0, code_level)
    return scoring.arithmetic_questions("easy", limit, 0)[:limit]


async def run(
    base_url: str,
    model: str,
    tasks: list[str],
    forms: list[str],
    limit: int,
    samples: int,
    max_tokens: int,
    code_level: str = "easy",
) -> dict[str, Any]:
    gate = asyncio.Semaphore(2)
    timeout = aiohttp.ClientTimeout(total=1800)
    system = SEAT_PROMPT + OPENCODE_SYSTEM_TAIL
    out: dict[str, Any] = {
        "model": model,
        "limit": limit,
        "samples": samples,
        "max_tokens": max_tokens,
        "code_level": code_level,
        "tasks": {},
    }
    async with aiohttp.ClientSession(timeout=timeout) as http:

        async def one(form: str, q: Question) -> dict[str, bool]:
            async with gate:
                reply = await ask(
                    http, base_url.rstrip("/"), model, system, turn_text(q, form), max_tokens
                )
            read = scoring.read_answer(reply)
            answer = scoring.canonical(read.text, q.choices)
            gold = scoring.gold_canonical(q)
            lines = [ln for ln in reply.splitlines() if _POSITION.match(ln.strip())]
            index_label = (
                read.source == "position"
                and answer is not None
                and answer != gold
                and re.fullmatch(r"\d{1,2}", answer) is not None
                and len(answer) < len(gold or "")
            )
            return {
                "right": answer is not None and answer == gold,
                "position": bool(lines),
                "confidence": read.confidence is not None,
                "index_label": index_label,
            }

        for task in tasks:
            qs = questions(task, limit, code_level)
            jobs = [(f, one(f, q)) for f in forms for q in qs for _ in range(samples)]
            done = await asyncio.gather(*(j for _, j in jobs))
            rows: dict[str, Any] = {}
            for form in forms:
                mine = [d for (f, _), d in zip(jobs, done, strict=True) if f == form]
                rows[form] = {k: sum(1 for d in mine if d[k]) for k in mine[0]} | {
                    "asked": len(mine)
                }
            out["tasks"][task] = rows
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.closing_forms")
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--tasks", default="arithmetic,code")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--samples", type=int, default=1)
    p.add_argument("--code-level", default="easy", help="level of the code questions")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=384,
        help="tokens a reply may take (the eval's --output-limit)",
    )
    p.add_argument("--forms", help="comma-separated forms (default: every form)")
    p.add_argument("--out")
    a = p.parse_args()
    forms = a.forms.split(",") if a.forms else list(FORMS)
    for f in forms:
        if f not in FORMS:
            p.error(f"--forms: {f!r} is not one of {', '.join(FORMS)}")
    tasks = a.tasks.split(",")
    for t in tasks:
        if t not in ("arithmetic", "code"):
            p.error(f"--tasks: {t!r} is not one of arithmetic, code")
    emit_json(
        asyncio.run(
            run(a.base_url, a.model, tasks, forms, a.limit, a.samples, a.max_tokens, a.code_level)
        ),
        a.out,
    )


if __name__ == "__main__":
    main()
