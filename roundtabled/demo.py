"""A real roundtable end to end on a fresh machine: ``scripts/demo`` (module
``roundtabled.demo``).

It starts a private ``opencode serve`` (the pinned npm package; ``--opencode 2``, the default:
``@opencode/cli`` pinned in ``opencode-v2/``, under a session of its own that the roundtables run
in; ``--opencode 1``: ``opencode-ai``) in a temporary project with three debaters (pm, dev, rv
from ``examples/opencode.json``), installs the tools for that major, runs ``roundtabled serve`` as
a separate process, and drives a 3-agent × 2-round debate with the real CLI (``roundtabled
start``), then a tour of the options (:func:`tour`: ``list``, ``status``, ``export --format md``,
``--dry-run``, ``extend``, ``--until``, ``--side``, ``--context recent``, ``--opening
independent``): each shown working, or, where the daemon refuses it as not run on OpenCode 2.x
yet, one line ``demo: not on OpenCode 2 yet: …`` with its words; the end names the OpenCode
version it ran and which options were which.

Model: ``--base-url URL --model NAME`` (or ``ROUNDTABLED_DEMO_BASE_URL`` and
``ROUNDTABLED_DEMO_MODEL``) uses a local OpenAI-compatible server (llama.cpp, Ollama, LM Studio,
vLLM): the demo writes its provider configuration (:mod:`roundtabled.service.provider`).
``ROUNDTABLED_DEMO_MODEL=provider/model`` alone (e.g. ``anthropic/claude-sonnet-4-5``) uses your
own model through your OpenCode credentials (``opencode auth login`` stores them under
``$XDG_DATA_HOME/opencode``); otherwise the offline scripted model answers (no network), and the
demo says so. ``--turn-timeout S`` gives a slow model more time per turn (the demo daemon's
``turn_timeout``); ``--output-limit N`` / ``--context-limit N`` set the local model's
``limit.output`` / ``limit.context`` (with ``--base-url``). The flags are checked before anything
starts, by the rules of ``roundtabled start`` and ``roundtabled eval``: a bad or inapplicable one
is one ``Error:`` line, exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from roundtabled.core import validation
from roundtabled.errors import ValidationFailed
from roundtabled.offline.opencode_server import OpenCodeServer, free_port, offline_config
from roundtabled.offline.orchestrator import orchestrator_reply
from roundtabled.offline.panel import OBSERVER, panel_reply, parse_seat_prompt, reply_text
from roundtabled.offline.scripted_actions import Action, HttpError
from roundtabled.offline.scripted_llm import RecordedRequest, Responder, ScriptedLLM
from roundtabled.opencode.v2 import V2Client
from roundtabled.service import install, provider

TOPIC = (
    "Our payments service is a 6-year-old Django monolith. Should we split it into "
    "microservices this year? Round 1: positions. Round 2: converge on a plan."
)

SCRIPT: dict[str, list[str]] = {
    "pm": [
        "From the product side the pain is release speed: every payments change waits for the "
        "monthly train, and two enterprise deals are blocked on faster compliance fixes. I would "
        "split only what slows us down, starting with the reconciliation jobs.\n\n"
        "Position: split the slow parts — extract reconciliation first (confidence 6/10)",
        "I can accept the modular monolith if we commit to a weekly release of the payments "
        "module and publish the ledger interface by the end of the quarter so partners can "
        "integrate against it.\n\n"
        "Position: modular monolith — weekly module releases and a published ledger interface "
        "(confidence 7/10)",
    ],
    "dev": [
        "A full split is risky: the ledger, refunds and payouts share one Postgres schema and "
        "forty cross-module joins. Extracting services means distributed transactions we do not "
        "have the tooling for. I propose enforcing module boundaries inside the monolith first."
        "\n\nPosition: modular monolith — enforce module boundaries first (confidence 8/10)",
        "Agreed on weekly releases. Concretely: package boundaries enforced by import-linter, "
        "reconciliation moved to its own worker with its own schema, and a strangler interface "
        "for payouts. Any service extraction waits until those seams hold for two quarters."
        "\n\nPosition: modular monolith — seams first, extraction after two quarters "
        "(confidence 8/10)",
    ],
    "rv": [
        "As reviewer I see two risks nobody priced: on-call load doubles with every new service, "
        "and audit evidence today comes from one database. Whatever we do must keep a single "
        "audit trail and an owner per module.\n\n"
        "Position: modular monolith — one audit trail, an owner per module (confidence 7/10)",
        "The converged plan is sound if each boundary gets an owner and an audit hook. I would "
        "add a kill criterion: if the modular seams still leak after two quarters, we stop and "
        "revisit instead of extracting by default.\n\n"
        "Position: modular monolith — with owners, audit hooks and a kill criterion "
        "(confidence 8/10)",
    ],
}
EXTENDED = re.compile(r"^From round \d+ \((?:continuation|new topic)\): ", re.M)
"""The line an extended roundtable's observer prompt has per extension
(:func:`roundtabled.core.result.observer_prompt`): the demo's fixed summary, written for rounds 1
and 2, is not that observer's answer."""
PM_CHANGED = "Changed: dev's shared-schema numbers make a split this year too risky.\n\n"
"""pm's second turn starts with this line (its label changed, docs/result.md)."""
VERDICT = {
    "decision": "keep a modular monolith with weekly payments releases; extract services only "
    "along seams proven for two quarters",
    "confidence": 0.8,
    "consensus": "unanimous",
    "agreements": ["no big-bang split", "weekly payments releases", "an owner per module"],
    "disagreements": [],
    "openQuestions": ["Who owns the ledger interface?"],
    "nextSteps": ["publish the ledger interface this quarter", "review the seams in two quarters"],
}
DEGRADED_SUMMARY = (
    "**Executive summary.** pm and rv lean towards a modular monolith; dev did not take part, "
    "so the engineering cost of either path was not argued.\n\n"
    "**Key points.** *pm*: release speed blocks deals. *rv*: a single audit trail and an owner "
    "per module.\n\n**Decisions.** Start with a modular monolith; revisit with dev.\n\n"
    "**Open questions.** The cost of splitting the shared schema.\n\n"
    "**Next steps.** Re-run the roundtable once dev's model is reachable."
)
DEGRADED_VERDICT = {
    # Claims more than the panel gave: the daemon lowers it (dev never spoke, docs/result.md).
    "decision": "start with a modular monolith; revisit when dev's cost view is in",
    "confidence": 0.8,
    "consensus": "unanimous",
    "agreements": ["a modular monolith is the safer start"],
    "disagreements": [],
    "openQuestions": ["the cost of splitting the shared schema"],
    "nextSteps": ["re-run with dev"],
}


