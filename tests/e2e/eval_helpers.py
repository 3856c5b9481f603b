"""Shared set-up of the ``roundtabled eval`` tests (tests/e2e/test_eval.py and the eval
regressions): seats whose answers are known in advance (seeded per seat, question and round), the
run's target, a small run's options, and a run interrupted after some questions (Ctrl-C).

- :func:`responder`: the scripted seats' replies (:func:`planned_answer`, :func:`confidence`);
- :func:`target`: the daemon and server of an end-to-end environment;
- :func:`scripted_run`: scripts the seats and gives the options of a small run in ``tmp_path/run``;
- :func:`interrupt_after`: runs the eval until ``n`` questions are recorded, then cancels it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from roundtabled.core.scoring import evaluate_expression
from roundtabled.eval.options import EvalOptions, Target
from roundtabled.eval.run import run_eval
from roundtabled.offline.scripted_actions import Text
from roundtabled.offline.scripted_llm import RecordedRequest, default_text

from .conftest import RT

AGENTS = ["pm", "dev", "rv"]
ACCURACY = {"pm": 0.8, "dev": 0.55, "rv": 0.35}
"""Each seat's chance to be right in its opening; later rounds move towards the truth."""
LATER = {"pm": 0.85, "dev": 0.7, "rv": 0.5}


def _draw(*key: object) -> float:
    digest = hashlib.sha256(repr(key).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def planned_answer(agent: str, expr: str, rnd: int) -> int:
    """What ``agent`` answers to ``expr`` in round ``rnd`` (1-based): right with its seeded
    chance, else a wrong number of its own."""
    gold = evaluate_expression(expr)
    p = ACCURACY[agent] if rnd == 1 else LATER[agent]
    if _draw(agent, expr, rnd) < p:
        return gold
    return gold + 1 + int(_draw("wrong", agent, expr, rnd) * 3)


def confidence(agent: str, expr: str, rnd: int) -> int:
    return 3 + int(_draw("conf", agent, expr, rnd) * 7)


def responder(req: RecordedRequest) -> Text | None:
    """A seat's reply: its :func:`planned_answer` to the question of the request in its round."""
    if req.agent not in AGENTS:
        return None
    text = json.dumps(req.messages)
    exprs = re.findall(r"What is the result of ([0-9+*-]+)\?", text)
    rounds = re.findall(r"Round (\d+)/\d+", req.last_user_text)
    if not exprs or not rounds:
        return None
    expr, rnd = exprs[0], int(rounds[-1])
    ans = planned_answer(req.agent, expr, rnd)
    return Text(
        # Diverse prose (as the default replies): similar turns would stop the debate as a loop.
        text=f"{default_text(req.agent, expr, rnd)}\n\nPosition: {ans} — my result "
        f"(confidence {confidence(req.agent, expr, rnd)}/10)"
    )


def target(rt: RT) -> Target:
    """The daemon (its control URL now) and the OpenCode server of ``rt``."""
    return Target(
        control_url=rt.control,
        token_file=rt.daemon.settings.token_file,
        server_url=rt.server.url,
        server_password=rt.server.password,
    )


def scripted_run(rt: RT, tmp_path: Path, **options: Any) -> EvalOptions:
    """The seats of ``rt`` answer by :func:`responder`; returns the options of a run of the
    seats :data:`AGENTS` in ``tmp_path/run`` on easy arithmetic with seed 1 (``options``: the
    rest, e.g. ``count=6, protocols=["single", "vote"]``)."""
    rt.llm.responder = responder
    return EvalOptions(
        agents=AGENTS, out=tmp_path / "run", **{"level": "easy", "seed": 1, **options}
    )


async def interrupt_after(opts: EvalOptions, rt: RT, n: int, timeout: float = 120) -> list[str]:
    """Run the eval of ``opts`` on ``rt`` until ``n`` questions are recorded, then cancel it as
    Ctrl-C does (asserting its exit code 130); returns the ids recorded while it ran."""
    enough = asyncio.Event()
    seen: list[str] = []

    def on_record(rec: dict[str, Any]) -> None:
        seen.append(rec["id"])
        if len(seen) >= n:
            enough.set()

    task = asyncio.create_task(run_eval(opts, target(rt), on_record))
    await asyncio.wait_for(enough.wait(), timeout)
    task.cancel()
    assert await task == 130
    return seen
