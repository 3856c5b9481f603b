"""Following a running roundtable: its turns as they finish, a progress line, the result."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Any

from roundtabled.cli.client import EXIT_OK, EXIT_UNCONCLUDED, CliError, ControlClient
from roundtabled.cli.render import print_turn


async def follow(
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
                    print_turn(entry, colors)

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
                    print_turn(entry, colors)
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


def exit_for(result: dict[str, Any]) -> int:
    """The exit code of a finished roundtable's result (3 when it did not conclude normally)."""
    if result.get("phase") == "aborted" or result.get("endReason") in ("all-failed", "cancelled"):
        return EXIT_UNCONCLUDED
    return EXIT_OK
