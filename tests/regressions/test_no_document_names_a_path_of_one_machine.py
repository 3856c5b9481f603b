"""``bench/README.md`` named a shared folder and a model folder by absolute paths of the machine
it was written on. The documents say where things are relative to the repository or with a
variable (``$LLM_DIR``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MACHINE_PATH = re.compile(r"(?<![\w.~$/-])/(?:work|home|root|mnt|Users|srv|opt)/\S+")


def test_no_markdown_file_names_an_absolute_path_of_a_machine() -> None:
    files = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert files
    found = [
        f"{name}:{n}: {m.group(0)}"
        for name in files
        for n, line in enumerate((ROOT / name).read_text().splitlines(), 1)
        for m in MACHINE_PATH.finditer(line)
    ]
    assert found == []
