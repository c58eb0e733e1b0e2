"""Pausing a task's processes while the bot works on its worktree outside the sandbox.

The bot's own git (a commit of the worker's turn) reads the worktree by path: git looks at a folder once, then opens
the files below it by name. A service of the task that swaps that folder for a symlink out of the worktree in
between made git commit files of the host (a neighbour's workspace, the bot's `.env`), which the worker then reads
back from the repository's objects. While the bot works on the worktree, every process of the task is therefore
stopped (SIGSTOP, which no process can catch or ignore) and continued afterwards (SIGCONT): the services' processes
and all their descendants (a process whose parent exits is adopted within the sandbox's PID namespace, whose first
process descends from the service's bwrap, so none leaves the tree), and whatever is in the task's cgroup.

A process is counted as stopped only once the kernel says so (`/proc/PID/stat` state `T`): one inside a system call
finishes it first. The listing is repeated until it finds no process not stopped yet, so one forked meanwhile is
stopped too. One that does not stop within STOP_SECONDS (stuck in the kernel) is killed rather than left running;
one that outlasts even that stops the bot's work on the worktree (ToolError).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Iterable

from agents.core.errors import ToolError

log = logging.getLogger(__name__)

STOP_SECONDS = 2.0  # how long a process may take to stop before it is killed
MAX_ROUNDS = 20  # listings of the task's processes (each stops those found running) before giving up
_POLL_SECONDS = 0.002


def _state_and_parent(pid: str) -> tuple[str, int] | None:
    """The process's state letter and parent pid from `/proc/PID/stat` (None: it has gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            text = stat_file.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # the name, in brackets, may hold spaces and brackets
    return (fields[0], int(fields[1])) if len(fields) > 1 else None


def tree(roots: Iterable[int]) -> set[int]:
    """`roots` (those still running) and every descendant of theirs, from one pass over /proc."""
    children: dict[int, list[int]] = {}
    alive: set[int] = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (found := _state_and_parent(entry.name)) is not None:
            pid = int(entry.name)
            alive.add(pid)
            children.setdefault(found[1], []).append(pid)
    found_pids: set[int] = set()
    pending = [pid for pid in roots if pid in alive]
    while pending:
        pid = pending.pop()
        if pid not in found_pids:
            found_pids.add(pid)
            pending.extend(children.get(pid, ()))
    return found_pids


def state(pid: int) -> str | None:
    """The process's state letter as /proc shows it (`T`: stopped; None: it has gone)."""
    found = _state_and_parent(str(pid))
    return found[0] if found is not None else None


def _stopped(pid: int) -> bool:
    """Whether the process is stopped, a zombie, or gone (it can change nothing any more)."""
    found = state(pid)
    return found is None or found in "TtZX"


async def stop(processes: Callable[[], set[int]], signalled: set[int]) -> None:
    """Stop every process `processes()` lists, listing again until none is left running; each one signalled is
    added to `signalled` at once (a caller cancelled meanwhile still knows whom to continue). After MAX_ROUNDS
    listings that still found one running (stuck in the kernel even after SIGKILL), ToolError: the bot's work on the
    worktree does not go ahead beside it."""
    for _ in range(MAX_ROUNDS):
        running = {pid for pid in processes() if not _stopped(pid)}
        if not running:
            return
        signalled |= running
        for pid in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        waited = 0.0
        while not all(_stopped(pid) for pid in running):
            if waited >= STOP_SECONDS:
                stuck = [pid for pid in running if not _stopped(pid)]
                log.warning("task processes %s did not stop within %.0f s: killed", stuck, STOP_SECONDS)
                for pid in stuck:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                break
            await asyncio.sleep(_POLL_SECONDS)
            waited += _POLL_SECONDS
    raise ToolError("the task's processes could not be stopped, so its worktree was left as it is")


def resume(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


@contextlib.asynccontextmanager
async def paused(processes: Callable[[], set[int]]) -> AsyncIterator[None]:
    """Every process `processes()` lists is stopped for the body, then continued (also when the body fails or is
    cancelled)."""
    signalled: set[int] = set()
    try:
        await stop(processes, signalled)
        yield
    finally:
        resume(signalled)


class RunningCommands:
    """A task's commands as the bot runs them: the first process of each one running now (`pids`), how many have
    started (`started`: whether the task ran something since a given moment), and a gate. While the task's processes
    are stopped (`held`) no new command starts: one spawned then, its pid not known to the bot until the spawn
    returns, would run through the pause (its first statements did, under load)."""

    def __init__(self) -> None:
        self.pids: set[int] = set()
        self.started = 0
        self._spawning = 0
        self._holds = 0
        self._open = asyncio.Event()
        self._open.set()

    def __bool__(self) -> bool:
        """Whether one runs now (or is being started)."""
        return bool(self.pids) or self._spawning > 0

    @contextlib.asynccontextmanager
    async def spawning(self) -> AsyncIterator[Callable[[int], None]]:
        """Around a command's start, once no pause holds it: the body starts the process and calls what it is given
        with the pid, before any pause can begin."""
        await self._open.wait()
        self._spawning += 1
        try:
            yield self._add
        finally:
            self._spawning -= 1

    def _add(self, pid: int) -> None:
        self.started += 1
        self.pids.add(pid)

    def ended(self, pid: int) -> None:
        self.pids.discard(pid)

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """No command starts during the body; one being started now is waited for (its pid then known)."""
        self._holds += 1
        self._open.clear()
        try:
            while self._spawning:
                await asyncio.sleep(_POLL_SECONDS)
            yield
        finally:
            self._holds -= 1
            if not self._holds:
                self._open.set()
