"""Model usage: the tokens of every Messages API call, per chat, task and user, read back since the start of a day
or a month (the budgets)."""

from __future__ import annotations

from datetime import datetime

from agents.core.models import Usage, UsageRecord, utcnow
from agents.store.connection import Connection, to_db


class UsageTable(Connection):
    """The `usage` table; a part of `Store`."""

    async def record_usage(self, record: UsageRecord) -> None:
        record.id = await self.insert("usage", record)

    async def usage_since(self, since: datetime) -> list[UsageRecord]:
        """Every call since `since`, oldest first."""
        return await self.fetch(UsageRecord, "SELECT * FROM usage WHERE created_at >= ? ORDER BY id", (to_db(since),))

    async def task_usage(self, task_id: int, after: int = 0) -> list[UsageRecord]:
        """One task's calls, oldest first; `after`: only the rows recorded after the row of that id."""
        return await self.fetch(
            UsageRecord, "SELECT * FROM usage WHERE task_id = ? AND id > ? ORDER BY id", (task_id, after)
        )

    async def total_since(self, since: datetime) -> Usage:
        """The tokens of every call since `since`, summed by the database (the budget's check before each model call
        reads no rows)."""
        [row] = await self.rows(
            "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),"
            " COALESCE(SUM(cache_creation_input_tokens), 0), COALESCE(SUM(cache_read_input_tokens), 0)"
            " FROM usage WHERE created_at >= ?",
            (to_db(since),),
        )
        return Usage(
            input_tokens=row[0],
            output_tokens=row[1],
            cache_creation_input_tokens=row[2],
            cache_read_input_tokens=row[3],
        )


def start_of_day(now: datetime | None = None) -> datetime:
    now = now or utcnow()
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def start_of_month(now: datetime | None = None) -> datetime:
    return start_of_day(now).replace(day=1)
