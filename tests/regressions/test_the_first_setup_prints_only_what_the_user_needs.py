"""Regression: the demo's first set-up printed notes nobody can act on.

Field failure (a fresh clone, `scripts/demo`): setuptools' "Editable installation … be careful"
block and npm's "npm ci refused the lock file (Missing: opencode-darwin-arm64@…)" (a registry
that serves only this platform's binary package) appeared before the demo's own output.

Proves, by running the real `scripts/setup` in a copy of the checkout whose `python`, `pip` and
`npm` are stand-ins that print exactly those notes (so nothing is downloaded): a first set-up
prints only its `==>` progress lines and nothing on stderr; a failing install still shows its log.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

EDITABLE_NOTE = "Editable installation of roundtabled: be careful, this is an editable install"
NPM_REFUSAL = "npm ci refused the lock file (Missing: opencode-darwin-arm64@1.18.33 from lock file)"


def _checkout(tmp: Path, *, pip_fails: bool = False) -> tuple[Path, dict[str, str]]:
    repo = tmp / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup", repo / "scripts" / "setup")
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    shutil.copy(ROOT / "package.json", repo / "package.json")
    (repo / "opencode-v2").mkdir()
    shutil.copy(ROOT / "opencode-v2" / "package.json", repo / "opencode-v2" / "package.json")
    want = json.loads((ROOT / "package.json").read_text())["dependencies"]["opencode-ai"]
    want2 = json.loads((ROOT / "opencode-v2" / "package.json").read_text())["dependencies"][
        "@opencode/cli"
    ]
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    # A stand-in interpreter: `-m venv DIR` makes a venv whose python is this script again;
    # `-m pip` prints setuptools' note (and fails when asked to); `-c` runs the real Python.
    py = bin_dir / "python3"
    py.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1" = -m ] && [ "$2" = venv ]; then\n'
        '  mkdir -p "$3/bin"; cp "$0" "$3/bin/python"\n'
        "  printf '#!/bin/sh\\necho roundtabled 0.1.0\\n' > \"$3/bin/roundtabled\"\n"
        '  chmod +x "$3/bin/roundtabled"; exit 0\n'
        "fi\n"
        'if [ "$1" = -m ] && [ "$2" = pip ]; then\n'
        f'  echo "{EDITABLE_NOTE}"\n'
        f"  {'exit 1' if pip_fails else 'exit 0'}\n"
        "fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    py.chmod(0o755)
    # A stand-in npm: `ci` refuses the lock file, `install` puts the pinned binary in place (1.x
    # at the root, which prints its bare version; 2.x in opencode-v2/, which prints "opencode vX").
    npm = bin_dir / "npm"
    npm.write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$1" = ci ]; then echo "{NPM_REFUSAL}" >&2; exit 1; fi\n'
        "mkdir -p node_modules/.bin\n"
        'if [ "$(basename "$PWD")" = opencode-v2 ]; then\n'
        f"  printf '#!/bin/sh\\necho opencode v{want2}\\n' > node_modules/.bin/opencode\n"
        "else\n"
        f"  printf '#!/bin/sh\\necho {want}\\n' > node_modules/.bin/opencode\n"
        "fi\n"
        "chmod +x node_modules/.bin/opencode\n"
    )
    npm.chmod(0o755)
    tmux = bin_dir / "tmux"  # present: the TUI test's tmux is not this test's subject
    tmux.write_text("#!/bin/sh\nexit 0\n")
    tmux.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHON": str(py)}
    return repo, env


def _setup(repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/setup"], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_first_setup_prints_only_its_progress_lines(tmp_path: Path) -> None:
    repo, env = _checkout(tmp_path)
    done = _setup(repo, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert lines and all(line.startswith("==> ") for line in lines), done.stdout
    assert lines[-1].startswith("==> ready: roundtabled 0.1.0, OpenCode "), lines
    # A second run only checks.
    again = _setup(repo, env)
    assert again.returncode == 0 and again.stdout.splitlines() == [lines[-1]], again.stdout


def test_a_failing_install_shows_its_log(tmp_path: Path) -> None:
    repo, env = _checkout(tmp_path, pip_fails=True)
    done = _setup(repo, env)
    assert done.returncode == 1
    assert EDITABLE_NOTE in done.stderr, done.stderr
