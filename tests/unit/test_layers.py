"""The package's layers hold: ``lint-imports`` keeps every contract of pyproject.toml's
``[tool.importlinter]`` on this tree, and breaks one when a core module imports the transport.

The contracts see every ``import`` statement, also one inside a function; what they cannot see is
checked at run time below: an import by name (``importlib``) of the offline model and server,
and a module that fails to import.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import roundtabled

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the package in ``tree`` (its own pyproject.toml's contracts)."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=tree,
        env={"PATH": str(LINT_IMPORTS.parent), "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_tree_keeps_every_contract() -> None:
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_a_core_module_that_imports_aiohttp_breaks_the_core_contract(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "roundtabled", tree / "roundtabled")
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    machine = tree / "roundtabled" / "core" / "machine.py"
    head = "from __future__ import annotations\n"
    text = machine.read_text()
    assert head in text
    machine.write_text(text.replace(head, head + "\nimport aiohttp\n", 1))

    run = lint_imports(tree)

    assert run.returncode != 0, run.stdout
    assert "roundtabled.core is not allowed to import aiohttp" in run.stdout
    assert "roundtabled.core.machine -> aiohttp" in run.stdout


def production_modules() -> list[str]:
    """Dotted names of every production module (found on disk, not imported here): all but the
    offline model and server, the demo (which runs them) and ``__main__`` modules (importing one
    runs the CLI)."""
    return sorted(
        info.name
        for info in pkgutil.walk_packages(roundtabled.__path__, prefix="roundtabled.")
        if not info.name.startswith("roundtabled.offline")
        and info.name != "roundtabled.demo"
        and not info.name.endswith(".__main__")
    )


def test_production_modules_import_and_load_no_offline_module() -> None:
    names = production_modules()
    assert {"roundtabled.core.machine", "roundtabled.service.daemon", "roundtabled.cli"} <= set(
        names
    )
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('roundtabled.offline'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _defined(tree: ast.Module) -> set[str]:
    """Names a module defines (functions, classes, assigned names), not the names it imports."""
    names: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:  # the top level and the blocks of its if / try / with, not function bodies
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.If | ast.Try | ast.With):
            todo += node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
            todo += [s for h in getattr(node, "handlers", []) for s in h.body]
    return names


def test_every_name_is_imported_from_the_module_that_defines_it() -> None:
    """No re-export: ``from M import N`` (in the package, the tests and the benchmarks) names
    something M itself defines, or a submodule of M; and never another module's ``_private``
    name (the standard library and other packages are not checked)."""
    paths = [p for top in ("roundtabled", "tests", "bench") for p in (ROOT / top).rglob("*.py")]
    trees = {_module_name(p): (p, ast.parse(p.read_text(), str(p))) for p in paths}
    defined = {name: _defined(tree) for name, (_, tree) in trees.items()}
    wrong: list[str] = []
    for name, (path, tree) in trees.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = node.module or ""
            if node.level:
                up = package[: len(package) - node.level + 1]
                source = ".".join([*up, source] if source else up)
            if source not in trees:
                continue
            for alias in node.names:
                imported = alias.name
                if f"{source}.{imported}" in trees or imported.startswith("__"):
                    continue
                where = f"{name}:{node.lineno} {imported} from {source}"
                if imported not in defined[source]:
                    wrong.append(f"re-export: {where}")
                elif imported.startswith("_") and source != name:
                    wrong.append(f"private: {where}")
    assert wrong == []
