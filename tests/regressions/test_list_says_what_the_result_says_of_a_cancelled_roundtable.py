"""``list`` showed ``done 7/50`` for a roundtable ``start`` called ``cancelled, 6/50 rounds`` (the
round it was cut in, against the rounds that ran in full), and an extension after that cancel
read differently again. ``list`` now shows a finished roundtable by its end reason and the
rounds that ran in full: the words of its result."""

from __future__ import annotations

import json
import re
import subprocess
import time

from tests.e2e.demo_serve import RT_BIN, DemoServe


def _status_line(out: str) -> tuple[str, str]:
    m = re.search(r"^Status: (\w+), (\d+/\d+) rounds", out, re.M)
    assert m, out
    return m.group(1), m.group(2)


def _list_row(demo: DemoServe, ses: str) -> tuple[str, str]:
    row = next(line for line in demo.cli("list").stdout.splitlines() if line.startswith(ses))
    status, rounds = row.split()[1:3]
    return status, rounds


def test_a_cancelled_and_then_extended_roundtable_reads_alike(demo: DemoServe) -> None:
    start = subprocess.Popen(
        [RT_BIN, "start", "--agents", "pm,dev,rv", "--directory", demo.project, "--rounds",
         "50", "Should we rename the product?"],
        env=demo.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert start.stderr is not None
        ses = re.search(r"^Roundtable (ses_\w+) — ", start.stderr.readline())
        assert ses, "start named no roundtable"
        sid = ses.group(1)
        deadline = time.monotonic() + 120
        while json.loads(demo.cli("status", sid, "--json").stdout)["round"] < 3:
            assert time.monotonic() < deadline, "the debate never reached round 3"
            time.sleep(0.2)
        cancel = demo.cli("cancel", sid)
        assert cancel.returncode == 0, (cancel.stdout, cancel.stderr)
        out, _ = start.communicate(timeout=120)
    finally:
        if start.poll() is None:
            start.kill()
            start.communicate()
    said = _status_line(out)
    assert said[0] == "cancelled"
    assert _list_row(demo, sid) == said

    extend = demo.cli("extend", sid, "--rounds", "2", "Continue: settle it")
    assert extend.returncode == 0, (extend.stdout, extend.stderr)
    assert _list_row(demo, sid) == _status_line(extend.stdout)
