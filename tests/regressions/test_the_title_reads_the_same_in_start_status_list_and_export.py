"""The title was ``(Roundtable) - …`` in ``start``, ``status`` and the export but bare in
``list``. Every view names a roundtable by its title without the generated prefix (a title
given with ``--title`` as it is)."""

from __future__ import annotations

import re

from tests.e2e.demo_serve import DemoServe

TOPIC = "Should we move the nightly jobs to a queue?"


def test_start_status_list_and_export_name_it_alike(demo: DemoServe) -> None:
    run = demo.start("--rounds", "1", topic=TOPIC)
    assert run.returncode == 0, (run.stdout, run.stderr)
    ses = demo.session_of(run)
    heading = f"Roundtable {ses} — {TOPIC}"
    assert heading in run.stderr.splitlines()
    assert heading in run.stdout.splitlines()  # the result's first line
    assert demo.cli("status", ses).stdout.splitlines()[0] == heading
    row = next(line for line in demo.cli("list").stdout.splitlines() if line.startswith(ses))
    assert row.endswith(TOPIC)
    assert demo.cli("export", ses, "--format", "md").stdout.startswith(f"# {TOPIC}\n")
    assert "(Roundtable)" not in run.stdout + run.stderr


def test_a_given_title_is_kept_as_it_is(demo: DemoServe) -> None:
    run = demo.start("--rounds", "1", "--title", "Queue: yes or no?", topic=TOPIC)
    ses = demo.session_of(run)
    assert demo.cli("status", ses).stdout.splitlines()[0] == f"Roundtable {ses} — Queue: yes or no?"
    assert re.search(rf"^{ses} .*Queue: yes or no\?$", demo.cli("list").stdout, re.M)