def _with_verdict(prose: str, verdict: dict[str, Any]) -> str:
    """The observer's reply: the prose sections, then the fenced verdict (docs/result.md)."""
    return f"{prose}\n\n6. **Verdict**\n```json\n{json.dumps(verdict, indent=1)}\n```"


OBSERVER_SUMMARY = (
    "**Executive summary.** The panel rejects a big-bang split of the payments monolith and "
    "converges on a modular monolith with weekly releases, extracting services only along "
    "seams proven for two quarters.\n\n"
    "**Key points.** *pm*: release speed blocks deals; split what slows us down. *dev*: "
    "shared schema and joins make services risky; enforce boundaries first. *rv*: on-call "
    "load and a single audit trail must be protected.\n\n"
    "**Decisions.** Weekly payments releases; import-linter boundaries; reconciliation worker"
    " with its own schema; a strangler interface for payouts; an owner and audit hook per "
    "module.\n\n"
    "**Open questions.** Who owns the ledger interface? What tooling will distributed "
    "transactions need later?\n\n"
    "**Next steps.** Publish the ledger interface this quarter, set up the reconciliation "
    "worker, and review the seams in two quarters against the kill criterion."
)


def _examples_config() -> dict[str, Any]:
    here = Path(__file__).resolve().parents[1] / "examples" / "opencode.json"
    data: dict[str, Any] = json.loads(here.read_text()) if here.exists() else {}
    # Inline the prompt files (`"prompt": "{file:./agents/pm.md}"`, relative to examples/): the
    # demo writes the config into another directory, where the relative paths would not resolve.
    for agent in (data.get("agent") or {}).values():
        prompt = agent.get("prompt") if isinstance(agent, dict) else None
        if isinstance(prompt, str) and prompt.startswith("{file:") and prompt.endswith("}"):
            agent["prompt"] = (here.parent / prompt[6:-1]).read_text()
    return data


def _bin(name: str) -> str:
    cand = Path(sys.executable).parent / name
    return str(cand) if cand.exists() else name


def _show(args: list[str]) -> None:
    """Print the command line the demo runs next (``$ roundtabled …``)."""
    print(
        f"\n$ {' '.join(args[:1] + [a if ' ' not in a else repr(a) for a in args[1:]])}", flush=True
    )


def demo_reply(degraded: bool = False) -> Responder:
    """The offline model's answer to a request nothing is queued for
    (:attr:`ScriptedLLM.responder <roundtabled.offline.scripted_llm.ScriptedLLM.responder>`):

    - the orchestrator (``build``) convenes a roundtable when asked
      (:func:`roundtabled.offline.orchestrator.orchestrator_reply`);
    - the demo's own debate (its :data:`TOPIC`) gets the demo's script (:data:`SCRIPT`, pm's
      second turn with a ``Changed:`` line) and its observer the demo's summary, in every run of
      it, not only the first; once extended (its observer's prompt names the extension,
      :data:`EXTENDED`) the seats' and the observer's turns are the offline panel's, so the
      extended result's decision and summary are those of the extension's positions;
    - any other debate gets the offline panel (:func:`roundtabled.offline.panel.panel_reply`):
      real positions, some agreeing in other words, one changing its mind, a side argued as
      assigned, numbers for eval's questions.

    ``degraded``: dev's provider fails on every turn (``--degraded``).
    """

    def reply(rec: RecordedRequest) -> Action | None:
        if degraded and rec.agent == "dev" and rec.kind == "turn":
            return HttpError(status=400, message="dev's provider is down")
        action = orchestrator_reply(rec)
        if action is not None:
            return action
        seat = parse_seat_prompt(rec.last_user_text) if rec.kind == "turn" else None
        if seat is not None and seat.topic == TOPIC and seat.agent in SCRIPT:
            texts = SCRIPT[seat.agent]
            if seat.round <= len(texts):
                text = texts[seat.round - 1]
                if (seat.agent, seat.round) == ("pm", 2):
                    text = ("Changed: rv's audit point.\n\n" if degraded else PM_CHANGED) + text
                return reply_text(text).model_copy(update={"chunk_delay": 0.01})
        if (
            rec.kind == "turn"
            and rec.agent == OBSERVER
            and f"Topic: {TOPIC}\n" in rec.last_user_text
            and not EXTENDED.search(rec.last_user_text)
        ):
            summary = (
                _with_verdict(DEGRADED_SUMMARY, DEGRADED_VERDICT)
                if degraded
                else _with_verdict(OBSERVER_SUMMARY, VERDICT)
            )
            return reply_text(summary, chunk_size=40)
        return panel_reply(rec)

    return reply


