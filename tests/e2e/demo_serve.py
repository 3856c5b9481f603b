"""A ``scripts/demo --serve`` (``python -m roundtabled.demo --serve``) shared by a test module,
and the real CLI run against it as a person runs it from another shell (the demo's ``export``
line): what that person reads."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import cli_helpers

RT_BIN = str(cli_helpers.RT_BIN)
READY = "Ctrl-C here stops everything"


@dataclass
class DemoServe:
    """A running ``demo --serve``: its printed lines and the environment of its export line."""

    proc: subprocess.Popen[str]
    lines: list[str]
    env: dict[str, str]
    project: str
    server: str
    """The demo's ``opencode serve`` (``http://127.0.0.1:PORT``)."""

    def cli(self, *argv: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """``roundtabled ARGV`` as the person runs it; stdout and stderr apart."""
        return subprocess.run(
            [RT_BIN, *argv], env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def start(self, *flags: str, topic: str) -> subprocess.CompletedProcess[str]:
        """``roundtabled start --agents pm,dev,rv --directory PROJECT FLAGS TOPIC``."""
        return self.cli(
            "start", "--agents", "pm,dev,rv", "--directory", self.project, *flags, topic
        )

    def session_of(self, run: subprocess.CompletedProcess[str]) -> str:
        """The roundtable a ``start`` named (``Roundtable ses_… — title`` on its stderr)."""
        m = re.search(r"^Roundtable (ses_\w+) — ", run.stderr, re.M)
        assert m, (run.stdout, run.stderr)
        return m.group(1)


def serve_demo(tmp: Path) -> Iterator[DemoServe]:
    """Start ``demo --serve --opencode 1`` with its temporary directory under ``tmp``, yield it
    once ready, stop it (SIGTERM: its own clean-up) after."""
    env = cli_helpers.user_shell_env()
    env["TMPDIR"] = str(tmp)
    proc = subprocess.Popen(
        # OpenCode 1.x: the features these tests show are not all run on 2.x yet
        [sys.executable, "-m", "roundtabled.demo", "--serve", "--opencode", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        while not any(READY in line for line in lines):
            line = proc.stdout.readline()
            if not line:
                pytest.fail("demo --serve ended early:\n" + "".join(lines))
            lines.append(line)
        text = "".join(lines)
        export = next(line for line in lines if line.strip().startswith("export "))
        for assignment in shlex.split(export.strip())[1:]:
            key, _, value = assignment.partition("=")
            env[key] = value
        project = re.search(r"\(project (\S+)\)", text)
        server = re.search(r"demo: OpenCode (http://\S+)", text)
        assert project and server, text
        yield DemoServe(proc, lines, env, project.group(1), server.group(1))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
