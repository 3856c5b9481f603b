"""Shared fixtures: a scripted LLM and real, private ``opencode serve`` processes.

- ``scripted_llm`` — a started :class:`ScriptedLLM` (function scope).
- ``opencode_factory`` — ``await opencode_factory(config=None, *, files=None, password=None,
  env=None, name=None)`` starts an :class:`OpenCodeServer` under ``tmp_path`` (config default:
  :func:`offline_config` pointing at ``scripted_llm``; ``files`` maps paths relative to the project
  directory to text written before the server starts, e.g. ``{".opencode/tool/echo.ts": src}``).
  The agent prompts of the config are registered with the scripted LLM. Every server it started is
  stopped at teardown, even when the test fails.
- ``home`` — ``tmp_path`` as the command line's world: ``XDG_CONFIG_HOME``, ``XDG_STATE_HOME`` and
  ``XDG_RUNTIME_DIR`` below it, no ``ROUNDTABLED_URL``, ``ROUNDTABLED_CONTROL_HOST`` or
  ``ROUNDTABLED_SERVER_URL`` from the caller's environment.
- ``demo`` — one ``scripts/demo --serve`` for the whole session (started by the first test that
  asks for it): the real CLI against the demo's daemon, as a person drives it from another
  shell (:class:`tests.e2e.demo_serve.DemoServe`).
- ``slow`` marker: skipped unless ``--run-slow`` or ``ROUNDTABLED_SLOW=1``. Tests under
  ``tests/e2e`` get the ``e2e`` marker automatically.
- ``opencode_major`` — which OpenCode major ``opencode_factory`` starts: 1 (the pinned 1.x, the
  default) or 2 (the pinned 2.x), from ``--opencode-major N`` or
  ``ROUNDTABLED_TEST_OPENCODE_MAJOR=N``. Under 2 a test that asks for ``opencode_factory`` runs
  only when it is marked ``both_majors`` (the core end-to-end set: docs/testing.md); the others
  are skipped with :data:`ONLY_1X_REASON`, never started against a server they do not drive,
  and so is a ``both_majors`` test marked ``only_1x("why")``: one that pins a 1.x mechanism,
  skipped under 2 with "OpenCode 1.x only: why".
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any, Literal, Protocol

import pytest

from roundtabled.offline.opencode_server import OpenCodeServer, agent_prompts_of, offline_config
from roundtabled.offline.scripted_llm import ScriptedLLM
from roundtabled.opencode.binary import find_opencode_binary
from tests.e2e.demo_serve import DemoServe, serve_demo

SLOW_SKIP_REASON = "slow: use --run-slow or ROUNDTABLED_SLOW=1"
MAJOR_ENV = "ROUNDTABLED_TEST_OPENCODE_MAJOR"
ONLY_1X_REASON = (
    "runs on OpenCode 1.x only (not marked both_majors); the 2.x run takes the core end-to-end"
    " set (docs/testing.md)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="also run tests marked slow (or set ROUNDTABLED_SLOW=1)",
    )
    parser.addoption(
        "--opencode-major",
        choices=("1", "2"),
        default=None,
        help=f"the OpenCode major of the end-to-end servers: 1 (default) or 2 (or {MAJOR_ENV})",
    )


def opencode_major_of(config: pytest.Config) -> int:
    """The OpenCode major of this run's ``opencode_factory`` servers: ``--opencode-major``, else
    ``$ROUNDTABLED_TEST_OPENCODE_MAJOR``, else 1.

    Raises:
        pytest.UsageError: the variable is set to anything but 1 or 2 (the line names it)."""
    given = config.getoption("--opencode-major")
    if given is None:
        given = os.environ.get(MAJOR_ENV) or "1"
        if given not in ("1", "2"):
            raise pytest.UsageError(f"{MAJOR_ENV} must be 1 or 2, got {given!r}")
    return int(given)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Which OpenCode binaries the servers of this run start (``scripts/test --opencode V``; the
    2.x contract tests start the second)."""
    major = opencode_major_of(config)
    return [
        _binary_line("opencode", 1),
        _binary_line("opencode 2.x", 2),
        f"end-to-end servers (opencode_factory): OpenCode {major}.x",
    ]


