"""One lock per task branch: the decisions on a branch (Merge, Discard) and the follow-ups that continue it (Fix CI,
a mention on its pull request) take turns, so a Discard never deletes a branch a follow-up was just started on, and
Merge and Discard pressed at once have one outcome."""

from __future__ import annotations

import asyncio
import weakref


class BranchLocks:
    """`of(workspace, branch)`: the lock of that branch (made on first use, dropped when nobody holds or waits)."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = weakref.WeakValueDictionary()

    def of(self, workspace: str, branch: str) -> asyncio.Lock:
        lock = self._locks.get((workspace, branch))
        if lock is None:
            lock = self._locks[(workspace, branch)] = asyncio.Lock()
        return lock
