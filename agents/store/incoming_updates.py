"""The updates the chat platform pushed to the bot (webhook mode), each stored as it arrived, before the bot answers
the push: once Telegram has its 200 it forgets the update, so one still waiting for its turn when the bot is killed
would be lost. At the next start the kept ones are handled again; those handled before are known by their keys
(seen_events.py) and do nothing. Rows older than KEPT are dropped: any update that old was handled or told of."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from agents.core.models import utcnow

if TYPE_CHECKING:
    from agents.store.connection import Connection

KEPT = timedelta(hours=6)  # well under how long the bot remembers a handled update (a day and more)


class IncomingUpdates:
    """Reads and writes of the `incoming_updates` table; `Store.incoming_updates` hands one out."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def arrived(self, update_id: int, body: str) -> None:
        """Keep the update's JSON (once: a push repeated keeps the first), and drop those past KEPT."""
        now = utcnow()
        await self._store.write(
            "INSERT OR IGNORE INTO incoming_updates (update_id, body, received_at) VALUES (?, ?, ?)",
            (update_id, body, now.isoformat()),
        )
        await self._store.write("DELETE FROM incoming_updates WHERE received_at < ?", ((now - KEPT).isoformat(),))

    async def kept(self) -> list[str]:
        """The updates kept, oldest first (their JSON)."""
        rows = await self._store.rows("SELECT body FROM incoming_updates ORDER BY update_id")
        return [str(row[0]) for row in rows]