async def _offline_model(
    args: argparse.Namespace, agents_cfg: dict[str, Any]
) -> tuple[ScriptedLLM, dict[str, Any]]:
    """Start the offline scripted model answering with :func:`demo_reply`; returns it and the
    OpenCode config pointing at it."""

    # Usage as measured from each request (its characters / 4), as a real provider reports it:
    # a budget, the dry run's estimate and eval's token columns then mean something offline.
    llm = ScriptedLLM(measured_tokens=True)
    llm.responder = demo_reply(args.degraded)
    await llm.start()
    config = offline_config(llm.base_url)
    for name in ("pm", "dev", "rv"):
        if name in agents_cfg:
            config["agent"][name] = {
                **agents_cfg[name],
                "prompt": config["agent"][name]["prompt"]
                + "\n"
                + str(agents_cfg[name].get("prompt", "")),
            }
    return llm, config


@dataclass
class DemoEnv:
    """A running demo set-up: the OpenCode server, the daemon and how to reach them."""

    work: Path
    server: OpenCodeServer
    env: dict[str, str]
    """The environment for ``roundtabled`` commands that talk to this daemon."""
    control_port: int
    token_file: Path
    config_file: Path
    """The daemon's configuration file: ``ROUNDTABLED_CONFIG`` of every command run on it."""
    daemon: subprocess.Popen[bytes]
    major: int = 1
    """The OpenCode major the demo runs (``--opencode``)."""
    offline: bool = True
    """The offline scripted model answers (no ``--base-url``, no ``ROUNDTABLED_DEMO_MODEL``)."""
    parent: str | None = None
    """On OpenCode 2.x, the session the demo's roundtables run under (S1): 2.x runs a roundtable
    in a child session of the asking session (docs/design.md, "The 2.x shell")."""

    @property
    def version(self) -> str:
        """The OpenCode release that answers (``/global/health``; 2.x: ``/api/info``)."""
        return self.server.version or "(version not reported)"


def write_config(
    path: Path,
    work: Path,
    *,
    server_url: str,
    port: int,
    token_file: Path,
    turn_timeout: float | None = None,
    server_password: str | None = None,
) -> None:
    """The demo daemon's own configuration file (docs: README, "Configuration"): where the
    server and the control API are, its token file and state, and a ``demo`` preset of the
    example panel. Every command that sets ``ROUNDTABLED_CONFIG`` to it (the ``export`` line of
    ``--serve``) reads what the daemon reads, so ``roundtabled config`` and ``presets`` describe
    this daemon, not ``~/.config/roundtabled``.

    Args:
        path: the file to write (its directory is created).
        work: the demo's work directory (the state directory and the signing key go there).
        server_url: the demo's ``opencode serve``.
        port: the control API's TCP port.
        token_file: the daemon's token file.
        turn_timeout: seconds per turn of every roundtable (``--turn-timeout``; ``None``: the
            daemon's default).
        server_password: the server's password (OpenCode 2.x always has one), so that every
            command under ``ROUNDTABLED_CONFIG`` reaches the same server the daemon does; the
            file sits in the demo's private work directory.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # JSON strings are TOML basic strings (the same escapes), so json.dumps quotes them.
    q = json.dumps
    path.write_text(
        "# Written by scripts/demo for its own daemon.\n"
        f"server_url = {q(server_url)}\n"
        'control_host = "127.0.0.1"\n'
        f"control_port = {port}\n"
        f"token_file = {q(str(token_file))}\n"
        f"key_file = {q(str(token_file.parent / 'signing-key'))}\n"
        f"state_dir = {q(str(work / 'roundtabled-state' / 'roundtabled'))}\n"
        + (f"turn_timeout = {q(turn_timeout)}\n" if turn_timeout is not None else "")
        + (f"server_password = {q(server_password)}\n" if server_password else "")
        + "\n[presets.demo]\n"
        'agents = ["pm", "dev", "rv"]\n'
        "rounds = 2\n"
    )


@contextlib.asynccontextmanager
async def demo_environment(args: argparse.Namespace) -> AsyncIterator[DemoEnv]:
    """Start the model (offline scripted, or ``ROUNDTABLED_DEMO_MODEL``), a private ``opencode
    serve`` in a temporary project with the example debaters and the tools, and ``roundtabled
    serve``; stop them all on exit (the work directory is removed unless ``--keep``/``--workdir``).
    """
    work = Path(args.workdir or tempfile.mkdtemp(prefix="roundtabled-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    model = os.environ.get("ROUNDTABLED_DEMO_MODEL")
    llm: ScriptedLLM | None = None
    agents_cfg = _examples_config().get("agent", {})
    if args.base_url:
        print(
            f"demo: using the local model {args.model} at {args.base_url} (an OpenAI-compatible "
            "server; provider configuration written for this run: replies up to "
            f"{args.output_limit} tokens, context {args.context_limit})"
        )
        config: dict[str, Any] = provider.with_local_model(
            {
                "$schema": "https://opencode.ai/config.json",
                "autoupdate": False,
                "share": "disabled",
                "snapshot": False,
                "agent": dict(agents_cfg),
            },
            args.base_url,
            args.model,
            ["pm", "dev", "rv"],
            output=args.output_limit,
            context=args.context_limit,
        )
        server_env: dict[str, str] = {}
    elif model:
        print(f"demo: using YOUR model {model} through your OpenCode credentials")
        config = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "snapshot": False,
            "model": model,
            "agent": {**agents_cfg, "title": {"disable": True}},
        }
        server_env = {k: v for k, v in os.environ.items() if k.startswith("XDG_DATA_HOME")}
        if "XDG_DATA_HOME" not in server_env:
            server_env["XDG_DATA_HOME"] = str(Path.home() / ".local" / "share")
    else:
        print(
            "demo: no ROUNDTABLED_DEMO_MODEL set -> using the OFFLINE scripted model "
            "(set ROUNDTABLED_DEMO_MODEL=provider/model to debate with a real one)"
        )
        llm, config = await _offline_model(args, agents_cfg)
        server_env = {}

    port = free_port()
    rt_env = dict(os.environ)
    config_file = work / "roundtabled-config" / "roundtabled" / "config.toml"
    rt_env.update(
        {
            "XDG_CONFIG_HOME": str(work / "roundtabled-config"),
            "XDG_STATE_HOME": str(work / "roundtabled-state"),
            "ROUNDTABLED_CONFIG": str(config_file),
        }
    )
    token_file = work / "roundtabled-config" / "roundtabled" / "token"
    staging = work / "tools"
    files = {
        ".opencode/" + p.relative_to(staging).as_posix(): p.read_text()
        for p in install.install_tools(
            staging,
            control_url=f"http://127.0.0.1:{port}",
            token_file=token_file,
            major=args.major,
        )
    }
    server = OpenCodeServer(work / "opencode", config, env=server_env, major=args.major)
    for rel, text in files.items():
        target = server.project_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    daemon: subprocess.Popen[bytes] | None = None
    try:
        await server.start()
        print(f"demo: OpenCode {server.url} (project {server.project_dir})")
        print(
            f"demo: running on OpenCode {server.version} (major {args.major}; "
            + (
                "--opencode 1 runs the 1.x path)"
                if args.major == 2
                else "the default, --opencode 2, runs the 2.x path)"
            )
        )
        rt_env["ROUNDTABLED_SERVER_URL"] = server.url
        write_config(
            config_file,
            work,
            server_url=server.url,
            port=port,
            token_file=token_file,
            turn_timeout=args.turn_timeout,
            server_password=server.password,
        )
        parent = await asking_session(server) if args.major == 2 else None
        log = await asyncio.to_thread(open, work / "roundtabled.log", "wb")
        daemon = await asyncio.to_thread(
            subprocess.Popen,
            [_bin("roundtabled"), "serve"],
            env=rt_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for _ in range(100):
            if token_file.exists():
                try:
                    await asyncio.to_thread(
                        urllib.request.urlopen, f"http://127.0.0.1:{port}/v1/ping", timeout=1
                    )
                    break
                except OSError:
                    pass
            await asyncio.sleep(0.1)
        print(
            f"demo: roundtabled serve is up (pid {daemon.pid}, control API "
            f"http://127.0.0.1:{port}, log "
            f"{work / 'roundtabled.log'})"
        )
        yield DemoEnv(
            work,
            server,
            rt_env,
            port,
            token_file,
            config_file,
            daemon,
            args.major,
            llm is not None,
            parent,
        )
    finally:
        if daemon is not None:
            daemon.terminate()
            try:
                daemon.wait(10)
            except subprocess.TimeoutExpired:
                daemon.kill()
        await server.stop()
        if llm is not None:
            await llm.stop()
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


ASKING_TITLE = "Demo: the session that asks for roundtables"
"""The title of the demo's own session on OpenCode 2.x, the parent of its roundtables."""


