"""Following a running roundtable: its turns as they finish, a progress line, the result."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Any

from roundtabled.cli.client import (
    EXIT_OK,
    EXIT_UNCONCLUDED,
    EXIT_USAGE,
    RESUMES_IF_RESTARTED,
    CliError,
    ConnectionLost,
    ControlClient,
)
from roundtabled.cli.render import print_turn
from roundtabled.core.state import OBSERVER_AGENT
from roundtabled.core.verdict import note_key

NOT_SERVED = 501
"""The daemon's status for a route it does not serve for its server's major (control-api.md)."""
REATTACH_S = 60.0
"""How long a waiting ``start``/``watch`` tries to reattach after losing the daemon (s)."""
REATTACH_PAUSE_S = 1.0
"""Pause between two reattach attempts (s)."""


def turn_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies one history entry of the export or the feed (kind, agent, round,
    message): a turn is printed once."""
    return (entry.get("kind"), entry.get("agent"), entry.get("round"), entry.get("messageID"))


async def follow(
    cc: ControlClient,
    ses: str,
    *,
    colors: dict[str, str],
    show_turns: bool = True,
    reattach_s: float = REATTACH_S,
    skip: set[tuple[Any, ...]] | None = None,
) -> dict[str, Any]:
    """Print the turns of ``ses`` as they finish until it is done; returns the final result.

    On a terminal, stderr carries one progress line (round, agent speaking, elapsed seconds since
    the roundtable started) refreshed every second. The observer's turn is not printed: its
    summary is part of the final result text.

    When the daemon goes away (stopped, restarted) this reattaches by itself for up to
    ``reattach_s`` seconds (one attempt per second; a restarted daemon resumes the roundtable
    from S2), printing no turn twice. A roundtable the daemon no longer holds in memory because
    it concluded before a restart is answered from its stored status.

    ``skip``: the :func:`turn_key` of turns not to print (``extend``: the earlier debate).

    Raises:
        CliError: the roundtable is unknown, or the daemon did not come back in time.
    """
    printed: set[tuple[Any, ...]] = set(skip or ())
    lost_at: float | None = None
    while True:
        try:
            return await _follow_once(cc, ses, colors, show_turns, printed, lost_at is not None)
        except CliError as exc:
            if not exc.away and exc.code == EXIT_USAGE:
                stored = await _stored_status(cc, ses)
                if stored is None:
                    raise  # no roundtable of ours
                if stored.get("phase") not in ("active", "observing"):
                    return {**stored, "done": True, "text": stored.get("summary") or ""}
                # Active in S2 but not held by this daemon: it is (re)starting and resumes it.
                if lost_at is None:
                    lost_at = time.monotonic()
                elif time.monotonic() - lost_at > reattach_s:
                    raise
                await asyncio.sleep(REATTACH_PAUSE_S)
                continue
            if not exc.away:
                raise
            # Gone, stopping, or starting (recovering its roundtables): it comes back.
            if lost_at is None:
                lost_at = time.monotonic()
                print(
                    f"lost roundtabled (stopped or restarting); reattaching to {ses} for up to "
                    f"{reattach_s:g} s…",
                    file=sys.stderr,
                    flush=True,
                )
            elif time.monotonic() - lost_at > reattach_s:
                raise CliError(
                    f"Error: roundtabled did not come back within {reattach_s:g} s; "
                    + RESUMES_IF_RESTARTED.format(ses=ses)
                ) from None
        await asyncio.sleep(REATTACH_PAUSE_S)


async def _stored_status(cc: ControlClient, ses: str) -> dict[str, Any] | None:
    """The status of ``ses`` as the daemon reads it (also from S2's state block when it holds
    the roundtable in memory no more, or not yet); ``None`` if it is no roundtable."""
    try:
        st = await cc.call("GET", f"/v1/roundtables/{ses}")
    except CliError:
        return None
    return st if isinstance(st, dict) else None


