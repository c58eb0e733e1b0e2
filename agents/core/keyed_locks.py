"""One asyncio lock per key, for work on one thing that must take turns: the decisions on a task branch (Merge,
Discard) and the follow-ups that continue it; a conversation's task starts from their count to their storing (so
MAX_WAITING_TASKS holds when two start at once); a schedule's run and its cancel, pause or resume."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class KeyedLocks(Generic[K]):
    """`of(key)`: the lock of that key, made on first use and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[K, asyncio.Lock] = weakref.WeakValueDictionary()

    def of(self, key: K) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock
