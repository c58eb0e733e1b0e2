"""The outbox: what the bot owes a chat, stored before the first try to send it (delivery.py sends and retries)."""

from __future__ import annotations

from agents.core.models import Delivery, utcnow
from agents.store.connection import Connection, to_db


class OutboxTable(Connection):
    """The `deliveries` table; a part of `Store`."""

    async def add_delivery(self, delivery: Delivery) -> Delivery:
        delivery.id = await self.insert("deliveries", delivery)
        return delivery

    async def delivery_done(self, delivery_id: int) -> None:
        await self.write(
            "UPDATE deliveries SET delivered_at = ?, attempts = attempts + 1 WHERE id = ?",
            (to_db(utcnow()), delivery_id),
        )

    async def delivery_failed(self, delivery_id: int, error: str) -> None:
        await self.write(
            "UPDATE deliveries SET attempts = attempts + 1, last_error = ? WHERE id = ?", (error[:500], delivery_id)
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
