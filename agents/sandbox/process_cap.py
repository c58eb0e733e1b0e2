"""A pids cgroup per sandboxed command: the process limit that holds for root too.

RLIMIT_NPROC (the sandbox's `ulimit -u`) is not applied by the kernel to root, so a bot running as root (a
container, a CI machine) would let a fork bomb in a task take the machine. Where the bot may create a cgroup under
its own in the cgroup-v1 `pids` hierarchy (root, or a delegated hierarchy), each sandboxed command runs in a fresh
one with `pids.max` set: a fork past the limit fails with EAGAIN for every process of the command, whoever it runs
as. The command's shell joins the cgroup before it execs bwrap, so nothing of the command runs outside it.

cgroup v2 is not used: a child cgroup with the pids controller needs it enabled in the bot's own cgroup's
`subtree_control`, which the "no internal processes" rule forbids while the bot itself lives there. Where no pids
hierarchy is writable, `PidsCap.create` gives None and only the rlimit applies (`agentlab doctor` says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

PIDS_V1_ROOT = Path("/sys/fs/cgroup/pids")
PARENT_NAME = "agentlab"
# Process-wide: cgroup names must differ across every owner of the process (they share one cgroup tree), and the
# clean-ups' references only keep the event loop from dropping those tasks
_counter = itertools.count(1)
_closing: set[asyncio.Task[None]] = set()  # strong references to background clean-ups


def _own_v1_path(proc_cgroup: str) -> str | None:
    """The bot's own path in the v1 pids hierarchy, from /proc/self/cgroup (`8:pids:/some/path`)."""
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "pids" in parts[1].split(","):
            return parts[2]
    return None


@functools.cache
def pids_parent() -> Path | None:
    """The folder our per-command cgroups go in, or None where we may not make one."""
    try:
        own = _own_v1_path(Path("/proc/self/cgroup").read_text())
    except OSError:
        return None
    if own is None or not (PIDS_V1_ROOT / "cgroup.procs").exists():
        return None
    parent = PIDS_V1_ROOT / own.lstrip("/") / PARENT_NAME
    try:
        parent.mkdir(exist_ok=True)
    except OSError:
        return None
    if not ((parent / "pids.max").exists() and os.access(parent, os.W_OK)):
        return None
    _remove_stale(parent)
    return parent


def _remove_stale(parent: Path) -> None:
    """Empty cgroups a bot process left behind when it ended before cleaning up (its pid is gone)."""
    for child in parent.glob("cmd-*-*"):
        owner = child.name.split("-")[1]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            with contextlib.suppress(OSError):
                child.rmdir()


class PidsCap:
    """One command's pids cgroup: `wrap` its argv, `close` it when the command has ended."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, max_processes: int) -> PidsCap | None:
        parent = pids_parent()
        if parent is None:
            return None
        path = parent / f"cmd-{os.getpid()}-{next(_counter)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_processes))
        except OSError as err:
            log.warning("no pids cgroup for a command (%s); only RLIMIT_NPROC bounds it", err)
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def wrap(self, argv: list[str], shell: str = "/bin/sh") -> list[str]:
        """`argv` started by a shell that first moves itself into the cgroup (its children inherit it)."""
        return [shell, "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path), *argv]

    def members(self) -> set[int]:
        """The process ids in the cgroup now (none once it is gone)."""
        try:
            return {int(pid) for pid in (self.path / "cgroup.procs").read_text().split()}
        except OSError:
            return set()

    def close_later(self) -> None:
        """`close` without holding up the caller (the command's result is ready before the cgroup empties)."""
        task = asyncio.get_running_loop().create_task(self.close())
        _closing.add(task)
        task.add_done_callback(_closing.discard)

    async def close(self) -> None:
        """Remove the cgroup once its processes are gone (they die with bwrap's PID namespace)."""
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # EBUSY: the last processes are still exiting
                await asyncio.sleep(0.02)
        log.warning("pids cgroup %s still busy; left in place", self.path)
