"""Which seat prompt and turn prompt let a small local model reason (bench/README.md, "eval").

Usage (from the repository root, a local OpenAI-compatible server already running)::

    .venv/bin/python -m bench.prompt_forms --base-url http://127.0.0.1:18080/v1 --model local \\
        [--level easy] [--limit 12] [--samples 2] [--out FILE]

Straight to the model server (no OpenCode, no daemon), so each form costs one request per
question and sample: the first ``--limit`` arithmetic questions of ``--level`` (seed 0, the
eval's own), each asked ``--samples`` times in each of :data:`FORMS`. A form is a system message
and a user message. The system message: the seat prompt the eval wrote before
(:data:`CONCISE_SEAT`) or the one it writes now (:data:`roundtabled.service.provider.SEAT_PROMPT`),
with or without the lines OpenCode adds after an agent's prompt (:data:`OPENCODE_SYSTEM_TAIL`, as
OpenCode 1.18.33 sent them to the scripted model). The user message: the daemon's real opening
turn prompt (:func:`roundtabled.core.prompts.turn_prompt`, the eval's ``answer`` instruction and
the ``Answer:``-last closing, as ``bench.eval_local --closing answer`` runs it) of a one-round
roundtable (the eval's opening: its last round, so the spec's "This is the last prompt —
finalize your thoughts" line is in it) or of a three-round one (round 1/3, no such line), or the
question with the instruction alone. The answer is read and compared as the eval does it
(:func:`roundtabled.core.scoring.read_answer`, :func:`roundtabled.core.scoring.canonical`).
Prints one JSON document: per form, right answers / asked, and how many replies were one line
(the closing line alone, no working).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp

from bench.env import emit_json
from bench.eval_local import ANSWER_CLOSING
from roundtabled.core import prompts, scoring
from roundtabled.core.scoring import Question
from roundtabled.core.state import RoundtableState
from roundtabled.eval.options import topic_for
from roundtabled.service.provider import SEAT_PROMPT

CONCISE_SEAT = (
    "You are a careful, concise panellist. Answer the question in a few sentences, then close "
    "as the message asks."
)
"""The seat prompt ``eval --model`` wrote until 2026-12-04."""

SEATS = ["seat-a", "seat-b", "seat-c"]


OPENCODE_SYSTEM_TAIL = (
    "\nYou are powered by the model named local. The exact model ID is local/local\n"
    "Here is some useful information about the environment you are running in:\n<env>\n"
    "  Working directory: /work/project\n  Workspace root folder: /work/project\n"
    "  Is directory a git repo: yes\n  Platform: linux\n  Today's date: Fri Dec 04 2026\n</env>"
)
"""What OpenCode 1.18.33 appends to an agent's prompt in the system message (recorded by the
scripted model for a seat on a provider ``local`` model ``local``; the directory shortened)."""


def turn_text(q: Question, rounds: int = 1) -> str:
    """The daemon's opening turn prompt for ``q`` in a roundtable of ``rounds`` rounds, with the
    ``Answer:``-last closing line."""
    state = RoundtableState.model_validate(
        {
            "session_id": "ses_bench",
            "title": "eval",
            "agents": SEATS,
            "total_rounds": rounds,
            "prompt": topic_for(q, "answer"),
        }
    )
    saved = prompts.CLOSING_LINE
    prompts.CLOSING_LINE = ANSWER_CLOSING
    try:
        return prompts.turn_prompt(state, round_index=0, seat=0, since=(), opening=True)
    finally:
        prompts.CLOSING_LINE = saved


def question_last(q: Question, rounds: int = 1, note: bool = True, closing: str = "") -> str:
    """The same lines as :func:`turn_text` in another order: the roundtable's framing first (the
    roster, the round header, who speaks, the note, the last-round line), then the topic, then the
    closing request, so the question is the last thing the model reads before it answers."""
    name = SEATS[0]
    lines = [
        "[System] You are participating in a roundtable debate. "
        f"Agents ({' → '.join(SEATS)}) will discuss the topic below in {rounds} round(s).",
        f"Round 1/{rounds} | Current agent: {name}",
        f"You are {name}. Speak only as {name}.",
    ]
    if note:
        lines.append(prompts.OPENING_NOTE)
    if rounds == 1:
        lines.append(prompts.LAST_ROUND)
    lines += ["", f"[Topic] {topic_for(q, 'answer')}", "", closing or ANSWER_CLOSING]
    return "\n".join(lines)


def question_last_no_note(q: Question) -> str:
    return question_last(q, note=False)


def question_alone(q: Question) -> str:
    return topic_for(q, "answer")


def turn_of_three(q: Question) -> str:
    return turn_text(q, 3)


FORMS: dict[str, tuple[str, Callable[[Question], str]]] = {
    "concise seat + OpenCode's lines, opening turn of 1 round (the eval before)": (
        CONCISE_SEAT + OPENCODE_SYSTEM_TAIL,
        turn_text,
    ),
    "working-first seat + OpenCode's lines, opening turn of 1 round (the eval now)": (
        SEAT_PROMPT + OPENCODE_SYSTEM_TAIL,
        turn_text,
    ),
    "working-first seat + OpenCode's lines, opening turn of 3 rounds": (
        SEAT_PROMPT + OPENCODE_SYSTEM_TAIL,
        turn_of_three,
    ),
    "working-first seat, opening turn of 3 rounds": (SEAT_PROMPT, turn_of_three),
    "working-first seat + OpenCode's lines, 1 round, the question last": (
        SEAT_PROMPT + OPENCODE_SYSTEM_TAIL,
        question_last,
    ),
    "working-first seat + OpenCode's lines, 1 round, the question last, no note": (
        SEAT_PROMPT + OPENCODE_SYSTEM_TAIL,
        question_last_no_note,
    ),
    "working-first seat + OpenCode's lines, question alone": (
        SEAT_PROMPT + OPENCODE_SYSTEM_TAIL,
        question_alone,
    ),
    "working-first seat, question alone": (SEAT_PROMPT, question_alone),
}


async def ask(
    http: aiohttp.ClientSession,
    url: str,
    model: str,
    system: str,
    user: str,
    max_tokens: int = 700,
) -> str:
    body = {
        "model": model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "max_tokens": max_tokens,
    }
    async with http.post(url + "/chat/completions", json=body) as r:
        r.raise_for_status()
        data: dict[str, Any] = await r.json()
    return str(data["choices"][0]["message"]["content"] or "")


async def run(
    base_url: str, model: str, level: str, limit: int, samples: int, only: str = ""
) -> dict[str, Any]:
    forms = [f for f in FORMS if only in f]
    questions = scoring.arithmetic_questions(level, limit, 0)[:limit]
    gate = asyncio.Semaphore(4)
    timeout = aiohttp.ClientTimeout(total=900)
    async with aiohttp.ClientSession(timeout=timeout) as http:

        async def one(form: str, q: Question) -> tuple[str, bool, bool]:
            system, user = FORMS[form]
            async with gate:
                reply = await ask(http, base_url.rstrip("/"), model, system, user(q))
            answer = scoring.canonical(scoring.read_answer(reply).text, q.choices)
            lines = [ln for ln in reply.strip().splitlines() if ln.strip()]
            return form, answer is not None and answer == scoring.gold_canonical(q), len(lines) <= 1

        jobs = [one(f, q) for f in forms for q in questions for _ in range(samples)]
        done = await asyncio.gather(*jobs)
    out: dict[str, Any] = {
        "level": level,
        "questions": len(questions),
        "samples": samples,
        "model": model,
        "forms": {},
    }
    for form in forms:
        rows = [d for d in done if d[0] == form]
        out["forms"][form] = {
            "right": sum(1 for d in rows if d[1]),
            "asked": len(rows),
            "closing_line_alone": sum(1 for d in rows if d[2]),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.prompt_forms")
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--level", default="easy")
    p.add_argument("--limit", type=int, default=12)
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--only", default="", help="run only the forms whose name contains this text")
    p.add_argument("--out")
    a = p.parse_args()
    emit_json(asyncio.run(run(a.base_url, a.model, a.level, a.limit, a.samples, a.only)), a.out)


if __name__ == "__main__":
    main()