async def asking_session(server: OpenCodeServer) -> str:
    """A root session in the demo's project on OpenCode 2.x, the parent (S1) the demo's
    roundtables run under (``--parent``): 2.x runs a roundtable in a child session of the asking
    session, as the orchestrator's tool call gives it. Returns its id.

    Raises:
        roundtabled.errors.TransportError: the server could not be reached.
    """
    client = V2Client(server.url, password=server.password)
    try:
        info = await client.create_session(directory=str(server.project_dir), title=ASKING_TITLE)
    finally:
        await client.close()
    print(f"demo: roundtables run under the session {info.id} ({ASKING_TITLE!r}; OpenCode 2.x)")
    return str(info.id)


def transcript_path(args: argparse.Namespace, work: Path) -> Path:
    """Where the demo writes the transcript: ``--transcript FILE``; in ``--workdir``/``--keep``
    runs the work directory; else beside it in the temporary directory (the work directory is
    removed at the end, the transcript stays)."""
    if args.transcript:
        return Path(args.transcript).expanduser().resolve()
    if args.keep or args.workdir:
        return work / "transcript.md"
    return work.parent / f"{work.name}-transcript.md"


STOP_SIGNALS = {
    signal.SIGTERM: "a kill or a timeout",
    signal.SIGHUP: "the terminal closed",
}
"""Signals that stop the demo like Ctrl-C does, and what usually sends them. Their default
action would end the demo at once and leave the servers it started running (``opencode serve``
is in its own process group, so a hang-up never reaches it)."""


def _say(text: str) -> None:
    # After a hang-up the terminal may be gone: the clean-up must run all the same.
    with contextlib.suppress(OSError, ValueError):
        print(text, flush=True)


def _stop_on(task: asyncio.Task[Any], signum: signal.Signals) -> None:
    _say(f"\ndemo: {signum.name} ({STOP_SIGNALS[signum]}): stopping OpenCode and roundtabled")
    task.cancel()