def _binary_line(label: str, major: int) -> str:
    try:
        binary = find_opencode_binary(major)
    except FileNotFoundError as exc:
        return f"{label}: {exc}"
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        version = out.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        version = "unknown"
    return f"{label}: {version} ({binary})"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run_slow = config.getoption("--run-slow") or os.environ.get("ROUNDTABLED_SLOW") == "1"
    skip_slow = pytest.mark.skip(reason=SLOW_SKIP_REASON)
    only_1x = opencode_major_of(config) == 2
    for item in items:
        if "tests/e2e/" in Path(str(item.fspath)).as_posix():
            item.add_marker(pytest.mark.e2e)
        if "slow" in item.keywords and not run_slow:
            item.add_marker(skip_slow)
        fixtures = getattr(item, "fixturenames", ())
        if only_1x and "opencode_factory" in fixtures:
            mark = item.get_closest_marker("only_1x")
            if "both_majors" not in item.keywords:
                item.add_marker(pytest.mark.skip(reason=ONLY_1X_REASON))
            elif mark is not None:
                item.add_marker(pytest.mark.skip(reason=f"OpenCode 1.x only: {mark.args[0]}"))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """A run that skipped slow tests says how many and how to run them."""
    skipped = terminalreporter.stats.get("skipped", [])
    slow = sum(1 for r in skipped if SLOW_SKIP_REASON in str(getattr(r, "longrepr", "")))
    if slow:
        terminalreporter.write_line(
            f"{slow} slow test{'s' if slow != 1 else ''} skipped (fault injection, long e2e):"
            " run them with --run-slow or ROUNDTABLED_SLOW=1 (scripts/test runs them)"
        )


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    for name in ("ROUNDTABLED_URL", "ROUNDTABLED_CONTROL_HOST", "ROUNDTABLED_SERVER_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def opencode_major(pytestconfig: pytest.Config) -> int:
    """1 or 2: the OpenCode major ``opencode_factory`` starts (:func:`opencode_major_of`)."""
    return opencode_major_of(pytestconfig)


@pytest.fixture
async def scripted_llm() -> AsyncIterator[ScriptedLLM]:
    llm = ScriptedLLM()
    await llm.start(port=0)
    try:
        yield llm
    finally:
        await llm.stop()


class OpenCodeFactory(Protocol):
    def __call__(
        self,
        config: dict[str, Any] | None = None,
        *,
        files: dict[str, str] | None = None,
        password: str | None = None,
        env: dict[str, str] | None = None,
        name: str | None = None,
    ) -> Awaitable[OpenCodeServer]: ...


@pytest.fixture
async def opencode_factory(
    tmp_path: Path, scripted_llm: ScriptedLLM, opencode_major: int
) -> AsyncIterator[OpenCodeFactory]:
    servers: list[OpenCodeServer] = []

    async def start(
        config: dict[str, Any] | None = None,
        *,
        files: dict[str, str] | None = None,
        password: str | None = None,
        env: dict[str, str] | None = None,
        name: str | None = None,
    ) -> OpenCodeServer:
        cfg = config if config is not None else offline_config(scripted_llm.base_url)
        scripted_llm.agent_prompts.update(agent_prompts_of(cfg))
        root = tmp_path / (name or f"opencode-{len(servers)}")
        major: Literal[1, 2] = 2 if opencode_major == 2 else 1
        server = OpenCodeServer(root, cfg, password=password, env=env, major=major)
        servers.append(server)
        for rel, text in (files or {}).items():
            path = server.project_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        await server.start()
        return server

    try:
        yield start
    finally:
        for server in servers:
            await server.stop()


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServe]:
    """One ``scripts/demo --serve`` shared by every test that asks for it (its start is the
    slow part; each test starts roundtables of its own on it)."""
    yield from serve_demo(tmp_path_factory.mktemp("demo"))
