"""The toasts the daemon keeps for the 2.x plugin's TUI part (roundtabled/service/notices.py):
each shown once per poller, only its project's, a TUI started later sees none of the past ones,
the progress toasts only with ``progress_toasts``; the route refuses bad input naming the field."""

from __future__ import annotations

import asyncio

from roundtabled.core.commands import Toast
from roundtabled.core.state import RoundtableState
from roundtabled.service.notices import KEEP, Notices


def state(directory: str, ses: str = "ses_abc") -> RoundtableState:
    return RoundtableState.model_validate(
        {
            "session_id": ses,
            "parent_session_id": "ses_parent",
            "directory": directory,
            "title": "(Roundtable) - ORM",
            "agents": ["pm", "dev"],
            "total_rounds": 1,
            "prompt": "Which ORM?",
        }
    )


async def test_a_poller_gets_each_notice_of_its_directory_once_and_none_from_before() -> None:
    notices = Notices()
    notices.add(state("/p"), "Roundtable started: old", "info")
    start = await notices.wait(None, "/p", 0)
    assert start == {"notices": [], "next": 1}  # a TUI started now shows no past notice
    notices.add(state("/other"), "elsewhere", "info")
    notices.add(state("/p"), "Roundtable concluded: ORM", "success")
    got = await notices.wait(start["next"], "/p", 0)
    assert [(n["message"], n["variant"], n["seq"]) for n in got["notices"]] == [
        ("Roundtable concluded: ORM", "success", 3)
    ]
    assert got["notices"][0]["parentSessionID"] == "ses_parent"
    again = await notices.wait(got["next"], "/p", 0)
    assert again == {"notices": [], "next": 3}  # nothing twice


async def test_a_long_poll_ends_with_the_next_notice() -> None:
    notices = Notices()
    waiting = asyncio.create_task(notices.wait(0, None, 30))
    await asyncio.sleep(0)
    assert not waiting.done()
    notices.add(state("/p"), "Roundtable failed: ORM", "warning")
    got = await asyncio.wait_for(waiting, 5)
    assert [n["message"] for n in got["notices"]] == ["Roundtable failed: ORM"]


async def test_progress_toasts_are_kept_only_when_on_and_the_buffer_is_bounded() -> None:
    off = Notices(progress=False)
    off.toast(state("/p"), Toast("pm answered", "info", progress="turn"))
    off.toast(state("/p"), Toast("Roundtable concluded: ORM", "success"))
    assert [n["message"] for n in off.after(0, None)] == ["Roundtable concluded: ORM"]
    on = Notices()
    for i in range(KEEP + 5):
        on.toast(state("/p"), Toast(f"turn {i}", "info", progress="turn"))
    kept = on.after(0, "/p")
    assert len(kept) == KEEP and kept[-1]["message"] == f"turn {KEEP + 4}"
