"""The store's one SQLite connection: single statements, and several as one transaction, one at a time.

`Store` (database.py) and `RepoIndex` (repo_index.py) both build on it, so neither needs the other's internals.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiosqlite


class Connection:
    """An autocommit aiosqlite connection: each statement is one round trip to aiosqlite's thread and commits itself;
    the lock keeps other statements out of the few explicit multi-statement transactions (BEGIN … COMMIT)."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self._lock = asyncio.Lock()

    async def rows(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        async with self._lock:
            return list(await self._db.execute_fetchall(sql, tuple(params)))

    async def write(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        """Run one modifying statement (committed on completion); returns any RETURNING rows."""
        async with self._lock:
            return list(await self._db.execute_fetchall(sql, tuple(params)))

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """Several statements as one transaction, rolled back on any error."""
        async with self._lock:
            try:
                await self._db.execute_fetchall("BEGIN")
                yield self._db
                await self._db.execute_fetchall("COMMIT")
            except BaseException:
                # Also when cancelled mid-way: the connection's thread runs requests in order, so this ROLLBACK comes
                # after a BEGIN/COMMIT whose await was cancelled; "no transaction is active" is fine.
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._db.execute_fetchall("ROLLBACK"))
                raise
