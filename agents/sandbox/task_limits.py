"""What bounds a task as a whole, across all its commands: its cgroup (memory, processes) and its disk budget.

The disk budget (`SANDBOX_MAX_DISK_MB`) is how much the task's worktree may grow beyond what it held when the task's
first command ran (in its first run: a resumed task's budget is not fresh), counted in allocated blocks (a `fallocate`d
or sparse file counts for what it really takes; hard links once). A small worktree (counted in under
`CHEAP_WALK_SECONDS`) is counted every `POLL_SECONDS` while a command runs and after it. A larger one is counted when a
cheap `statvfs` of its file system shows growth, since the last count, beyond what the budget has left, and at least
every `FULL_WALK_SECONDS` while a command runs (so deletions elsewhere on the file system cannot hide growth for long),
never taking more than ~4% of the time in counting.
Past the budget the command is killed and the files it wrote are deleted, largest first (then files written
recently by the commands before it, largest first), until the task is back within its budget, so it can go on.
The poll is precise but not instant: what a command writes and deletes between two looks passes it. Where the machine
allows one, the worktree is a file system of its own (agents/sandbox/task_disk.py), a hard ceiling at the budget
that no burst passes; there `statvfs` of the worktree counts this task's file system alone.
The private `/tmp` and home are not on disk: they are size-bounded tmpfs mounts (SANDBOX_TMP_MB) that end with each
command, and their pages count against the task's memory cgroup.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agents.core.secrets_filter import SecretScope
from agents.sandbox import pause
from agents.sandbox.safe_paths import WALK_DEPTH, unlink_file, walk_entries
from agents.sandbox.task_cgroup import TaskCgroup
from agents.sandbox.task_cgroup import support as task_cgroup_support
from agents.sandbox.task_net import TaskNet
from agents.sandbox.user_net import TUN_DEVICE, TUN_FIX, missing_tools, tun_available

log = logging.getLogger(__name__)

POLL_SECONDS = 0.2
FULL_WALK_SECONDS = 5.0
CHEAP_WALK_SECONDS = 0.02  # a worktree counted this fast is counted after every command
RECENT_SECONDS = 600.0  # files changed this recently may be deleted to get a task back within its disk budget


DEFAULT_DISK_CAP = 10 << 30  # the default budget follows the free space, up to this


def default_disk_budget(where: Path) -> int:
    """A task's disk budget when SANDBOX_MAX_DISK_MB is unset: a quarter of the space free where the worktrees are
    (so one task cannot fill the disk a small machine has), at most 10 GB, at least 16 MB."""
    place = Path(where)
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        free = shutil.disk_usage(place).free
    except OSError:
        return DEFAULT_DISK_CAP
    return max(16 << 20, min(DEFAULT_DISK_CAP, free // 4))


def disk_budget(configured_mb: int | None, where: Path) -> int:
    """The budget in bytes: SANDBOX_MAX_DISK_MB when set, else `default_disk_budget`."""
    return configured_mb << 20 if configured_mb is not None else default_disk_budget(where)


ENTRY_BYTES = 4096  # what an entry costs at least (its inode, its name): an empty file or a short link has no blocks
UNSEEN_FOLDER_BYTES = 1 << 30  # a folder too deep to walk: what is below it cannot be counted, so it counts as this


def allocated_bytes(root: Path) -> int:
    """Bytes allocated on disk to everything under `root` (not following symlinks, hard links counted once), each
    entry at least ENTRY_BYTES (sixty thousand empty files are sixty thousand inodes of the host's file system), and
    a folder the walk does not enter (WALK_DEPTH deep) at UNSEEN_FOLDER_BYTES: nesting hides nothing from the budget."""
    total, seen = 0, set()
    for relative, info in walk_entries(root):
        if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
        total += max(info.st_blocks * 512, ENTRY_BYTES)
        if stat.S_ISDIR(info.st_mode) and relative.count("/") + 1 >= WALK_DEPTH:
            total += UNSEEN_FOLDER_BYTES
    return total


def fs_used(root: Path) -> int:
    """Bytes in use on the file system holding `root` (one statvfs: cheap enough to poll)."""
    try:
        fs = os.statvfs(root)
    except OSError:
        return 0
    return (fs.f_blocks - fs.f_bfree) * fs.f_frsize


@dataclass
class DiskBudget:
    """How much the worktree `root` may grow during the task; `watch` while a command runs, `check` after it."""

    root: Path
    budget_bytes: int
    baseline: int | None = None
    last_usage: int = 0
    fs_mark: int = 0  # bytes in use on the worktree's file system at the last walk
    walk_seconds: float = 0.0  # how long the last walk took
    command_started: float = 0.0  # wall-clock time the current command started (its files are deleted first)
    logged_bytes: int = 0  # what the task's services wrote to their logs (outside the worktree, counted here too)
    on_baseline: Callable[[int], Awaitable[None]] | None = None  # keeps the baseline once counted, for a later run

    def count_logged(self, size: int) -> None:
        """`size` more bytes of the task's services' logs count against the budget."""
        self.logged_bytes += size

    async def start(self) -> None:
        """Called before each command: the first call counts the baseline (unless an earlier run of the task did)."""
        self.command_started = time.time()
        if self.baseline is None:
            self.baseline = await self._walk()
            if self.on_baseline is not None:  # a resume counts from here too, not from what this run writes
                await self.on_baseline(self.baseline)

    @property
    def grown(self) -> int:
        return self.last_usage - (self.baseline or 0) + self.logged_bytes

    async def _walk(self) -> int:
        self.fs_mark = fs_used(self.root)
        started = time.monotonic()
        self.last_usage = await asyncio.to_thread(allocated_bytes, self.root)
        self.walk_seconds = time.monotonic() - started
        return self.last_usage

    async def over(self, force: bool = False) -> bool:
        """Whether the task is past its budget. A small worktree (a walk under CHEAP_WALK_SECONDS) is counted every
        time; a large one only when its file system grew, since the last count, by more than the budget has left
        (so growth spread over several commands is seen too, unless deletions elsewhere hide it)."""
        cheap = self.walk_seconds <= CHEAP_WALK_SECONDS
        if not (force or cheap) and fs_used(self.root) - self.fs_mark <= self.budget_bytes - self.grown:
            return False
        await self._walk()
        return self.grown > self.budget_bytes

    async def watch(self, kill: Callable[[], None]) -> None:
        """Poll until the budget is exceeded, then `kill` the command and return. The caller cleans up (`exceeded`)
        once the command's processes are gone: one still in the middle of a write would add to a file after it."""
        last_walk = time.monotonic()
        while True:
            await asyncio.sleep(POLL_SECONDS)
            # a full count at most every ~4% of the time it takes (at least every FULL_WALK_SECONDS)
            force = time.monotonic() - last_walk > min(FULL_WALK_SECONDS, max(POLL_SECONDS, 25 * self.walk_seconds))
            if force:
                last_walk = time.monotonic()
            if await self.over(force):
                kill()
                return

    async def exceeded(self) -> str:
        removed = await asyncio.to_thread(self._clean)
        limit = self.budget_bytes >> 20
        said = f"The command was stopped: the task's files grew past its disk budget of {limit} MB"
        said += " (SANDBOX_MAX_DISK_MB)"
        if removed:
            count = "1 recent file was" if len(removed) == 1 else f"{len(removed)} recent files, largest first, were"
            said += f"; {count} deleted to get back within it ({', '.join(removed[:3])}"
            said += ", ...)" if len(removed) > 3 else ")"
        return said + "."

    def _clean(self, since_seconds: float = RECENT_SECONDS) -> list[str]:
        """Delete recent files (changed in the last `since_seconds`) until back within budget: first those the stopped
        command wrote, largest first, then those of the commands shortly before it (growth can add up over several
        commands). The stopped command's files go first even when smaller: it may have been killed mid-write."""
        self.last_usage = allocated_bytes(self.root)
        recent = time.time() - since_seconds
        candidates = sorted(
            (
                # this command's first, largest first; of equal ones the newest
                (info.st_ctime >= self.command_started, info.st_blocks, info.st_ctime, path)
                for path, info in walk_entries(self.root)
                if stat.S_ISREG(info.st_mode) and info.st_ctime >= recent and "/.git/" not in f"/{path}"
            ),
            reverse=True,
        )
        removed: list[str] = []
        for _, blocks, _, path in candidates:
            if self.grown <= self.budget_bytes:
                break
            with contextlib.suppress(OSError):  # gone, or a folder on its way is a link now (UnsafePath)
                unlink_file(self.root, path)
                self.last_usage -= blocks * 512
                removed.append(path)
        self.fs_mark = fs_used(self.root)
        self.last_usage = allocated_bytes(self.root)
        return removed


class ServiceSet(Protocol):
    """What the task's services (agents/sandbox/services.py's TaskServices) offer through its bounds; a Protocol
    because that module builds on this one."""

    def exit_notes(self) -> list[str]:
        """One sentence per service that exited since the last call."""
        ...

    def pids(self) -> list[int]:
        """The process id of each service still running (its bwrap; the sandbox's processes descend from it)."""
        ...


@dataclass
class TaskBounds:
    """One task's shared limits, made when the task starts and closed when it ends (TaskExecutor): its cgroup, disk
    budget, network namespace (agents/sandbox/task_net.py), services (agents/sandbox/services.py keeps them in
    `services`; `closers` run first at close, so nothing the task started outlives it) and the scope of the secret
    values its credential files hold (`secrets`, made by the process's filter: forgotten at close; None where no
    task's values are read, as in the doctor's MCP probe)."""

    name: str
    memory_bytes: int
    max_processes: int
    disk: DiskBudget | None = None  # `watch_disk`
    max_services: int = 4
    net: TaskNet = field(default_factory=TaskNet)
    services: ServiceSet | None = None  # the task's TaskServices, made at its first service (`services_started`)
    service_logs: Path | None = None  # the bot-side folder of the services' logs, shown read-only in every command
    own_logs: Path | None = None  # the logs of the bot's own programs in the sandbox (MCP servers): shown to none
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    secrets: SecretScope | None = None  # the values the task's credential files hold: masked until it ends
    commands: pause.RunningCommands = field(default_factory=pause.RunningCommands)  # `run_command`'s, running now
    _cgroup: TaskCgroup | None = None
    _made: bool = False

    def watch_disk(self, budget: DiskBudget) -> None:
        """From now on `budget` is the task's disk budget (its worktree is known), unless one already is."""
        if self.disk is None:
            self.disk = budget

    def services_started(
        self, services: ServiceSet, logs: Path, own_logs: Path, close: Callable[[], Awaitable[None]]
    ) -> None:
        """The task's services (made at its first one), the folders of their logs (the worker's services', the bot's
        own programs') and how they end (first at close)."""
        self.services, self.service_logs, self.own_logs = services, logs, own_logs
        self.closers.append(close)

    def service_logs_gone(self) -> None:
        """The services' log folders were removed: commands no longer show (or cover) them."""
        self.service_logs = self.own_logs = None

    def cgroup(self) -> TaskCgroup | None:
        """The task's cgroup, made at its first command (None where the machine allows none)."""
        if not self._made:
            self._made = True
            self._cgroup = TaskCgroup.create(self.name, self.memory_bytes, self.max_processes)
        return self._cgroup

    def disk_for(self, worktree: Path) -> DiskBudget | None:
        return self.disk if self.disk is not None and self.disk.root == worktree else None

    async def end_processes(self) -> None:
        """Every process the task started ends now: its services, browser and MCP servers (`closers`), and whatever is
        left in its cgroup. The task's work is over; the bot works on its worktree once more (the last commit, then
        the checkout's removal), and nothing of the task may change the worktree under it meanwhile (a folder swapped
        for a link between the bot's look and its use would lead the bot, outside any sandbox, out of it)."""
        while self.closers:
            with contextlib.suppress(Exception):
                await self.closers.pop()()
        if self._cgroup is not None:
            await self._cgroup.kill_members()

    def activity(self) -> tuple[int, bool]:
        """(how many commands the task has started, whether something of it runs now: a command, or what lives from
        step to step: services, a browser, MCP servers). The repository guard asks it to tell which tasks could have
        moved a ref, and whether any could."""
        return self.commands.started, bool(self.commands) or bool(self.closers)

    def processes(self) -> set[int]:
        """Every process of the task now: its services, its running commands and their descendants (with SANDBOX=off,
        or where the machine gives no cgroup, these are what the bot knows of), and the members of its cgroup."""
        found = pause.tree({*(self.services.pids() if self.services is not None else ()), *self.commands.pids})
        if self._cgroup is not None:
            found |= self._cgroup.members()
        return found

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """Every process of the task stopped for the body (agents/sandbox/pause.py), then continued, and no command
        of it started meanwhile: the bot's own work on the worktree (a commit) sees no change made under it."""
        async with self.commands.held(), pause.paused(self.processes):
            yield

    async def close(self) -> None:
        await self.end_processes()
        self.net.close()
        if self._cgroup is not None:
            await self._cgroup.close()
            self._cgroup = None
        if self.secrets is not None:
            self.secrets.close()


def sandbox_limit_warnings(network_possible: bool) -> list[str]:
    """What the machine cannot bound here (said at start-up and by `agentlab doctor`); empty when everything holds."""
    warnings = []
    found = task_cgroup_support()
    if not found.available:
        warnings.append(f"no per-task cgroup: {found.description}")
    missing = missing_tools()
    if network_possible and missing:
        warnings.append(
            f"{' and '.join(missing)} not installed: a command allowed the network reaches it only through the "
            "bot's HTTP proxy (public addresses; other protocols do not get out); install "
            f"{' and '.join(missing)} (scripts/install-system-deps.sh)"
        )
    elif network_possible and not tun_available():
        warnings.append(
            f"no tun device the bot may open ({TUN_DEVICE}): a command allowed the network reaches it only through "
            f"the bot's HTTP proxy (public addresses; other protocols do not get out); {TUN_FIX}"
        )
    return warnings
