"""The store's one SQLite connection: single statements, several as one transaction, and records in and out.

Every table's class builds on it. `Store` (database.py) is the connection itself, made of the per-record classes
(messages.py, attachments.py, proposals.py, tasks.py, audit.py, usage.py, outbox.py), each a `Connection` subclass;
the other tables' classes (conversations.py, schedule_table.py, github.py, shown_buttons.py, standing.py, base_runs.py,
repo_index.py) are handed the store's connection and reach it through `self._store`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiosqlite
from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


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
    """An autocommit aiosqlite connection: each statement is one request to aiosqlite's thread and commits itself;
    the few explicit multi-statement transactions (BEGIN … COMMIT) keep every other statement out until they end.

    A single statement holds no lock while it runs: it waits only while a transaction is open, then goes straight
    into aiosqlite's queue, which runs requests in the order they were made. So statements issued together (a turn's
    reads, gathered) reach the thread back to back and their answers come back in one wake-up of the event loop,
    instead of one thread hand-over each (on a busy machine each hand-over waits for a time slice).
    """

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self._lock = asyncio.Lock()  # one transaction at a time
        self._no_transaction = asyncio.Event()  # cleared while a transaction is open
        self._no_transaction.set()

    async def _statement(self, sql: str, params: Iterable[Any]) -> list[aiosqlite.Row]:
        while not self._no_transaction.is_set():
            await self._no_transaction.wait()
        # No await between the check above and aiosqlite queueing the request (its `_execute` puts it on the queue
        # before its first await): a transaction opened after the check queues its BEGIN behind this statement.
        return list(await self._db.execute_fetchall(sql, tuple(params)))

    async def rows(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        return await self._statement(sql, params)

    async def converted_rows(
        self, sql: str, params: Iterable[Any], convert: Callable[[Any], T], chunk: int = 4096
    ) -> list[T]:
        """`convert` of each row of a query, the rows fetched as plain tuples `chunk` at a time: for a query of tens
        of thousands of rows whose caller keeps something smaller, all of them as row objects (and their duplicate
        strings) are never held at once; `rows` holds them all, and aiosqlite's thread keeps its latest answer
        until its next request. No transaction opens while the chunks are read (one may roll back under a
        statement still reading); single statements may come between them, as between any two reads."""
        converted: list[T] = []
        async with self._lock:
            async with self._db.execute(sql, tuple(params)) as cursor:
                cursor.row_factory = None  # plain tuples (handed to `convert`): no row object per row
                while batch := await cursor.fetchmany(chunk):
                    converted.extend(map(convert, batch))
        return converted

    async def write(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        """Run one modifying statement (committed on completion); returns any RETURNING rows."""
        return await self._statement(sql, params)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """Several statements as one transaction, rolled back on any error; no other statement runs meanwhile."""
        async with self._lock:
            self._no_transaction.clear()
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
            finally:
                self._no_transaction.set()

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
