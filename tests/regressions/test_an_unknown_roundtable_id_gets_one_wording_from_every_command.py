"""``status``, ``watch``, ``export`` and ``cancel`` of an id no roundtable has answered in four
wordings ("SES: no roundtable … is known", the same without "SES:", "session … does not exist",
"no active roundtable …"). Each now says the one line ``status`` says."""

from __future__ import annotations

from tests.e2e.demo_serve import DemoServe

UNKNOWN = "ses_unknown0000000000000000"


def test_status_watch_export_and_cancel_say_the_same(demo: DemoServe) -> None:
    said = {}
    for command in ("status", "watch", "export", "cancel"):
        run = demo.cli(command, UNKNOWN)
        assert run.returncode == 2, (command, run.stdout, run.stderr)
        said[command] = run.stderr.strip()
    line = f"Error: SES: no roundtable '{UNKNOWN}' is known to this daemon"
    assert said == dict.fromkeys(said, line)