async def _follow_once(
    cc: ControlClient,
    ses: str,
    colors: dict[str, str],
    show_turns: bool,
    printed: set[tuple[Any, ...]],
    reattaching: bool,
) -> dict[str, Any]:
    """One attachment: the turns finished so far (those not in ``printed``), then the feed."""
    started = time.monotonic()
    progress: dict[str, Any] = {"round": None, "total": None, "agent": None}
    try:
        st = await cc.call("GET", f"/v1/roundtables/{ses}")
        started -= float(st.get("elapsed") or 0)
        progress.update(round=st.get("round"), total=st.get("totalRounds"), agent=st.get("agent"))
        if st.get("phase") == "observing":
            progress.update(round=None, agent=_observer_label(st.get("observer")))
    except CliError:
        pass  # an unknown roundtable: the progress feed below reports it
    tty = sys.stderr.isatty()

    def draw() -> None:
        if not tty or not progress["agent"]:
            return
        total = f"/{progress['total']}" if progress["total"] else ""
        where = f"round {progress['round']}{total} · " if progress["round"] else ""
        sys.stderr.write(
            f"\r\x1b[K{where}{progress['agent']} is speaking · {time.monotonic() - started:.0f}s"
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

    key = turn_key

    pumper = asyncio.create_task(pump())
    await opened.wait()
    if failure and isinstance(failure[0], CliError) and failure[0].status == NOT_SERVED:
        # The daemon drives a server major whose progress feed it does not serve yet (OpenCode
        # 2.x): no turn is shown as it finishes, the result is waited for instead.
        print(
            f"note: this daemon does not stream {ses}'s turns (OpenCode 2.x); waiting for the "
            "result",
            file=sys.stderr,
            flush=True,
        )
        while True:
            data = await cc.call(
                "GET", f"/v1/roundtables/{ses}/result", params={"wait": "25"}, timeout=40
            )
            if isinstance(data, dict) and data.get("done"):
                return data
    if not failure and reattaching:
        print(f"reattached to {ses}", file=sys.stderr, flush=True)
    if not failure:
        with contextlib.suppress(CliError):
            past = await cc.call("GET", f"/v1/roundtables/{ses}/export", params={"format": "json"})
            for entry in past.get("turns") or []:
                if key(entry) in printed:
                    continue
                printed.add(key(entry))
                if show_turns and entry.get("kind") != "observer":
                    print_turn(entry, colors)

    async def items() -> Any:
        while (item := await queue.get()) is not None:
            yield item
        if failure:
            raise failure[0]

    ticker = asyncio.create_task(tick()) if tty else None
    result: dict[str, Any] | None = None
    # A running note (a budget the server's usage cannot enforce) is said once, when it appears.
    said: set[str] = set()
    try:
        async for item in items():
            kind = item.get("type")
            if kind == "turn":
                progress["agent"] = None
                for note in item.get("notes") or []:
                    if note_key(note) not in said:
                        said.add(note_key(note))
                        clear()
                        print(f"warning: {note}", file=sys.stderr, flush=True)
                entry = item["entry"]
                if key(entry) in printed:
                    continue
                printed.add(key(entry))
                if show_turns and entry.get("kind") != "observer":
                    clear()
                    print_turn(entry, colors)
            elif kind == "prompt":
                progress.update(round=item.get("round"), agent=item.get("agent"))
                if item.get("kind") == "observer":
                    # The observer speaks after the last round, in none of its own.
                    progress.update(round=None, agent=_observer_label(item.get("agent")))
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
        try:
            data = await cc.call("GET", f"/v1/roundtables/{ses}/result", params={"wait": "0"})
        except CliError:
            # The feed ended without the result: the daemon is stopping or restarting.
            raise ConnectionLost("Error: the progress feed ended early") from None
        if not data.get("done"):
            # The daemon closed the feed (it is stopping): the roundtable goes on after it.
            raise ConnectionLost("Error: the progress feed ended before the roundtable finished")
        result = data
    return result


def _observer_label(name: object) -> str:
    """``the observer`` (built-in) or ``the observer (rv)`` (a named one) for the progress line."""
    if not name or name in ("built-in", OBSERVER_AGENT):
        return "the observer"
    return f"the observer ({name})"


def exit_for(result: dict[str, Any]) -> int:
    """The exit code of a finished roundtable's result: 3 when it did not conclude normally —
    aborted, every seat failed, cancelled, or it ended early (the observer failed, a timeout, a
    budget …: any end reason but ``completed`` and ``converged``) with no decision in its
    verdict —, else 0: degraded but decided included (README, "Exit codes")."""
    if result.get("phase") == "aborted" or result.get("endReason") in ("all-failed", "cancelled"):
        return EXIT_UNCONCLUDED
    contract = result.get("result")
    if isinstance(contract, dict) and result.get("endReason") not in ("completed", "converged"):
        # An early end with no decision is no success to a script that reads the exit code.
        verdict = contract.get("verdict")
        if not isinstance(verdict, dict) or not verdict.get("decision"):
            return EXIT_UNCONCLUDED
    return EXIT_OK