async def main_async(args: argparse.Namespace) -> int:
    if args.base_url:
        try:
            note = await provider.probe(args.base_url, args.model, args.base_url_source)
        except provider.BadModelOption as exc:
            print(f"Error: {exc}", file=sys.stderr)
            return 2
        if note:
            print(f"demo: {note}")
    task = asyncio.current_task()
    if task is not None:
        loop = asyncio.get_running_loop()
        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, _stop_on, task, signum)
    if args.serve:
        return await serve_async(args)
    started = time.monotonic()
    async with demo_environment(args) as demo:
        t0 = time.monotonic()
        code, ses = await asyncio.to_thread(main_debate, demo)
        debate_s = time.monotonic() - t0
        report = TourReport(worked=["start"] if code == 0 else [])
        if ses is None:
            # the start printed why; nothing below has a roundtable to show
            print("demo: the debate did not start, so the tour of the options is skipped")
        else:
            out = transcript_path(args, demo.work)
            for step in tour(demo, ses, out):
                await asyncio.to_thread(run_step, step, demo, report)
            if out.exists():
                print(f"\ndemo: transcript written to {out} (it stays after the demo)")
        print(report.summary(demo))
        if not (args.keep or args.workdir):
            print(
                f"demo: the rest of {demo.work} (server data, daemon log) is removed now; "
                "--keep keeps it"
            )
        print(
            f"\ndemo: debate {debate_s:.1f} s, whole demo {time.monotonic() - started:.1f} s, "
            f"OpenCode {demo.version}, exit {code}"
        )
        return code


SESSION_LINE = re.compile(r"^Roundtable (ses_\w+) — ", re.M)
"""The line ``roundtabled start`` names the new roundtable with (its stderr)."""


def start_argv(demo: DemoEnv, *flags: str, topic: str) -> list[str]:
    """``roundtabled start --agents pm,dev,rv --directory PROJECT [--parent S1] FLAGS TOPIC``
    (the parent on OpenCode 2.x, :attr:`DemoEnv.parent`)."""
    parent = ["--parent", demo.parent] if demo.parent else []
    return [
        "roundtabled",
        "start",
        "--agents",
        "pm,dev,rv",
        "--directory",
        str(demo.server.project_dir),
        *parent,
        *flags,
        topic,
    ]


