"""The schedules table: work that starts by itself, per conversation (the firing is agents/work/schedule_book.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents.core.ids import valid_id
from agents.core.models import Schedule, ScheduleStatus
from agents.store.connection import Connection, to_db

_LIVE = tuple(s.value for s in ScheduleStatus if s.is_live)


class ScheduleTable:
    """Reads and writes of `schedules`; `Store.schedules` hands one out."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def add(self, schedule: Schedule) -> Schedule:
        schedule.id = await self._store.insert("schedules", schedule)
        return schedule

    async def get(self, schedule_id: int) -> Schedule | None:
        if not valid_id(schedule_id):
            return None
        found = await self._select("WHERE id = ?", (schedule_id,))
        return found[0] if found else None

    async def live(self, chat_id: int | None = None) -> list[Schedule]:
        """Active and paused schedules, of one conversation or of all, oldest first."""
        where = f"WHERE status IN ({', '.join('?' for _ in _LIVE)})"
        if chat_id is None:
            return await self._select(where, _LIVE)
        return await self._select(where + " AND chat_id = ?", (*_LIVE, chat_id))

    async def active(self) -> list[Schedule]:
        return await self._select("WHERE status = ?", (ScheduleStatus.ACTIVE.value,))

    async def update(self, schedule_id: int, **fields: Any) -> None:
        if fields:
            sets = ", ".join(f"{k} = ?" for k in fields)
            await self._store.write(
                f"UPDATE schedules SET {sets} WHERE id = ?", (*(to_db(v) for v in fields.values()), schedule_id)
            )

    async def move(
        self, schedule_id: int, from_statuses: Iterable[ScheduleStatus], to: ScheduleStatus, **fields: Any
    ) -> bool:
        """Atomically move a schedule from one of `from_statuses` to `to` (with `fields`); False when it was in none."""
        values = [s.value for s in from_statuses]
        sets = "".join(f", {k} = ?" for k in fields)
        rows = await self._store.write(
            f"UPDATE schedules SET status = ?{sets} WHERE id = ? AND status IN ({', '.join('?' for _ in values)}) "
            "RETURNING id",
            (to.value, *(to_db(v) for v in fields.values()), schedule_id, *values),
        )
        return bool(rows)

    async def _select(self, where: str, params: Iterable[Any]) -> list[Schedule]:
        return await self._store.fetch(Schedule, f"SELECT * FROM schedules {where} ORDER BY id", params)
