"""The real-model measurement of ``roundtabled eval`` (bench/README.md, "eval"): a private
``opencode serve`` (the pinned package) and ``roundtabled serve`` as child processes, both as
shipped (no patched prompt, no replaced module), then ``roundtabled eval --base-url URL --model
NAME …`` as the user types it, against a local OpenAI-compatible server that is already running
(e.g. llama.cpp's).

``--tasks arithmetic|code --questions N`` are the measurement's own flags (``--count N`` of
``roundtabled eval``); everything after ``--`` goes to ``roundtabled eval`` as it is. The same
command with the same ``--out`` resumes a stopped run: the servers keep their data in
``OUT.servers`` (``--work``), so the daemon resumes the roundtables it had started and the eval's
ledger attaches to them; the eval prints its progress with an ETA on standard error.

    python -m bench.eval_local --base-url http://127.0.0.1:18080/v1 --model local \
        --tasks code --questions 40 -- --out bench/results/eval-code

``--base-url``/``--model`` go to ``roundtabled eval`` as given, lists included: a mixed panel
(``--base-url URL1,URL2 --model local,local15``, the seats dealt the models in turn) is the
eval's, checked there (docs/eval.md, "Running it").

``--debate DIR --base-url URL --model NAME`` runs ``roundtabled start …`` instead (one real
roundtable, e.g. ``--until converged``): DIR becomes the seats' project, written as the eval writes
its own (seats ``seat-a``, ``seat-b``, ``seat-c`` on the model, or on the models in turn, no tools;
the tools and the plugin installed with ``roundtabled install-tool``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from roundtabled.eval.options import DEFAULT_LOCAL_SEATS
from roundtabled.offline.opencode_server import OpenCodeServer, free_port
from roundtabled.service import provider

ANSWER_CLOSING = (
    "Think it through step by step first. On the last line of your reply write only: "
    "Answer: <your final answer>"
)
"""An ``Answer:``-last closing line that ``bench/prompt_forms.py`` compares with the product's
straight against the model server; the measurement here never sets it (the daemon runs as
shipped)."""


_children: list[subprocess.Popen[bytes]] = []
"""The command running now (``roundtabled eval`` or ``start``): what a SIGTERM interrupts."""
_stopping = threading.Event()
"""Set by a SIGTERM: nothing more is started."""
_stop_now = threading.Event()
"""Set by a second SIGTERM: the roundtables still running are not waited for."""
DRAIN_POLL_S = 5.0
"""Seconds between two asks of the daemon while the roundtables in flight end."""


def _on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM (``kill``, a service manager): interrupt the running command as Ctrl-C would (the
    eval writes its partial report); the roundtables it leaves running are then let end (a
    turn cut by stopping the servers would be a failure the product did not make), and the
    daemon and the private server stop as on any other exit; before the command runs, nothing
    more starts. A second SIGTERM stops at once."""
    if _stopping.is_set():
        _stop_now.set()
        return
    _stopping.set()
    for child in list(_children):
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGINT)


def _drain(exe: str, env: dict[str, str]) -> None:
    """Wait until the daemon runs no roundtable (``roundtabled list --json``: none whose
    ``phase`` is not ``done``), or a second SIGTERM; said once on stderr. A daemon that does not
    answer ends the wait (there is nothing to let end)."""
    said = False
    while not _stop_now.is_set():
        try:
            listed = subprocess.run(
                [exe, "list", "--json"], env=env, capture_output=True, timeout=60, check=True
            )
            rows = json.loads(listed.stdout)
        except (subprocess.SubprocessError, ValueError):
            return
        running = [r for r in rows if isinstance(r, dict) and r.get("phase") != "done"]
        if not running:
            return
        if not said:
            print(
                f"bench: {len(running)} roundtable(s) still running; waiting for them to end "
                "before the servers stop (their turns would be cut); kill again to stop now",
                file=sys.stderr,
                flush=True,
            )
            said = True
        _stop_now.wait(DRAIN_POLL_S)


def work_dir(given: Path | None, eval_args: list[str]) -> Path:
    """Where the private servers keep their data: ``given``, else beside the eval's ``--out``
    (``OUT.servers``), else a new temporary directory. The same directory again holds the same
    OpenCode sessions and the daemon's state, so a stopped measurement resumes with the
    roundtables it had started (the daemon resumes them, the eval attaches to them)."""
    if given is not None:
        return given
    for i, arg in enumerate(eval_args):
        out = arg.removeprefix("--out=") if arg.startswith("--out=") else None
        if arg == "--out" and i + 1 < len(eval_args):
            out = eval_args[i + 1]
        if out:
            path = Path(out).expanduser()
            return path.with_name(path.name + ".servers")
    return Path(tempfile.mkdtemp(prefix="rt-eval-local-"))


def control_port(work: Path) -> int:
    """The daemon's control port for the servers in ``work``: the one the run before used
    (``work/control-port``) while it is free — the eval writes that URL into its project's
    ``roundtabled/control.ts``, and a resumed run's OpenCode may load the project before the eval
    writes it again, so with a new port the plugin reported to the old one and the daemon fell
    back to hiding by PATCH —, else a new free one, kept there."""
    kept = work / "control-port"
    with contextlib.suppress(OSError, ValueError):
        port = int(kept.read_text())
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))
        return port
    port = free_port()
    kept.write_text(f"{port}\n")
    return port


