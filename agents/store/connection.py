"""The store's one SQLite connection: single statements, several as one transaction, and records in and out.

Every table's class builds on it. `Store` (database.py) is the connection itself, made of the per-record classes
(messages.py, attachments.py, proposals.py, tasks.py, audit.py, usage.py, outbox.py), each a `Connection` subclass;
the other tables' classes (conversations.py, schedules.py, github.py, shown_buttons.py, standing.py, base_runs.py,
repo_index.py) are handed the store's connection and reach it through `self._store`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiosqlite
from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def to_db(value: Any) -> Any:
    """A record's field as SQLite keeps it: datetimes as UTC ISO text, booleans as 0/1, enums by value."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, bool):
        return int(value)
    if hasattr(value, "value"):  # enums
        return value.value
    return value


def insert_sql(table: str, data: dict[str, Any], verb: str = "INSERT") -> str:
    """`INSERT INTO table (columns) VALUES (?, …)` for the keys of `data` (its values are the parameters)."""
    return f"{verb} INTO {table} ({', '.join(data)}) VALUES ({', '.join('?' for _ in data)})"


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

    # ---- records (pydantic models of core/models.py) in and out ------------------------------------------------
    async def insert(self, table: str, record: BaseModel) -> int:
        """Store a record as a new row (its `id` field, if any, is left to SQLite); the new row's id."""
        data = {k: to_db(v) for k, v in record.model_dump().items() if k != "id"}
        rows = await self.write(insert_sql(table, data) + " RETURNING id", data.values())
        return int(rows[0][0])

    async def fetch(self, model: type[M], sql: str, params: Iterable[Any] = ()) -> list[M]:
        return [model.model_validate(dict(row)) for row in await self.rows(sql, params)]

    async def fetch_one(self, model: type[M], sql: str, params: Iterable[Any] = ()) -> M | None:
        rows = await self.fetch(model, sql, params)
        return rows[0] if rows else None

    async def update(self, table: str, row_id: int, fields: dict[str, Any]) -> None:
        """Set `fields` of the row `row_id` (nothing when there are none)."""
        if not fields:
            return
        sets = ", ".join(f"{k} = ?" for k in fields)
        await self.write(f"UPDATE {table} SET {sets} WHERE id = ?", (*(to_db(v) for v in fields.values()), row_id))