def main_debate(demo: DemoEnv) -> tuple[int, str | None]:
    """The demo's debate (:data:`TOPIC`, 3 seats × 2 rounds) with the real CLI, its turns shown
    as they come; returns the exit code and the roundtable's session id (``None``: it did not
    start). Runs in a thread (it blocks on the CLI)."""
    args = start_argv(
        demo, "--rounds", "2", "--title", "Demo: split the payments monolith?", topic=TOPIC
    )
    _show(args)
    proc = subprocess.Popen(
        [_bin(args[0]), *args[1:]], env=demo.env, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    ses: str | None = None
    for line in proc.stderr:  # passed on as it comes, and read for the session's id
        sys.stderr.write(line)
        sys.stderr.flush()
        found = SESSION_LINE.match(line)
        if found and ses is None:
            ses = found.group(1)
    return proc.wait(), ses


@dataclass(frozen=True)
class Step:
    """One command of the demo's tour of the options after its debate."""

    option: str
    """What it shows, in words (``list``, ``start --dry-run`` …): the summary names it."""
    argv: list[str]
    note: str = ""
    """What to look for in its output (printed before it runs)."""
    debate: bool = False
    """It runs a debate of its own (model requests): only on the offline model, where it costs
    nothing; a real model's demo names it as skipped instead (:func:`run_step`)."""


def tour(demo: DemoEnv, ses: str, transcript: Path) -> list[Step]:
    """The options the demo shows after its debate ``ses``, the same list on both OpenCode
    majors: what a major's daemon does not run yet it refuses in one line, and :func:`run_step`
    says so instead of showing it (the list is not cut per major here: a refusal lifted in the
    daemon shows up working in the demo with no change to it)."""
    other = "Should we adopt trunk-based development?"
    return [
        Step("list", ["roundtabled", "list"]),
        Step("status", ["roundtabled", "status", ses]),
        Step("export", ["roundtabled", "export", ses, "--format", "md", "-o", str(transcript)]),
        Step(
            "start --dry-run",
            start_argv(demo, "--rounds", "2", "--dry-run", topic=other),
            "the plan: seats, models, requests and the estimated tokens; nothing runs",
        ),
        Step(
            "extend",
            ["roundtabled", "extend", ses, "--rounds", "1", "-q", EXTEND_PROMPT],
            "one more round of the same panel on the demo's debate",
            debate=True,
        ),
        Step(
            "start --until converged",
            start_argv(demo, "--rounds", "5", "--until", "converged", "-q", topic=other),
            "the debate stops once the panel converged, before its fifth round",
            debate=True,
        ),
        Step(
            "start --side",
            start_argv(demo, "--rounds", "1", "--side", "rv=against", "-q", topic=other),
            "rv argues the side it is given; its position is shown but not counted",
            debate=True,
        ),
        Step(
            "start --context recent",
            start_argv(demo, "--rounds", "4", "--context", "recent", "-q", topic=other),
            "from round 4 on a seat reads a digest of the rounds between, not every reply",
            debate=True,
        ),
        Step(
            "start --opening independent",
            start_argv(demo, "--rounds", "1", "--opening", "independent", "-q", topic=other),
            "every seat opens without having seen the others' openings",
            debate=True,
        ),
    ]


EXTEND_PROMPT = "continue: who owns the ledger interface, and when is it published?"
"""What the tour's ``extend`` asks the demo's panel."""

NOT_YET = re.compile(r"OpenCode 2(\.x)? yet")
"""How the daemon words what OpenCode 2.x does not run yet (the 2.x shell's refusals and the
control API's 501, docs/control-api.md)."""


@dataclass
class TourReport:
    """What the tour showed working and what the daemon refused as not on OpenCode 2 yet."""

    worked: list[str] = field(default_factory=list)
    not_yet: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Debates of their own not run on a real model (:attr:`Step.debate`)."""

    def summary(self, demo: DemoEnv) -> str:
        """One line per outcome for the end of the demo."""
        text = f"\ndemo: on OpenCode {demo.version}, shown working: " + (
            ", ".join(self.worked) or "nothing"
        )
        if self.not_yet:
            text += f"\ndemo: on OpenCode {demo.version}, not run yet (refused above): " + (
                ", ".join(self.not_yet)
            )
        if self.skipped:
            text += (
                "\ndemo: not run on your model (each is a debate of its own; the offline demo "
                "runs them, or try them by hand with --serve): " + ", ".join(self.skipped)
            )
        return text


def run_step(step: Step, demo: DemoEnv, report: TourReport) -> None:
    """Run one tour command and print what it printed. On OpenCode 2.x a command the daemon
    refuses as not run on 2.x yet is one line, ``demo: not on OpenCode 2 yet: …`` with the
    daemon's words, and noted in ``report``; any other failure ends the demo. A step with a
    debate of its own is not run on a real model (:attr:`DemoEnv.offline`): noted as skipped.

    Raises:
        SystemExit: the command failed for another reason (its output is shown first).
    """
    if step.debate and not demo.offline:
        report.skipped.append(step.option)
        return
    if step.note:
        print(f"\ndemo: {step.option}: {step.note}", flush=True)
    _show(step.argv)
    proc = subprocess.run(
        [_bin(step.argv[0]), *step.argv[1:]], env=demo.env, capture_output=True, text=True
    )
    refused = next((ln for ln in proc.stderr.splitlines() if NOT_YET.search(ln)), None)
    if proc.returncode != 0 and demo.major == 2 and refused is not None:
        print(f"demo: not on OpenCode 2 yet: {step.option} ({refused.removeprefix('Error: ')})")
        report.not_yet.append(step.option)
        return
    # the command's own order: its stderr (the roundtable's id, notes) comes before its result
    sys.stderr.write(proc.stderr)
    sys.stderr.flush()
    sys.stdout.write(proc.stdout)
    sys.stdout.flush()
    if proc.returncode != 0:
        raise SystemExit(f"demo: `{' '.join(step.argv)}` exited with {proc.returncode}")
    report.worked.append(step.option)


async def serve_async(args: argparse.Namespace) -> int:
    """``--serve``: start everything and wait (Ctrl-C stops it), printing how to drive the
    daemon by hand with the CLI from another shell, and how to open the OpenCode TUI on it."""
    async with demo_environment(args) as demo:
        bin_dir = Path(sys.executable).parent
        rt = bin_dir / "roundtabled"
        parent = f" --parent {demo.parent}" if demo.parent else ""
        listing = await asyncio.to_thread(not_yet, demo, "/v1/roundtables")
        print(
            "\ndemo: ready. In another shell (same checkout):\n"
            f"  export ROUNDTABLED_CONFIG={demo.config_file}\n"
            f"  {rt} agents --directory {demo.server.project_dir}\n"
            f"  {rt} start --agents pm,dev,rv --rounds 2{parent} "
            f'--directory {demo.server.project_dir} "Should we split the payments monolith?"\n'
            + (
                f"  {rt} list\n"
                if listing is None
                else f"  (not on OpenCode 2 yet: {rt} list — {listing})\n"
            )
            + f"  {rt} eval --agents pm,dev,rv --limit 4 --directory {demo.server.project_dir}\n"
            + f"The OpenCode TUI on this server: {tui_command(demo)}\n"
            + (
                "In the TUI: the roundtable's debate is a child session of yours; ↓ opens the "
                "subagent picker, ctrl+a lists the finished ones too, enter shows one.\n"
                if demo.major == 2
                else ""
            )
            + "In the TUI ask: convene a roundtable with pm, dev and rv about <your topic> — "
            + (
                "your model is the orchestrator too: it calls the roundtable tool if it follows "
                "the request (a small local model may not; its context must hold the "
                "orchestrator's prompt and tools, see --context-limit).\n"
                if args.base_url or os.environ.get("ROUNDTABLED_DEMO_MODEL")
                else "the offline orchestrator calls the roundtable tool; the offline model "
                "answers every debate with real positions (try --until converged, --side "
                "rv=against, --context recent, --opening independent"
                + (", or the eval line above).\n" if demo.major == 1 else ").\n")
            )
            + "Ctrl-C here stops everything (so does closing this terminal); if the daemon or "
            "the server ends on its own, this says so and stops the rest.",
            flush=True,
        )
        try:
            ended = await first_child_exit(demo)
        except asyncio.CancelledError:
            return 0
        log = demo.work / "roundtabled.log"
        _say(f"\ndemo: {ended}; stopping the rest.")
        with contextlib.suppress(OSError):
            tail = log.read_text(errors="replace").splitlines()[-10:]
            if tail:
                _say("demo: the last lines of roundtabled's log:\n  " + "\n  ".join(tail))
    return 1


def tui_command(demo: DemoEnv) -> str:
    """The shell command that opens the OpenCode TUI on the demo's server, in its project: 1.x
    ``opencode attach URL --dir PROJECT``; 2.x ``opencode --server URL PROJECT`` (no ``attach``
    in 2.x, docs/opencode-server.md "2.x"), its password in ``OPENCODE_SERVER_PASSWORD`` as the
    2.x TUI reads it, and the session the demo's roundtables run under."""
    binary = demo.server.binary
    project = demo.server.project_dir
    if demo.major == 1:
        return f"{binary} attach {demo.server.url} --dir {project}"
    return (
        f"OPENCODE_SERVER_PASSWORD={demo.server.password} {binary} --server {demo.server.url} "
        f"--session {demo.parent} {project}"
    )


STARTING_WAIT_S = 60.0
"""How long :func:`not_yet` waits through the daemon's "starting" answers (503), seconds."""


def not_yet(demo: DemoEnv, path: str) -> str | None:
    """The daemon's one line when its control API does not serve ``GET path`` on this OpenCode
    major yet (501, docs/control-api.md), else ``None`` (served, or any other answer: the
    command then says what it says). Asks once the daemon is ready (it knows the server's
    major only then), waiting through "starting" (503) answers."""
    token = demo.token_file.read_text().strip()

    def get(route: str) -> urllib.request.Request:
        return urllib.request.Request(
            f"http://127.0.0.1:{demo.control_port}{route}",
            headers={"Authorization": f"Bearer {token}"},
        )

    deadline = time.monotonic() + STARTING_WAIT_S
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError, ValueError),
            urllib.request.urlopen(get("/v1/health"), timeout=10) as health,
        ):
            if json.loads(health.read()).get("ready"):
                break
        time.sleep(0.2)
    req = get(path)
    while True:
        try:
            with urllib.request.urlopen(req, timeout=10):
                return None
        except urllib.error.HTTPError as exc:
            if exc.code == 503 and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            if exc.code != 501:
                return None
            with contextlib.suppress(ValueError, OSError):
                return str(json.loads(exc.read()).get("error", "")).removeprefix("Error: ")
            return "the daemon answered 501"
        except OSError:
            return None


