"""Model usage: the tokens of every Messages API call, per chat, task and user, read back since the start of a day
or a month (the budgets)."""

from __future__ import annotations

from datetime import datetime

from agents.core.models import UsageRecord, utcnow
from agents.store.connection import Connection, to_db


class UsageTable(Connection):
    """The `usage` table; a part of `Store`."""

    async def record_usage(self, record: UsageRecord) -> None:
        record.id = await self.insert("usage", record)

    async def usage_since(self, since: datetime, task_id: int | None = None) -> list[UsageRecord]:
        """The calls since `since`, or (with `task_id`) all of one task's calls."""
        if task_id is not None:
            return await self.fetch(UsageRecord, "SELECT * FROM usage WHERE task_id = ? ORDER BY id", (task_id,))
        return await self.fetch(UsageRecord, "SELECT * FROM usage WHERE created_at >= ? ORDER BY id", (to_db(since),))


def start_of_day(now: datetime | None = None) -> datetime:
    now = now or utcnow()
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def start_of_month(now: datetime | None = None) -> datetime:
    return start_of_day(now).replace(day=1)
