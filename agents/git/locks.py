"""One lock per repository, and the watchers (repo_guard) kept exact around every change the bot makes itself.

Both are process-wide on purpose: they stand for the repository on disk, of which there is one per path whoever
works on it; owners with registries of their own would take different locks for one `.git` and race on it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

_repo_locks: dict[Path, asyncio.Lock] = {}


def repo_lock(repo: Path) -> asyncio.Lock:
    """One lock per repository for operations on its shared state (worktree list, branches, config, merges)."""
    key = repo.resolve()
    lock = _repo_locks.get(key)
    if lock is None:
        lock = _repo_locks[key] = asyncio.Lock()
    return lock


class RepositoryWatcher(Protocol):
    """Something that keeps a snapshot of a repository's shared state (see repo_guard.RepositoryGuard)."""

    async def verify(self) -> None:
        """Compare with the snapshot and undo what moved (the caller holds the repository lock)."""

    async def resnapshot(self) -> None:
        """Take the snapshot again (after the bot itself changed the repository)."""

    def paused(self) -> contextlib.AbstractAsyncContextManager[None]:
        """The processes that could change the repository behind the snapshot (a task's) stopped for the body."""


_watchers: dict[Path, set[RepositoryWatcher]] = {}


def watch(repo: Path, watcher: RepositoryWatcher) -> None:
    _watchers.setdefault(Path(repo).resolve(), set()).add(watcher)


def unwatch(repo: Path, watcher: RepositoryWatcher) -> None:
    _watchers.get(Path(repo).resolve(), set()).discard(watcher)


def watchers(repo: Path) -> list[RepositoryWatcher]:
    """Every watcher of the repository now (each task's guard)."""
    return list(_watchers.get(Path(repo).resolve(), ()))


@contextlib.asynccontextmanager
async def bot_writes(repo: Path) -> AsyncIterator[None]:
    """Hold the repository lock around a change the bot makes to its refs or config, keeping the watchers exact.

    Before: every watcher undoes what a worker moved (so it is not mistaken for the bot's). After: every watcher takes
    its snapshot again, so the bot's own change is not undone. Meanwhile the watched tasks' processes are stopped: a
    worker's command that moved a ref while the bot wrote (another task's commit, worktree or merge) was taken into
    the snapshots as if the bot had moved it, and never undone.
    """
    async with repo_lock(repo), contextlib.AsyncExitStack() as stopped:
        watching = watchers(repo)
        for watcher in watching:
            await stopped.enter_async_context(watcher.paused())
        for watcher in watching:
            await watcher.verify()
        try:
            yield
        finally:
            for watcher in watching:
                await watcher.resnapshot()