CHILD_POLL_S = 0.5
"""How often ``--serve`` looks at the processes it started (seconds)."""


async def first_child_exit(demo: DemoEnv) -> str:
    """Wait until the daemon or the OpenCode server the demo started exits on its own; returns
    what happened in words (which one, and its exit code).

    Raises:
        asyncio.CancelledError: the demo is being stopped (Ctrl-C, a stop signal).
    """
    while True:
        code = demo.daemon.poll()
        if code is not None:
            return f"roundtabled serve exited on its own (exit code {code})"
        if not demo.server.running:
            return f"opencode serve ({demo.server.url}) exited on its own"
        await asyncio.sleep(CHILD_POLL_S)


class BadArgument(ValueError):
    """A demo flag (or environment variable) that is bad or does not apply; the message names
    it, what it takes and why."""


DEGRADED_NEEDS_OFFLINE = (
    "--degraded needs the offline scripted model (it scripts dev's provider failing on every "
    "turn), so it cannot be combined with {source} (a real model); {fix}"
)
"""The refusal of ``--degraded`` on a real model: a real provider cannot be made to fail on
dev's turns alone, and a demo that ran healthy under ``--degraded`` would show nothing it says."""


def check_arguments(args: argparse.Namespace) -> None:
    """Check the flags and environment variables before anything starts, and fill in
    ``args.major`` (:func:`checked_major`), ``args.base_url`` / ``args.model``
    (:func:`local_model`), ``args.turn_timeout`` (seconds or ``None``) and ``args.output_limit`` /
    ``args.context_limit`` (tokens).

    Raises:
        BadArgument: a bad ``--opencode``, a flag that does not apply (``--degraded`` on a real
            model, ``--transcript`` with ``--serve``, a limit without ``--base-url``) or a bad
            value.
        provider.BadModelOption: a bad URL, model name or limit.
    """
    args.major = checked_major(args.opencode)
    local_model(args)
    own_model = None if args.base_url else os.environ.get("ROUNDTABLED_DEMO_MODEL") or None
    if own_model is not None:
        check_own_model(own_model)
    if args.degraded and (args.base_url or own_model):
        source = "ROUNDTABLED_DEMO_MODEL" if own_model else args.base_url_source
        fix = (
            "drop one of them" if source.startswith("--") else f"unset {source} or drop --degraded"
        )
        raise BadArgument(DEGRADED_NEEDS_OFFLINE.format(source=source, fix=fix))
    if args.serve and args.transcript:
        raise BadArgument(
            "--transcript does not apply to --serve: it runs no debate of its own (export one "
            "you start by hand with: roundtabled export SES --format md -o FILE)"
        )
    args.turn_timeout = checked_turn_timeout(args.turn_timeout)
    given = [
        f
        for f, v in (("--output-limit", args.output_limit), ("--context-limit", args.context_limit))
        if v is not None
    ]
    if given and not args.base_url:
        raise BadArgument(
            f"{' and '.join(given)} {'go' if len(given) > 1 else 'goes'} with --base-url "
            "(the demo writes them into the local model's provider configuration; OpenCode's "
            "own providers set their models' limits)"
        )
    args.output_limit, args.context_limit = provider.check_limits(
        args.output_limit, args.context_limit
    )


MAJORS = {"1": 1, "2": 2}
"""``--opencode``'s values: the OpenCode major the demo runs on."""


def checked_major(value: str) -> int:
    """``--opencode`` (as typed) as the OpenCode major to run: 2 (the default, ``@opencode/cli``
    pinned in ``opencode-v2/``) or 1 (``opencode-ai`` pinned in ``package.json``).

    Raises:
        BadArgument: anything else, naming the flag and both values.
    """
    major = MAJORS.get(value.strip())
    if major is None:
        raise BadArgument(
            f"--opencode = {value!r}; expected 1 or 2 (the OpenCode major to run the demo on: "
            "2 is @opencode/cli, the default; 1 is opencode-ai 1.x)"
        )
    return major


