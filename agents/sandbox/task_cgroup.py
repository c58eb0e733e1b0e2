"""A cgroup per task: memory (swap off) and processes bounded for all of a task's sandboxed commands together.

RLIMIT_AS bounds one process's address space; a command that starts several processes adds them up (one
command held 803 MB under a 256 MB setting). Where the machine lets the bot make cgroups, each task gets one:

- cgroup v1 (the `memory` hierarchy, and `pids` when writable): `memory.limit_in_bytes` and, where swap accounting is
  on, `memory.memsw.limit_in_bytes` at the same value (no swap on top), and `pids.max`;
- cgroup v2: `memory.max`, `memory.swap.max = 0` and `pids.max`, only where the bot's own cgroup can hand the memory
  and pids controllers to children (the "no internal processes" rule forbids it while the bot lives in a non-root
  cgroup that was not delegated with those controllers enabled).

Every sandboxed command of the task joins it from a small shell before it execs bwrap, so nothing of it runs outside.
The kernel's OOM killer then ends a process of the task when the task as a whole passes the limit. The cgroup is
removed (its leftover processes killed) when the task ends; ones a dead bot process left behind are removed at
start-up. Where no cgroup can be made, `support()` says why and only the per-process rlimits apply.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import signal
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
PARENT_NAME = "agentlab-tasks"
# the last part of a task cgroup's folder name: process-wide, as names must differ across all owners (one cgroup tree)
_serial = itertools.count(1)
JOIN_SCRIPT = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'


@dataclass(frozen=True)
class CgroupSupport:
    """Where task cgroups go: `parents` (one per hierarchy; empty when none can be made) and a sentence saying so."""

    version: int  # 1 or 2; 0 when no cgroup can be made
    memory_parent: Path | None
    pids_parent: Path | None
    swap_bounded: bool
    description: str

    @property
    def available(self) -> bool:
        return self.memory_parent is not None


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """controller (or "" for v2) → the bot's own cgroup path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                paths[controller] = parts[2]
    return paths


def _make_parent(folder: Path, probe: str) -> Path | None:
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return None
    if not ((folder / probe).exists() and os.access(folder, os.W_OK)):
        return None
    return folder


def _v1_support(own: dict[str, str]) -> CgroupSupport | None:
    if "memory" not in own or not (CGROUP_ROOT / "memory" / "cgroup.procs").exists():
        return None
    memory = _make_parent(CGROUP_ROOT / "memory" / own["memory"].lstrip("/") / PARENT_NAME, "memory.limit_in_bytes")
    if memory is None:
        return None
    pids = None
    if "pids" in own and (CGROUP_ROOT / "pids" / "cgroup.procs").exists():
        pids = _make_parent(CGROUP_ROOT / "pids" / own["pids"].lstrip("/") / PARENT_NAME, "pids.max")
    swap = (memory / "memory.memsw.limit_in_bytes").exists()
    said = "a cgroup-v1 memory" + (" and pids" if pids else "") + " cgroup per task"
    said += "" if swap else " (swap accounting is off in this kernel: swap is not bounded)"
    return CgroupSupport(1, memory, pids, swap, said)


