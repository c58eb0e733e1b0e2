"""The outbox: what the bot owes a chat, stored before the first try to send it (delivery.py sends and retries)."""

from __future__ import annotations

from typing import Any

from agents.core.models import Delivery, TaskEvent, utcnow
from agents.store.connection import Connection, insert_sql, to_db


class OutboxTable(Connection):
    """The `deliveries` table; a part of `Store`."""

    async def add_delivery(self, delivery: Delivery) -> Delivery:
        delivery.id = await self.insert("deliveries", delivery)
        return delivery

    async def end_task_owing(self, task_id: int, fields: dict[str, Any], event: TaskEvent, owed: Delivery) -> Delivery:
        """A task's end and the message it owes its chat (its summary, its proposal), in one transaction: a stop
        between them can leave no task ended without its message in the outbox (sent at the next start)."""
        async with self.transaction() as db:
            sets = ", ".join(f"{k} = ?" for k in fields)
            await db.execute_fetchall(
                f"UPDATE tasks SET {sets} WHERE id = ?", (*(to_db(v) for v in fields.values()), task_id)
            )
            for table, record in (("task_events", event), ("deliveries", owed)):
                data = {k: to_db(v) for k, v in record.model_dump().items() if k != "id"}
                rows = await db.execute_fetchall(insert_sql(table, data) + " RETURNING id", tuple(data.values()))
                record.id = int(next(iter(rows))[0])
        return owed

    async def delivered(self, delivery_id: int) -> bool:
        rows = await self.rows("SELECT delivered_at FROM deliveries WHERE id = ?", (delivery_id,))
        return bool(rows and rows[0][0])

    async def delivery_done(self, delivery_id: int) -> None:
        await self.write(
            "UPDATE deliveries SET delivered_at = ?, attempts = attempts + 1 WHERE id = ?",
            (to_db(utcnow()), delivery_id),
        )

    async def delivery_failed(self, delivery_id: int, error: str, counted: bool = True) -> None:
        """A failed try; `counted` toward giving the message up unless the platform was only unavailable."""
        await self.write(
            "UPDATE deliveries SET attempts = attempts + ?, last_error = ? WHERE id = ?",
            (int(counted), error[:500], delivery_id),
        )

    async def undelivered(self, max_attempts: int) -> list[Delivery]:
        """What is still to be sent (tried fewer than `max_attempts` times), oldest first."""
        return await self.fetch(
            Delivery,
            "SELECT * FROM deliveries WHERE delivered_at IS NULL AND attempts < ? ORDER BY id",
            (max_attempts,),
        )

    async def last_delivery(self, task_id: int) -> Delivery | None:
        """The newest summary or proposal shown for a task."""
        return await self.fetch_one(
            Delivery, "SELECT * FROM deliveries WHERE task_id = ? ORDER BY id DESC LIMIT 1", (task_id,)
        )
