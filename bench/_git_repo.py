"""What the git benches share: the CPU seconds of this process and its children, and a 200-file repository."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path


def cpu_seconds() -> float:
    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def make_repo(path: Path, packed: bool = False) -> Path:
    """200 small files in one commit on `main`; `packed`: the objects in a pack, as in any clone."""
    path.mkdir()
    for i in range(200):
        (path / f"file{i}.txt").write_text(f"line {i}\n" * 20)
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    steps = [["init", "-q", "-b", "main"], ["add", "-A"], [*ident, "commit", "-qm", "files"]]
    for args in steps + ([["gc", "-q"]] if packed else []):
        subprocess.run(["git", *args], cwd=path, check=True)
    return path
