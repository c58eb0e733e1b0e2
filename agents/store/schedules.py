"""The schedules table: work that starts by itself, per conversation (the firing is agents/work/schedules.py)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agents.core.ids import valid_id
from agents.core.models import Schedule, ScheduleStatus

if TYPE_CHECKING:
    from agents.store.connection import Connection

_LIVE = tuple(s.value for s in ScheduleStatus if s.is_live)


def _db(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if hasattr(value, "value"):  # enums
        return value.value
    return value


class ScheduleTable:
    """Reads and writes of `schedules`; `Store.schedules` hands one out."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def add(self, schedule: Schedule) -> Schedule:
        data = {k: _db(v) for k, v in schedule.model_dump().items() if k != "id"}
        rows = await self._store.write(
            f"INSERT INTO schedules ({', '.join(data)}) VALUES ({', '.join('?' for _ in data)}) RETURNING id",
            tuple(data.values()),
        )
        schedule.id = int(rows[0][0])
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
                f"UPDATE schedules SET {sets} WHERE id = ?", (*(_db(v) for v in fields.values()), schedule_id)
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
            (to.value, *(_db(v) for v in fields.values()), schedule_id, *values),
        )
        return bool(rows)

    async def _select(self, where: str, params: Iterable[Any]) -> list[Schedule]:
        rows = await self._store.rows(f"SELECT * FROM schedules {where} ORDER BY id", params)
        return [Schedule.model_validate(dict(row)) for row in rows]
