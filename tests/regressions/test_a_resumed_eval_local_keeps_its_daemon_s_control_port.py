"""A measurement resumed with ``python -m bench.eval_local`` (the same ``--out``) gave its daemon
a new control port each run. The eval writes that URL into its project's
``roundtabled/control.ts``, but the resumed OpenCode had loaded the project with the old file
(the daemon's recovery resumed its roundtables there first), so the plugin reported to the old
port and every roundtable after the resume fell back to hiding by PATCH ("the roundtable plugin
did not report itself loaded in S2's server instance", questions easy-0-9 on of the arithmetic
run). Now a run keeps its port in the servers' directory and takes it again while it is free."""

from __future__ import annotations

import socket
from pathlib import Path

from bench.eval_local import control_port


def test_a_resumed_eval_local_keeps_its_daemon_s_control_port(tmp_path: Path) -> None:
    first = control_port(tmp_path)
    assert (tmp_path / "control-port").read_text().strip() == str(first)
    assert control_port(tmp_path) == first  # the resumed run


def test_a_kept_port_taken_by_something_else_is_replaced(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        (tmp_path / "control-port").write_text(f"{busy}\n")
        port = control_port(tmp_path)
    assert port != busy
    assert (tmp_path / "control-port").read_text().strip() == str(port)