def _v2_support(own: dict[str, str]) -> CgroupSupport | None:
    root = CGROUP_ROOT if (CGROUP_ROOT / "cgroup.controllers").exists() else CGROUP_ROOT / "unified"
    if "" not in own or not (root / "cgroup.controllers").exists():
        return None
    mine = root / own[""].lstrip("/")
    try:
        if not {"memory", "pids"} <= set((mine / "cgroup.controllers").read_text().split()):
            return None
        enabled = set((mine / "cgroup.subtree_control").read_text().split())
        if not {"memory", "pids"} <= enabled:
            (mine / "cgroup.subtree_control").write_text("+memory +pids")  # EBUSY while we live in `mine`
        parent = _make_parent(mine / PARENT_NAME, "memory.max")
        if parent is None:
            return None
        (parent / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError:
        return None
    return CgroupSupport(2, parent, parent, True, "a cgroup-v2 cgroup per task (memory, swap off, pids)")


@functools.cache
def support() -> CgroupSupport:
    """Probed once per bot process; stale task cgroups of dead bot processes are removed on the way."""
    try:
        own = _own_paths(Path("/proc/self/cgroup").read_text())
    except OSError:
        own = {}
    found = _v2_support(own) or _v1_support(own)
    if found is None:
        return CgroupSupport(
            0,
            None,
            None,
            False,
            "no writable memory cgroup (v2 with memory+pids delegated, or v1 memory): a task's memory is bounded "
            "only per process (RLIMIT_AS), so several processes of one command add up",
        )
    for parent in {found.memory_parent, found.pids_parent} - {None}:
        _remove_stale(parent)
    return found


def _remove_stale(parent: Path | None) -> None:
    """Task cgroups a bot process left behind when it ended before cleaning up (its pid is gone)."""
    if parent is None:
        return
    for child in parent.glob("task-*-*"):
        owner = child.name.split("-")[1]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            _kill_members(child)
            with contextlib.suppress(OSError):
                child.rmdir()


def _members(folder: Path) -> list[str]:
    """The process ids in the cgroup folder (none when it is gone)."""
    try:
        return (folder / "cgroup.procs").read_text().split()
    except OSError:
        return []


def _kill_members(folder: Path) -> None:
    for pid in _members(folder):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


class TaskCgroup:
    """One task's cgroup (one folder per hierarchy): `wrap` a command's argv into it, `close` it at the task's end."""

    def __init__(self, folders: list[Path], memory: Path, version: int) -> None:
        self.folders, self.memory, self.version = folders, memory, version

    @classmethod
    def create(cls, name: str, memory_bytes: int, max_processes: int) -> TaskCgroup | None:
        found = support()
        if found.memory_parent is None:
            return None
        # unique in this process: a folder an earlier run left (its close cancelled, or still busy) is never reused
        folder_name = f"task-{os.getpid()}-{name}-{next(_serial)}"
        folders: list[Path] = []
        try:
            if found.version == 2:
                folder = found.memory_parent / folder_name
                folder.mkdir()
                folders.append(folder)
                (folder / "memory.max").write_text(str(memory_bytes))
                with contextlib.suppress(FileNotFoundError):
                    (folder / "memory.swap.max").write_text("0")
                (folder / "pids.max").write_text(str(max_processes))
            else:
                folder = found.memory_parent / folder_name
                folder.mkdir()
                folders.append(folder)
                (folder / "memory.limit_in_bytes").write_text(str(memory_bytes))
                if found.swap_bounded:
                    (folder / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
                if found.pids_parent is not None:
                    pids = found.pids_parent / folder_name
                    pids.mkdir()
                    folders.append(pids)
                    (pids / "pids.max").write_text(str(max_processes))
        except OSError as err:
            log.warning("no cgroup for task %s (%s); only the per-process limits bound it", name, err)
            for made in reversed(folders):
                with contextlib.suppress(OSError):
                    made.rmdir()
            return None
        return cls(folders, folder, found.version)

    @property
    def bounds_processes(self) -> bool:
        return self.version == 2 or len(self.folders) > 1

    def wrap(self, argv: list[str], shell: str = "/bin/sh") -> list[str]:
        """`argv` started by a shell that first moves itself into every folder of the cgroup (children inherit it)."""
        procs = [str(folder / "cgroup.procs") for folder in self.folders]
        return [shell, "-c", JOIN_SCRIPT, "sh", str(len(procs)), *procs, *argv]

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer ended in this cgroup so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            text = (self.memory / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def members(self) -> set[int]:
        """The process ids in the cgroup now."""
        return {int(pid) for folder in self.folders for pid in _members(folder) if pid.isdigit()}

    async def kill_members(self, wait_seconds: float = 2.0) -> None:
        """Kill what is in the cgroup now and wait (at most `wait_seconds`) until none of it is left; the cgroup stays
        for the task's later commands."""
        for _ in range(max(1, int(wait_seconds / 0.02))):
            for folder in self.folders:
                _kill_members(folder)
            if not any(_members(folder) for folder in self.folders):
                return
            await asyncio.sleep(0.02)
        log.warning("task cgroup %s: processes still exiting after %.0f s", self.memory, wait_seconds)

    async def close(self) -> None:
        """Kill what is left in the cgroup and remove it (the task has ended)."""
        for folder in self.folders:
            for _ in range(100):
                _kill_members(folder)
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY: the last processes are still exiting
                    await asyncio.sleep(0.02)
            else:
                log.warning("task cgroup %s still busy; left in place", folder)