def check_own_model(value: str) -> None:
    """``ROUNDTABLED_DEMO_MODEL`` without a base URL: one of your OpenCode providers' models,
    ``provider/model``. A bare name (``local``) is refused here; OpenCode would refuse it only
    once the debate starts (an agent without a model).

    Raises:
        BadArgument: naming the variable and both forms it takes.
    """
    prov, slash, name = value.strip().partition("/")
    if not slash or not prov or not name or any(c.isspace() for c in value.strip()):
        raise BadArgument(
            f"ROUNDTABLED_DEMO_MODEL = {value!r}; expected provider/model (a model of your "
            "OpenCode providers, e.g. anthropic/claude-sonnet-4-5), or a local server's model "
            "name with --base-url URL (or ROUNDTABLED_DEMO_BASE_URL)"
        )


def checked_turn_timeout(value: str | None) -> float | None:
    """``--turn-timeout`` (seconds, as typed; ``None``: not given) checked by the rule of
    ``roundtabled start --turn-timeout`` (the daemon's ``turnTimeout``,
    :func:`roundtabled.core.validation.parse_request`), its message naming the flag.

    Raises:
        BadArgument: not a number of seconds from 1 to 86400.
    """
    try:
        return validation.turn_timeout_value(value)
    except ValidationFailed as exc:
        text = str(exc).removeprefix("Error: ")
        raise BadArgument(text.replace("turnTimeout", "--turn-timeout", 1)) from None


def local_model(args: argparse.Namespace) -> None:
    """Fill ``args.base_url`` / ``args.model`` from the flags or ``ROUNDTABLED_DEMO_BASE_URL`` /
    ``ROUNDTABLED_DEMO_MODEL`` (with a base URL, the latter is the served model's name), checked.

    Raises:
        provider.BadModelOption: a bad URL or name, or a base URL without a model name.
    """
    base = args.base_url or os.environ.get("ROUNDTABLED_DEMO_BASE_URL") or None
    if base is None:
        if args.model:
            raise provider.BadModelOption("--model needs --base-url (the server that serves it)")
        return
    flag = "--base-url" if args.base_url else "ROUNDTABLED_DEMO_BASE_URL"
    args.base_url_source = flag
    args.base_url = provider.check_base_url(base, flag)
    name = args.model or os.environ.get("ROUNDTABLED_DEMO_MODEL")
    if not name:
        raise provider.BadModelOption(
            f"{flag} needs --model NAME (or ROUNDTABLED_DEMO_MODEL): the model the server serves"
        )
    args.model = provider.check_model_name(
        name, "--model" if args.model else "ROUNDTABLED_DEMO_MODEL"
    )


class DemoParser(argparse.ArgumentParser):
    """The demo's flags; a usage error (an unknown flag, a missing value) is one ``Error:``
    line and exit code 2, as every bad input of the project."""

    def error(self, message: str) -> NoReturn:
        """Print ``Error: <message> (see scripts/demo --help)`` on stderr and exit 2.

        Raises:
            SystemExit: always, code 2.
        """
        sys.stderr.write(f"Error: {message} (see scripts/demo --help)\n")
        sys.exit(2)


def main() -> int:
    """Entry point of ``python -m roundtabled.demo``."""
    p = DemoParser(
        prog="roundtabled-demo",
        description="A real roundtable end to end on a fresh machine: a private OpenCode "
        "server, the tools, the daemon and a 3-agent × 2-round debate (scripts/demo).",
    )
    p.add_argument(
        "--opencode",
        metavar="MAJOR",
        default="2",
        help="the OpenCode major to run on: 2 (default, @opencode/cli, what a new user installs "
        "today) or 1 (opencode-ai 1.x); the demo prints the version it ran",
    )
    p.add_argument("--workdir", help="keep everything in this directory")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument(
        "--transcript",
        metavar="FILE",
        help="write the transcript here (default: beside the temporary directory; it stays)",
    )
    p.add_argument(
        "--degraded",
        action="store_true",
        help="offline model only: dev's provider fails on every turn, to show a degraded result",
    )
    p.add_argument(
        "--serve",
        action="store_true",
        help="start the server, the offline model and the daemon, print how to use the CLI and "
        "the TUI on them by hand, and wait until Ctrl-C",
    )
    p.add_argument(
        "--base-url",
        metavar="URL",
        help="a local OpenAI-compatible server (llama.cpp, Ollama, LM Studio, vLLM), e.g. "
        "http://127.0.0.1:8080/v1; with --model (env ROUNDTABLED_DEMO_BASE_URL)",
    )
    p.add_argument(
        "--model",
        metavar="NAME",
        help="the model name that server serves (with --base-url; env ROUNDTABLED_DEMO_MODEL)",
    )
    p.add_argument(
        "--turn-timeout",
        metavar="S",
        help="seconds a seat's turn may take before it is aborted and skipped (1-86400; "
        "default the daemon's, 300): more for a slow local model",
    )
    p.add_argument(
        "--output-limit",
        metavar="N",
        help="with --base-url: tokens a reply may take, OpenCode's limit.output "
        f"({provider.OUTPUT_LIMITS[0]}-{provider.OUTPUT_LIMITS[1]}, default "
        f"{provider.DEFAULT_OUTPUT})",
    )
    p.add_argument(
        "--context-limit",
        metavar="N",
        help="with --base-url: tokens of the model's context, OpenCode's limit.context "
        f"({provider.CONTEXT_LIMITS[0]}-{provider.CONTEXT_LIMITS[1]}, default "
        f"{provider.DEFAULT_CONTEXT}; the model server's own context must hold it)",
    )
    args = p.parse_args()
    try:
        check_arguments(args)
    except (BadArgument, provider.BadModelOption) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(main_async(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 0


if __name__ == "__main__":
    sys.exit(main())