async def run(eval_args: list[str], debate: Debate | None = None, work: Path | None = None) -> int:
    work = work_dir(work, eval_args)
    work.mkdir(parents=True, exist_ok=True)
    config = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "agent": {"title": {"disable": True}},
    }
    server = OpenCodeServer(work / "opencode", config)
    await server.start()
    port = control_port(work)
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(work / "rt-config"),
        "XDG_STATE_HOME": str(work / "rt-state"),
        "ROUNDTABLED_CONTROL_PORT": str(port),
        "ROUNDTABLED_SERVER_URL": server.url,
        "ROUNDTABLED_TURN_TIMEOUT": "600",
    }
    if server.password:
        env["OPENCODE_SERVER_PASSWORD"] = server.password
    try:
        return await asyncio.to_thread(_daemon_and_eval, eval_args, env, work, port, debate)
    finally:
        await server.stop()
        print(f"bench: logs in {work}", file=sys.stderr)


@dataclass(frozen=True)
class Debate:
    """One real roundtable instead of the eval: the seats' project and their models (as
    :func:`~roundtabled.service.provider.check_local_models` returns them: one URL or one per
    model; the seats are dealt the models in turn)."""

    project: Path
    base_urls: tuple[str, ...]
    models: tuple[str, ...]
    output_limit: int = provider.DEFAULT_OUTPUT
    """The seats' ``limit.output`` (tokens): less for a slow model, so a turn ends in time."""


def _daemon_and_eval(
    eval_args: list[str],
    env: dict[str, str],
    work: Path,
    port: int,
    debate: Debate | None = None,
) -> int:
    """Start the daemon (``roundtabled serve`` as installed), wait for its ping, run
    ``roundtabled eval`` (or, with ``debate``, ``roundtabled start`` in its project), stop the
    daemon."""
    exe = str(Path(sys.executable).parent / "roundtabled")
    with open(work / "roundtabled.log", "wb") as log:
        daemon = subprocess.Popen(
            [exe, "serve"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/ping", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
            if debate is None:
                cmd = [exe, "eval", *eval_args]
            else:
                _write_project(debate, exe, env)
                cmd = [exe, "start", "--directory", str(debate.project.resolve()), *eval_args]
            if _stopping.is_set():
                return 130
            print("$", " ".join(cmd), file=sys.stderr, flush=True)
            child = subprocess.Popen(cmd, env=env)
            _children.append(child)
            if _stopping.is_set():  # a SIGTERM between the check and the start
                child.send_signal(signal.SIGINT)
            try:
                code = child.wait()
            finally:
                _children.remove(child)
            if _stopping.is_set() and debate is None:
                _drain(exe, env)
            return code
        finally:
            daemon.terminate()
            daemon.wait(15)


def _write_project(debate: Debate, exe: str, env: dict[str, str]) -> None:
    """The seats' project of a real roundtable, as ``roundtabled eval`` writes its own."""
    debate.project.mkdir(parents=True, exist_ok=True)
    models = provider.local_models(debate.base_urls, debate.models)
    config = provider.with_local_models(
        {"$schema": "https://opencode.ai/config.json"},
        models,
        provider.deal(models, DEFAULT_LOCAL_SEATS),
        output=debate.output_limit,
    )
    (debate.project / "opencode.json").write_text(json.dumps(config, indent=2) + "\n")
    subprocess.run([exe, "install-tool", "--project", str(debate.project)], env=env, check=True)


def eval_command(
    base_url: str | None,
    model: str | None,
    tasks: str | None,
    questions: int | None,
    rest: list[str],
) -> list[str]:
    """The ``roundtabled eval`` arguments of the measurement: ``--base-url``/``--model`` and
    ``--tasks``/``--count`` from the script's own flags (when given), then ``rest`` as typed."""
    args: list[str] = []
    if base_url:
        args += ["--base-url", base_url]
    if model:
        args += ["--model", model]
    if tasks:
        args += ["--tasks", tasks]
    if questions is not None:
        args += ["--count", str(questions)]
    return args + rest


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.eval_local")
    p.add_argument("--debate", type=Path, help="run `roundtabled start` in this project instead")
    p.add_argument(
        "--base-url",
        help="the seats' OpenAI-compatible server (e.g. llama.cpp's), or one per --model name, "
        "comma-separated",
    )
    p.add_argument(
        "--model",
        help="the model that server serves (llama-server's --alias), or comma-separated names: "
        "the seats get them in turn (a mixed panel)",
    )
    p.add_argument("--tasks", choices=["arithmetic", "code"], help="the question family")
    p.add_argument("--questions", type=int, help="questions of the family (eval's --count)")
    p.add_argument(
        "--work",
        type=Path,
        help="the private servers' data (default: OUT.servers beside the eval's --out): the "
        "same again resumes the roundtables a stopped run had started",
    )
    p.add_argument(
        "--output-limit",
        type=int,
        default=provider.DEFAULT_OUTPUT,
        help="with --debate: the seats' limit.output (tokens)",
    )
    p.add_argument("eval_args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    rest = a.eval_args[1:] if a.eval_args[:1] == ["--"] else a.eval_args
    debate = None
    if a.debate is not None:
        if not a.base_url or not a.model:
            p.error("--debate needs --base-url and --model")
        try:
            urls, names = provider.check_local_models(a.base_url, a.model)
        except provider.BadModelOption as exc:
            p.error(str(exc))
        debate = Debate(a.debate, tuple(urls), tuple(names), a.output_limit)
        args = rest
    else:
        args = eval_command(a.base_url, a.model, a.tasks, a.questions, rest)
    signal.signal(signal.SIGTERM, _on_sigterm)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started with `&` by a shell without job control, which ignores SIGINT for it: an
        # ignored signal stays ignored across exec, so the eval would ignore the SIGINT a
        # SIGTERM sends it. Handled here, it is the default again in every child.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        sys.exit(asyncio.run(run(args, debate, a.work)))
    except KeyboardInterrupt:  # Ctrl-C: the eval wrote its partial report and said so
        sys.exit(130)


if __name__ == "__main__":
    main()
