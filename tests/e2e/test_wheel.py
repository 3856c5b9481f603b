"""A non-editable install works: the wheel holds every module and package file of the source
tree, and ``roundtabled --help`` runs from a fresh virtual environment that has only the wheel
and its dependencies (no checkout on ``sys.path``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _source_files() -> set[str]:
    """Every file of the package a user needs: modules, tool shims, agents, the typing marker."""
    pkg = REPO / "roundtabled"
    wanted = {".py", ".ts", ".md", ".typed"}
    return {
        p.relative_to(REPO).as_posix()
        for p in pkg.rglob("*")
        if p.is_file() and p.suffix in wanted and "__pycache__" not in p.parts
    }


def _copy_of_the_checkout(dest: Path) -> Path:
    """The checkout's files as git sees them (tracked and untracked-not-ignored), without a
    ``build/`` folder a former build left: setuptools would reuse its stale copies."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if src.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def test_the_wheel_holds_every_module_and_the_cli_runs_from_it(tmp_path: Path) -> None:
    out = tmp_path / "wheel"
    src = _copy_of_the_checkout(tmp_path / "src")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    (wheel,) = out.glob("roundtabled-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    missing = _source_files() - names
    assert not missing, f"files of the package missing from the wheel: {sorted(missing)}"

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", str(wheel)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    proc = subprocess.run(
        [str(env_dir / "bin" / "roundtabled"), "--help"],
        cwd=tmp_path,  # not the checkout: the installed package only
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: roundtabled")
    where = subprocess.run(
        [str(py), "-c", "import roundtabled; print(roundtabled.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(env_dir)), where
