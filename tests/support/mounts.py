"""Mounts a test leaves under its folder: a task's worktree can be a file system of its own (a loop-mounted image),
and a bot stopped mid-task keeps that mount for the task's resume, as it should. A test folder must not keep it:
pytest deletes old test folders later, and a mounted one can neither be removed nor walked safely."""

from __future__ import annotations

import subprocess
from pathlib import Path


def mounts_under(folder: Path) -> list[str]:
    """Mount points under `folder` (from /proc/self/mounts), outermost first."""
    prefix = str(folder.resolve()) + "/"
    points = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    return [p for p in points if p.startswith(prefix)]


def unmount_under(folder: Path) -> list[str]:
    """Unmount everything mounted under `folder`, innermost first (lazily: a process still holding a file there keeps
    it until it ends; the loop device goes with the mount). Returns the mount points found."""
    found = mounts_under(folder)
    for point in reversed(found):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    return found
